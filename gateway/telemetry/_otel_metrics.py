"""The gateway's metric instruments (private).

Owns every instrument the OpenTelemetry implementation records to: the GenAI
client histograms (token usage, operation duration, time to first chunk), the
verification histograms and counters (layer duration, layer verdicts, policy
decisions, judge cost), the named gateway counters of :data:`gateway.telemetry.semconv.COUNTERS`
(created on first use) and the shadow-queue gauge. Without a meter provider the
instruments come from a no-op meter, so callers record unconditionally.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from opentelemetry.metrics import (
    CallbackOptions,
    Counter,
    Histogram,
    Meter,
    MeterProvider,
    NoOpMeter,
    Observation,
)

from gateway.telemetry import semconv as sc
from gateway.telemetry._otel_attrs import clean_attrs

__all__ = ["INSTRUMENTS", "Instruments"]


HISTOGRAM, COUNTER = "histogram", "counter"

INSTRUMENTS: Final[tuple[tuple[str, str, str, str, str], ...]] = (
    # (attribute of Instruments, kind, metric name, unit, description)
    ("token_usage", HISTOGRAM, sc.METRIC_GEN_AI_TOKEN_USAGE, "{token}",
     "Number of input and output tokens used."),
    ("operation_duration", HISTOGRAM, sc.METRIC_GEN_AI_OPERATION_DURATION, "s",
     "GenAI operation duration."),
    ("ttfc", HISTOGRAM, sc.METRIC_GEN_AI_TIME_TO_FIRST_CHUNK, "s",
     "Time to receive the first chunk of a streaming response."),
    ("layer_duration", HISTOGRAM, sc.METRIC_LAYER_DURATION, "s",
     "Verification layer duration."),
    ("layer_verdicts", COUNTER, sc.METRIC_LAYER_VERDICTS, "{verdict}",
     "Verification layer verdicts by policy, mode, layer and verdict."),
    ("decisions", COUNTER, sc.METRIC_DECISIONS, "{decision}",
     "Policy decisions by policy, mode, verdict and action."),
    ("candidate_decisions", COUNTER, sc.METRIC_CANDIDATE_DECISIONS, "{decision}",
     "Candidate policies' would-be decisions, by live policy, candidate, verdict and "
     "action."),
    ("http_server_duration", HISTOGRAM, sc.METRIC_HTTP_SERVER_DURATION, "s",
     "Duration of HTTP server requests."),
    ("judge_cost", COUNTER, sc.METRIC_JUDGE_COST, "{USD}",
     "Judge cost reported by layers."),
    ("upstream_attempts", COUNTER, sc.METRIC_UPSTREAM_ATTEMPTS, "{attempt}",
     "Upstream calls by upstream and outcome (ok, or the retry decision)."),
    ("upstream_served", COUNTER, sc.METRIC_UPSTREAM_SERVED, "{request}",
     "Upstream exchanges by the upstream that served them and the calls they took "
     "(retries and fallbacks included)."),
)
"""The instruments every gateway has, made at start (the named ones of ``semconv``'s
tables are made on first use)."""


class Instruments:
    """The histograms and counters, made once from the meter provider (one attribute
    per row of :data:`INSTRUMENTS`)."""

    token_usage: Histogram
    operation_duration: Histogram
    ttfc: Histogram
    layer_duration: Histogram
    http_server_duration: Histogram
    layer_verdicts: Counter
    decisions: Counter
    candidate_decisions: Counter
    judge_cost: Counter
    upstream_attempts: Counter
    upstream_served: Counter

    def __init__(self, provider: MeterProvider | None) -> None:
        meter: Meter = (provider.get_meter(sc.INSTRUMENTATION_SCOPE)
                        if provider is not None else NoOpMeter(sc.INSTRUMENTATION_SCOPE))
        self.meter = meter
        for attribute, kind, metric, unit, description in INSTRUMENTS:
            create = meter.create_histogram if kind == HISTOGRAM else meter.create_counter
            setattr(self, attribute, create(metric, unit=unit, description=description))
        self._counters: dict[str, Any] = {}
        self._histograms: dict[str, Any] = {}

    def count(self, name: str, value: int = 1,
              attributes: Mapping[str, Any] | None = None) -> None:
        """Add to a named gateway counter (:data:`gateway.telemetry.semconv.COUNTERS`); attribute
        keys are exported under their :data:`gateway.telemetry.semconv.COUNTER_ATTRIBUTES` names."""
        counter = self._counters.get(name)
        if counter is None:
            metric, unit, description = sc.COUNTERS.get(name, (f"verity.{name}", "1", ""))
            counter = self._counters[name] = self.meter.create_counter(
                metric, unit=unit, description=description)
        counter.add(value, _exported(attributes))

    def observe(self, name: str, value: float,
                attributes: Mapping[str, Any] | None = None) -> None:
        """Record to a named histogram (:data:`gateway.telemetry.semconv.HISTOGRAMS`)."""
        hist = self._histograms.get(name)
        if hist is None:
            metric, unit, description, _ = sc.HISTOGRAMS[name]  # buckets: a view (_otel_setup)
            hist = self._histograms[name] = self.meter.create_histogram(
                metric, unit=unit, description=description)
        hist.record(value, _exported(attributes))

    def gauge(self, name: str, value: Callable[[], float | None]) -> None:
        """A named gauge (:data:`gateway.telemetry.semconv.GAUGES`) read at each export
        (``value()`` None: nothing to report)."""
        metric, unit, description = sc.GAUGES[name]

        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            v = value()
            return [] if v is None else [Observation(v)]
        self.meter.create_observable_gauge(metric, callbacks=[observe], unit=unit,
                                           description=description)

    def gauge_shadow_depth(self, depth: Callable[[], int]) -> None:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(depth())]
        self.meter.create_observable_gauge(sc.METRIC_SHADOW_QUEUE_DEPTH, callbacks=[observe],
                                           unit="{request}",
                                           description="Shadow audits waiting in the queue.")

    def gauge_upstreams(self, read: Callable[[], Sequence[tuple[str, int, int]]]) -> None:
        def state(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(value, {sc.VERITY_UPSTREAM_NAME: name})
                    for name, value, _ in read()]

        def in_flight(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(n, {sc.VERITY_UPSTREAM_NAME: name}) for name, _, n in read()]

        self.meter.create_observable_gauge(
            sc.METRIC_UPSTREAM_STATE, callbacks=[state], unit="1",
            description="Upstream health: 0 closed (healthy), 1 half-open (a probe call "
                        "allowed), 2 open (skipped until its cooldown ends).")
        self.meter.create_observable_gauge(
            sc.METRIC_UPSTREAM_IN_FLIGHT, callbacks=[in_flight], unit="{request}",
            description="Upstream calls in flight (open streams included).")


def _exported(attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A named instrument's attributes, keys under their exported names
    (:data:`gateway.telemetry.semconv.COUNTER_ATTRIBUTES`); None for none."""
    if not attributes:
        return None
    names = sc.COUNTER_ATTRIBUTES
    return clean_attrs((names.get(k, k), v) for k, v in attributes.items())
