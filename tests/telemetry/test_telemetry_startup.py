"""One log line at start says where telemetry goes (or that it is off)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from otlp_receiver import OTLPReceiver

from gateway.telemetry import create_telemetry


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "gateway" and r.getMessage().startswith("telemetry")]


def test_the_log_says_telemetry_is_off(make_gateway: Callable[..., Any],
                                       caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="gateway"):
        make_gateway().stop()
    (line,) = _said(caplog)
    assert line.startswith("telemetry off") and "OTEL_EXPORTER_OTLP_ENDPOINT" in line


def test_the_log_says_where_each_signal_goes(make_gateway: Callable[..., Any],
                                             otlp_receiver: OTLPReceiver,
                                             caplog: pytest.LogCaptureFixture) -> None:
    environ = otlp_receiver.environ()
    telemetry = create_telemetry({**environ, "OTEL_LOGS_EXPORTER": "none"})
    with caplog.at_level(logging.INFO, logger="gateway"):
        make_gateway(app_kwargs={"telemetry": telemetry}).stop()
    (line,) = _said(caplog)
    base = environ["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/")
    assert line == (f"telemetry: exporting traces to {base}/v1/traces, metrics to "
                    f"{base}/v1/metrics (OTLP/HTTP)")
