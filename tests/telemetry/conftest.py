"""Fixtures for telemetry tests: an in-process OTLP/HTTP receiver and a real
``OtelTelemetry`` exporting to it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# tests/ has no __init__.py (rootdir-style test modules); make tests/otlp_receiver.py
# importable as a plain module from this sub-folder too.
_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from otlp_receiver import OTLPReceiver  # noqa: E402

from gateway.telemetry import Telemetry, create_telemetry  # noqa: E402


@pytest.fixture
def otlp_receiver() -> Iterator[OTLPReceiver]:
    """A running OTLP/HTTP receiver; ``.environ()`` gives matching OTEL_* variables."""
    with OTLPReceiver() as receiver:
        yield receiver


@pytest.fixture
def otel(otlp_receiver: OTLPReceiver) -> Iterator[Telemetry]:
    """Real telemetry exporting to ``otlp_receiver``; call ``.shutdown()`` to flush."""
    telemetry = create_telemetry(otlp_receiver.environ())
    assert telemetry.enabled
    yield telemetry
    telemetry.shutdown()
