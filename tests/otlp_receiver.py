"""An in-process OTLP/HTTP (protobuf) receiver for tests.

Runs a threaded HTTP server on a free loopback port, accepts
``POST /v1/traces``, ``/v1/metrics`` and ``/v1/logs`` exactly as a collector
would (gzip or plain bodies), decodes them with ``opentelemetry-proto`` and keeps
both the decoded records (flattened into small dataclasses) and the raw bodies, so
a test can assert on the span tree and also grep every exported byte for a secret.
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

__all__ = ["OTLPReceiver", "RLog", "RPoint", "RSpan"]

KINDS = {PbSpan.SPAN_KIND_INTERNAL: "INTERNAL", PbSpan.SPAN_KIND_SERVER: "SERVER",
         PbSpan.SPAN_KIND_CLIENT: "CLIENT", PbSpan.SPAN_KIND_PRODUCER: "PRODUCER",
         PbSpan.SPAN_KIND_CONSUMER: "CONSUMER", PbSpan.SPAN_KIND_UNSPECIFIED: "UNSPECIFIED"}


def any_value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return attributes(v.kvlist_value.values)
    return getattr(v, which)


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


@dataclass
class REvent:
    name: str
    attributes: dict[str, Any]


@dataclass
class RSpan:
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    events: list[REvent]
    links: list[tuple[str, str]]
    status_code: int  # 0 unset, 1 ok, 2 error
    resource: dict[str, Any]
    scope: str

    def event(self, name: str) -> REvent:
        found = [e for e in self.events if e.name == name]
        assert len(found) == 1, f"{self.name}: expected one {name!r} event, got {self.events}"
        return found[0]


@dataclass
class RPoint:
    attributes: dict[str, Any]
    value: float | None = None  # sum / gauge
    count: int | None = None  # histogram
    sum: float | None = None  # histogram


@dataclass
class RMetric:
    name: str
    unit: str
    kind: str
    points: list[RPoint] = field(default_factory=list)
    monotonic: bool | None = None  # sums only: a counter (True) or an up-down counter


@dataclass
class RLog:
    event_name: str
    attributes: dict[str, Any]
    trace_id: str
    span_id: str
    severity_number: int
    body: Any


class OTLPReceiver:
    """Start with :meth:`start`; ``url`` is the base for ``OTEL_EXPORTER_OTLP_ENDPOINT``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.raw: list[tuple[str, bytes]] = []
        self._spans: list[RSpan] = []
        self._metrics: list[RMetric] = []
        self._logs: list[RLog] = []
        self.request_headers: list[dict[str, str]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> OTLPReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                encoding = (self.headers.get("content-encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                try:
                    reply = receiver._ingest(self.path, body, dict(self.headers.items()))
                except KeyError:
                    self.send_response(404)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="otlp-receiver")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def environ(self, **extra: str) -> dict[str, str]:
        """``OTEL_*`` variables pointing every signal at this receiver."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.url, "OTEL_SERVICE_NAME": "verity-test",
                "OTEL_METRIC_EXPORT_INTERVAL": "3600000", **extra}

    def clear(self) -> None:
        with self._lock:
            self.raw.clear()
            self._spans.clear()
            self._metrics.clear()
            self._logs.clear()
            self.request_headers.clear()

    # ---- decoding -------------------------------------------------------------------------

    def _ingest(self, path: str, body: bytes, headers: dict[str, str]) -> bytes:
        signal = path.rstrip("/").rsplit("/", 1)[-1]
        decoders: dict[str, Callable[[bytes], bytes]] = {
            "traces": self._traces, "metrics": self._metrics_in, "logs": self._logs_in}
        decode = decoders[signal]
        with self._lock:
            self.raw.append((signal, body))
            self.request_headers.append({k.lower(): v for k, v in headers.items()})
            return decode(body)

    def _traces(self, body: bytes) -> bytes:
        req = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
        for rs in req.resource_spans:
            resource = attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    self._spans.append(RSpan(
                        name=s.name, kind=KINDS[s.kind], trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(), parent_span_id=s.parent_span_id.hex(),
                        attributes=attributes(s.attributes),
                        events=[REvent(e.name, attributes(e.attributes)) for e in s.events],
                        links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                        status_code=s.status.code, resource=resource, scope=ss.scope.name))
        return trace_service_pb2.ExportTraceServiceResponse().SerializeToString()

    def _metrics_in(self, body: bytes) -> bytes:
        req = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
        for rm in req.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    kind = m.WhichOneof("data") or ""
                    metric = RMetric(m.name, m.unit, kind)
                    data = getattr(m, kind)
                    if kind == "sum":
                        metric.monotonic = data.is_monotonic
                    for p in data.data_points:
                        attrs = attributes(p.attributes)
                        if kind == "histogram":
                            metric.points.append(RPoint(attrs, count=p.count, sum=p.sum))
                        else:
                            value = p.as_int if p.WhichOneof("value") == "as_int" else p.as_double
                            metric.points.append(RPoint(attrs, value=value))
                    self._metrics.append(metric)
        return metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()

    def _logs_in(self, body: bytes) -> bytes:
        req = logs_service_pb2.ExportLogsServiceRequest.FromString(body)
        for rl in req.resource_logs:
            for sl in rl.scope_logs:
                for r in sl.log_records:
                    self._logs.append(RLog(
                        event_name=r.event_name, attributes=attributes(r.attributes),
                        trace_id=r.trace_id.hex(), span_id=r.span_id.hex(),
                        severity_number=r.severity_number,
                        body=any_value(r.body) if r.HasField("body") else None))
        return logs_service_pb2.ExportLogsServiceResponse().SerializeToString()

    # ---- queries --------------------------------------------------------------------------

    def spans(self) -> list[RSpan]:
        with self._lock:
            return list(self._spans)

    def logs(self) -> list[RLog]:
        with self._lock:
            return list(self._logs)

    def metrics(self) -> dict[str, list[RMetric]]:
        """Every export of each metric, by name (cumulative: the last one is current)."""
        out: dict[str, list[RMetric]] = {}
        with self._lock:
            for m in self._metrics:
                out.setdefault(m.name, []).append(m)
        return out

    def last_metric(self, name: str) -> RMetric:
        exports = self.metrics().get(name)
        assert exports, f"metric {name!r} not exported; got {sorted(self.metrics())}"
        return exports[-1]

    def span(self, name: str) -> RSpan:
        found = [s for s in self.spans() if s.name == name]
        assert len(found) == 1, f"expected one span {name!r}, got {[s.name for s in self.spans()]}"
        return found[0]

    def raw_bytes(self) -> Iterator[bytes]:
        with self._lock:
            yield from (body for _, body in self.raw)

    def wait_for(self, predicate: Callable[[OTLPReceiver], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for telemetry; spans={[s.name for s in self.spans()]}")
            time.sleep(0.02)

    def __enter__(self) -> OTLPReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
