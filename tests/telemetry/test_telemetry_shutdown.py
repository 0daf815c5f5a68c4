"""The telemetry flush at shutdown is bounded: one deadline shared by every signal,
flushed in parallel, whatever the collector does.

No wall-clock assertion is tight: exporters that block until the test releases them
(or a collector that never answers, with a 10-minute export timeout) show that
shutdown returned *while* every signal was still exporting, i.e. it waited for the
configured deadline and not for the exporters.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import openai
import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from gateway.telemetry._otel_impl import OtelTelemetry
from gateway.telemetry._otel_setup import Providers
from gateway.telemetry import DEFAULT_FLUSH_SECONDS, Telemetry, create_telemetry

SIGNALS = ("traces", "logs", "metrics")


class Gate:
    """Exporters enter (per signal) and then block until :meth:`release`."""

    def __init__(self) -> None:
        self.entered = {s: threading.Event() for s in SIGNALS}
        self.released = threading.Event()
        self.returned: list[str] = []

    def block(self, signal: str) -> None:
        self.entered[signal].set()
        self.released.wait()
        self.returned.append(signal)


class SlowSpans(SpanExporter):
    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.gate.block("traces")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class SlowLogs(LogRecordExporter):
    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        self.gate.block("logs")
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class SlowMetrics(MetricExporter):
    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self.gate = gate

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        self.gate.block("metrics")
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.released.set()  # let the abandoned export threads finish


def slow_telemetry(gate: Gate) -> OtelTelemetry:
    tracer = TracerProvider(shutdown_on_exit=False)
    tracer.add_span_processor(BatchSpanProcessor(SlowSpans(gate)))
    logger = LoggerProvider(shutdown_on_exit=False)
    logger.add_log_record_processor(BatchLogRecordProcessor(SlowLogs(gate)))
    reader = PeriodicExportingMetricReader(SlowMetrics(gate), export_interval_millis=3_600_000)
    meter = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    return OtelTelemetry(Providers(tracer, meter, logger))


def record_one_of_each(tel: Telemetry) -> None:
    """A span, an evaluation log record and metric points."""
    trace = tel.start_request({"method": "POST", "path": "/v1/chat/completions",
                               "headers": []}, "/v1/chat/completions")
    with trace.for_policy("p").layer("k1") as layer:
        layer.result({"name": "keyword", "score": 1.0, "passed": True, "latency_ms": 1.0})
    trace.decision({"policy": "p", "mode": "inline", "verdict": "pass", "action": "pass"})
    trace.end(200)


def test_shutdown_flushes_all_signals_at_once_within_one_deadline(
        gate: Gate, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    tel = slow_telemetry(gate)
    meter_timeouts: list[float] = []
    meter = tel.providers.meter
    assert meter is not None
    original = meter.shutdown

    def spy(timeout_millis: float = 30_000, **kwargs: Any) -> None:
        meter_timeouts.append(timeout_millis)
        original(timeout_millis=timeout_millis, **kwargs)

    monkeypatch.setattr(meter, "shutdown", spy)
    record_one_of_each(tel)

    with caplog.at_level(logging.WARNING, logger="gateway.telemetry"):
        tel.shutdown(0.25)

    # Returned although no exporter has returned, and not one of them was released:
    # the wait was the deadline's, not the exporters'.
    assert not gate.released.is_set() and gate.returned == []
    # Every signal's export started, while the others were blocked: in parallel.
    for signal in SIGNALS:
        assert gate.entered[signal].wait(30), f"{signal} was never exported"
    assert gate.returned == []
    assert meter_timeouts == [250.0]  # the metric reader gets the same deadline
    (warning,) = [r for r in caplog.records if r.name == "gateway.telemetry"]
    assert "0.25s" in warning.getMessage()
    assert all(signal in warning.getMessage() for signal in SIGNALS)
    tel.shutdown(0.25)  # a second call is a no-op


def test_shutdown_that_finishes_in_time_logs_nothing(otel: Telemetry,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    record_one_of_each(otel)
    with caplog.at_level(logging.WARNING, logger="gateway.telemetry"):
        otel.shutdown(60)
    assert not [r for r in caplog.records if r.name == "gateway.telemetry"]


def test_noop_shutdown_takes_a_timeout() -> None:
    Telemetry().shutdown(0)
    Telemetry().force_flush(0)
    assert DEFAULT_FLUSH_SECONDS > 0


# ---- a real gateway whose collector never answers ------------------------------------------


class BlackHole:
    """Accepts OTLP/HTTP requests, reads their request line, never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.paths: list[str] = []
        self.conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self.conns.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        data = b""
        try:
            while b"\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
        except OSError:
            return
        self.paths.append(data.split(b" ")[1].decode())

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self.conns = self.conns, []
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self.sock.close()
        self._thread.join(10)
        for conn in conns:
            conn.close()


@pytest.fixture
def black_hole() -> Iterator[BlackHole]:
    hole = BlackHole()
    yield hole
    hole.close()


POLICY = """
mode: inline
default: true
layers: [{name: keyword, id: k1, config: {block: [zzz]}}]
"""


def test_gateway_shutdown_with_a_silent_collector_is_bounded_by_flush_seconds(
        make_gateway: Callable[..., Any], black_hole: BlackHole, tmp_path: Any,
        make_client: Callable[..., openai.OpenAI], upstream: Any,
        wait_until: Callable[..., Any]) -> None:
    """Each exporter would wait 10 minutes (OTEL_EXPORTER_OTLP_TIMEOUT) for the silent
    collector; shutdown waits telemetry.flush_seconds for all of them."""
    (tmp_path / "p.yaml").write_text(POLICY, encoding="utf-8")
    telemetry = create_telemetry({
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{black_hole.port}",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "600000", "OTEL_METRIC_EXPORT_INTERVAL": "3600000"})
    gw = make_gateway(policies_dir=str(tmp_path), reload_policies=False,
                      telemetry={"flush_seconds": 0.5}, app_kwargs={"telemetry": telemetry})
    reply = make_client(gw).chat.completions.create(
        model="scripted-small", messages=[{"role": "user", "content": "hello"}])
    assert reply.choices[0].message.content == "You said: hello"

    thread = gw.server._thread
    gw.server.server.should_exit = True
    # Bounded by 0.5 s (+ uvicorn's own shutdown): the generous join is a hang guard
    # only; unbounded, three signals × the SDK's 30 s shutdown waits exceed it.
    thread.join(60)
    assert not thread.is_alive(), "gateway shutdown waited for the silent collector"
    assert gw.server.error is None
    # Every signal was being exported when the gateway gave up on them.
    wait_until(lambda: {"/v1/traces", "/v1/metrics", "/v1/logs"} <= set(black_hole.paths),
               timeout=30, message="every signal sent to the collector")
