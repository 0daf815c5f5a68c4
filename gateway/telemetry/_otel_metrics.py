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
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, NoOpMeter, Observation

from gateway.telemetry import semconv as sc
from gateway.telemetry._otel_attrs import clean_attrs

__all__ = ["Instruments"]


class Instruments:
    """The histograms and counters, made once from the meter provider."""

    def __init__(self, provider: MeterProvider | None) -> None:
        meter: Meter = (provider.get_meter(sc.INSTRUMENTATION_SCOPE)
                        if provider is not None else NoOpMeter(sc.INSTRUMENTATION_SCOPE))
        self.meter = meter
        self.token_usage = meter.create_histogram(
            sc.METRIC_GEN_AI_TOKEN_USAGE, unit="{token}",
            description="Number of input and output tokens used.")
        self.operation_duration = meter.create_histogram(
            sc.METRIC_GEN_AI_OPERATION_DURATION, unit="s", description="GenAI operation duration.")
        self.ttfc = meter.create_histogram(
            sc.METRIC_GEN_AI_TIME_TO_FIRST_CHUNK, unit="s",
            description="Time to receive the first chunk of a streaming response.")
        self.layer_duration = meter.create_histogram(
            sc.METRIC_LAYER_DURATION, unit="s", description="Verification layer duration.")
        self.layer_verdicts = meter.create_counter(
            sc.METRIC_LAYER_VERDICTS, unit="{verdict}",
            description="Verification layer verdicts by policy, mode, layer and verdict.")
        self.decisions = meter.create_counter(
            sc.METRIC_DECISIONS, unit="{decision}",
            description="Policy decisions by policy, mode, verdict and action.")
        self.candidate_decisions = meter.create_counter(
            sc.METRIC_CANDIDATE_DECISIONS, unit="{decision}",
            description="Candidate policies' would-be decisions, by live policy, candidate, "
                        "verdict and action.")
        self.http_server_duration = meter.create_histogram(
            sc.METRIC_HTTP_SERVER_DURATION, unit="s",
            description="Duration of HTTP server requests.")
        self.judge_cost = meter.create_counter(
            sc.METRIC_JUDGE_COST, unit="{USD}", description="Judge cost reported by layers.")
        self.upstream_attempts = meter.create_counter(
            sc.METRIC_UPSTREAM_ATTEMPTS, unit="{attempt}",
            description="Upstream calls by upstream and outcome (ok, or the retry decision).")
        self.upstream_served = meter.create_counter(
            sc.METRIC_UPSTREAM_SERVED, unit="{request}",
            description="Upstream exchanges by the upstream that served them and the calls "
                        "they took (retries and fallbacks included).")
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
        if not attributes:
            counter.add(value)
            return
        names = sc.COUNTER_ATTRIBUTES
        counter.add(value, clean_attrs((names.get(k, k), v) for k, v in attributes.items()))

    def observe(self, name: str, value: float,
                attributes: Mapping[str, Any] | None = None) -> None:
        """Record to a named histogram (:data:`gateway.telemetry.semconv.HISTOGRAMS`)."""
        hist = self._histograms.get(name)
        if hist is None:
            metric, unit, description, _ = sc.HISTOGRAMS[name]  # buckets: a view (_otel_setup)
            hist = self._histograms[name] = self.meter.create_histogram(
                metric, unit=unit, description=description)
        if not attributes:
            hist.record(value)
            return
        names = sc.COUNTER_ATTRIBUTES
        hist.record(value, clean_attrs((names.get(k, k), v) for k, v in attributes.items()))

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
