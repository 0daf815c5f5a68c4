"""Build OpenTelemetry providers from ``OTEL_*`` variables (private to telemetry).

The SDK's exporters read ``os.environ`` themselves; here the mapping handed to
``create_telemetry`` is resolved explicitly (endpoints, headers, timeouts,
sampler, resource) so a test or an embedding app can pass its own mapping, and
so endpoint fallback is decided in one place: a signal whose endpoint cannot be
derived (only ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set, say) is turned off
rather than sent to a default ``localhost:4318`` nobody asked for.

Only OTLP over HTTP/protobuf is shipped. Nothing here touches global state.

:func:`shutdown_providers` / :func:`flush_providers` bound the final flush: every
signal is flushed in a thread of its own, all at once, and the caller waits for
them until one shared deadline, not for each exporter's own timeout in turn
(``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s each by default, retries included).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import (
    AlwaysOffExemplarFilter,
    AlwaysOnExemplarFilter,
    ExemplarFilter,
    MeterProvider,
    TraceBasedExemplarFilter,
)
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)
from opentelemetry.util.re import parse_env_headers

from gateway.telemetry import semconv as sc

__all__ = ["Providers", "build_providers", "flush_providers", "shutdown_providers"]

_log = logging.getLogger("gateway.telemetry")

Signal = Literal["traces", "metrics", "logs"]


@dataclass(frozen=True)
class Providers:
    tracer: TracerProvider
    meter: MeterProvider | None
    logger: LoggerProvider | None


def _get(environ: Mapping[str, str], key: str) -> str:
    return environ.get(key, "").strip()


def signal_endpoint(environ: Mapping[str, str], signal: Signal) -> str | None:
    """The OTLP/HTTP URL for one signal, or None when it is not configured."""
    if _get(environ, f"OTEL_{signal.upper()}_EXPORTER").lower() == "none":
        return None
    specific = _get(environ, f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    if specific:
        return specific
    base = _get(environ, "OTEL_EXPORTER_OTLP_ENDPOINT")
    return f"{base.rstrip('/')}/v1/{signal}" if base else None


def _headers(environ: Mapping[str, str], signal: Signal) -> dict[str, str]:
    raw = (_get(environ, f"OTEL_EXPORTER_OTLP_{signal.upper()}_HEADERS")
           or _get(environ, "OTEL_EXPORTER_OTLP_HEADERS"))
    return dict(parse_env_headers(raw, liberal=True)) if raw else {}


def _timeout(environ: Mapping[str, str], signal: Signal) -> float | None:
    raw = (_get(environ, f"OTEL_EXPORTER_OTLP_{signal.upper()}_TIMEOUT")
           or _get(environ, "OTEL_EXPORTER_OTLP_TIMEOUT"))
    try:
        # The spec gives this variable in milliseconds.
        return float(raw) / 1000.0 if raw else None
    except ValueError:
        _log.warning("ignoring OTEL_EXPORTER_OTLP_TIMEOUT=%r: not a number", raw)
        return None


class _Resource(Resource):
    """A resource whose hash is computed once.

    The OTLP encoders group every span, log record and metric by resource, and
    ``Resource.__hash__`` JSON-dumps all attributes on each call: ~5 % of the
    span export thread's time. The attributes never change after creation.
    """

    def __init__(self, resource: Resource) -> None:
        super().__init__(dict(resource.attributes), resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


def _resource(environ: Mapping[str, str]) -> Resource:
    attrs: dict[str, str] = {}
    for item in _get(environ, "OTEL_RESOURCE_ATTRIBUTES").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            attrs[key.strip()] = unquote(value.strip())
    attrs[SERVICE_NAME] = (_get(environ, "OTEL_SERVICE_NAME") or attrs.get(SERVICE_NAME)
                           or sc.DEFAULT_SERVICE_NAME)
    # One per process: with several processes per host (serve --workers, gateway worker)
    # metrics from each must not merge into one series (Prometheus' `instance` label).
    attrs.setdefault(sc.SERVICE_INSTANCE_ID, f"{socket.gethostname()}-{os.getpid()}")
    # Resource.get_empty() + merge keeps SDK attributes without the env detectors,
    # which would read os.environ behind the caller's back.
    return _Resource(Resource({"telemetry.sdk.language": "python",
                               "telemetry.sdk.name": "opentelemetry"}).merge(Resource(attrs)))


def _sampler(environ: Mapping[str, str]) -> Sampler:
    name = _get(environ, "OTEL_TRACES_SAMPLER").lower() or "parentbased_always_on"
    arg = _get(environ, "OTEL_TRACES_SAMPLER_ARG")
    try:
        ratio = min(max(float(arg), 0.0), 1.0) if arg else 1.0
    except ValueError:
        _log.warning("ignoring OTEL_TRACES_SAMPLER_ARG=%r: not a number", arg)
        ratio = 1.0
    samplers: dict[str, Sampler] = {
        "always_on": ALWAYS_ON,
        "always_off": ALWAYS_OFF,
        "traceidratio": TraceIdRatioBased(ratio),
        "parentbased_always_on": ParentBased(ALWAYS_ON),
        "parentbased_always_off": ParentBased(ALWAYS_OFF),
        "parentbased_traceidratio": ParentBased(TraceIdRatioBased(ratio)),
    }
    if name not in samplers:
        _log.warning("unsupported OTEL_TRACES_SAMPLER=%r; using parentbased_always_on", name)
        return samplers["parentbased_always_on"]
    return samplers[name]


def _exemplar_filter(environ: Mapping[str, str]) -> ExemplarFilter:
    """``OTEL_METRICS_EXEMPLAR_FILTER``, default ``always_off`` (the SDK's default,
    ``trace_based``, looks up the current span on every record to offer it an
    exemplar, and the gateway's spans are never the current context anyway)."""
    name = _get(environ, "OTEL_METRICS_EXEMPLAR_FILTER").lower() or "always_off"
    filters: dict[str, type[ExemplarFilter]] = {"always_off": AlwaysOffExemplarFilter, "always_on": AlwaysOnExemplarFilter,
               "trace_based": TraceBasedExemplarFilter}
    if name not in filters:
        _log.warning("unsupported OTEL_METRICS_EXEMPLAR_FILTER=%r; using always_off", name)
        name = "always_off"
    return filters[name]()


def _views() -> list[View]:
    def buckets(name: str, bounds: tuple[float, ...]) -> View:
        return View(instrument_name=name,
                    aggregation=ExplicitBucketHistogramAggregation(boundaries=bounds))
    return [
        buckets(sc.METRIC_GEN_AI_TOKEN_USAGE, tuple(float(b) for b in sc.TOKEN_BUCKETS)),
        buckets(sc.METRIC_GEN_AI_OPERATION_DURATION, sc.DURATION_BUCKETS),
        buckets(sc.METRIC_GEN_AI_TIME_TO_FIRST_CHUNK, sc.DURATION_BUCKETS),
        buckets(sc.METRIC_LAYER_DURATION, sc.LAYER_DURATION_BUCKETS),
        buckets(sc.METRIC_HTTP_SERVER_DURATION, sc.HTTP_DURATION_BUCKETS),
        *(buckets(metric, bounds) for metric, _, _, bounds in sc.HISTOGRAMS.values()),
    ]


def build_providers(environ: Mapping[str, str]) -> Providers:
    """Tracer, meter and logger providers exporting OTLP/HTTP, per ``environ``."""
    # Imported here: each exporter module pulls in requests/protobuf machinery.
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    protocol = _get(environ, "OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol and protocol != "http/protobuf":
        _log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s is not supported; using http/protobuf "
                     "(point the endpoint at the collector's HTTP port, 4318)", protocol)
    resource = _resource(environ)

    tracer = TracerProvider(resource=resource, sampler=_sampler(environ))
    traces_url = signal_endpoint(environ, "traces")
    if traces_url:
        tracer.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
            endpoint=traces_url, headers=_headers(environ, "traces"),
            timeout=_timeout(environ, "traces"))))

    meter = None
    metrics_url = signal_endpoint(environ, "metrics")
    if metrics_url:
        interval = _get(environ, "OTEL_METRIC_EXPORT_INTERVAL")
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=metrics_url, headers=_headers(environ, "metrics"),
                               timeout=_timeout(environ, "metrics")),
            export_interval_millis=float(interval) if interval.isdigit() else 60_000.0)
        meter = MeterProvider(resource=resource, metric_readers=[reader], views=_views(),
                              exemplar_filter=_exemplar_filter(environ))

    logger = None
    logs_url = signal_endpoint(environ, "logs")
    if logs_url:
        logger = LoggerProvider(resource=resource)
        logger.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(
            endpoint=logs_url, headers=_headers(environ, "logs"),
            timeout=_timeout(environ, "logs"))))
    return Providers(tracer, meter, logger)


def _bounded(calls: list[tuple[Signal, Callable[[], object]]], timeout: float) -> list[Signal]:
    """Run ``calls`` in parallel daemon threads; wait for them until ``timeout`` seconds
    from now in all. Returns the signals whose call had not returned by then (their
    threads are left to finish or to die with the process: daemon threads, which the
    interpreter does not wait for at exit)."""
    deadline = time.monotonic() + max(timeout, 0.0)
    threads: list[tuple[Signal, threading.Thread]] = []
    for signal, call in calls:
        def run(signal: Signal = signal, call: Callable[[], object] = call) -> None:
            try:
                call()
            except Exception:  # noqa: BLE001 - one signal's failure must not hide the others
                _log.exception("telemetry: flushing %s failed", signal)
        thread = threading.Thread(target=run, name=f"otel-flush-{signal}", daemon=True)
        thread.start()
        threads.append((signal, thread))
    late: list[Signal] = []
    for signal, thread in threads:
        thread.join(max(deadline - time.monotonic(), 0.0))
        if thread.is_alive():
            late.append(signal)
    return late


def shutdown_providers(providers: Providers, timeout: float) -> list[Signal]:
    """Flush and shut every provider down in parallel, waiting ``timeout`` seconds at
    most in all; returns the signals still exporting when the time was up."""
    millis = max(timeout, 0.0) * 1000.0
    calls: list[tuple[Signal, Callable[[], object]]] = [("traces", providers.tracer.shutdown)]
    if providers.logger is not None:
        calls.append(("logs", providers.logger.shutdown))
    if providers.meter is not None:
        meter = providers.meter
        calls.append(("metrics", lambda: meter.shutdown(timeout_millis=millis)))
    return _bounded(calls, timeout)


def flush_providers(providers: Providers, timeout: float) -> list[Signal]:
    """Export what every provider buffers, in parallel, waiting ``timeout`` seconds at
    most in all; returns the signals still exporting when the time was up."""
    millis = int(max(timeout, 0.0) * 1000.0)
    calls: list[tuple[Signal, Callable[[], object]]] = [
        ("traces", lambda: providers.tracer.force_flush(millis))]
    if providers.logger is not None:
        logger = providers.logger
        calls.append(("logs", lambda: logger.force_flush(millis)))
    if providers.meter is not None:
        meter = providers.meter
        calls.append(("metrics", lambda: meter.force_flush(millis)))
    return _bounded(calls, timeout)
