"""Fixtures of the modes tests: gateways with policy files, test-only layers, audit access."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from modes import support
from gateway.audit.sink import JsonlAuditSink
from gateway.layers.registry import LayerRegistry
from gateway.modes.dispatch import VerityEngine

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import GatewayFactory, ServedGateway


@pytest.fixture
def test_layers() -> Iterator[None]:
    """Reset the test-only layers' gates (``boom``, ``sleep``, ``gate``, ``wordclaims``, …
    are in :data:`support.REGISTRY`, which every gateway started here is given)."""
    support.GATE.clear()
    support.GATE_ENTERED.clear()
    yield
    support.GATE.set()



@dataclass
class PolicyGateway:
    served: ServedGateway
    policies_dir: Path
    telemetry: support.RecordingTelemetry

    @property
    def base_url(self) -> str:
        return self.served.base_url

    @property
    def url(self) -> str:
        return self.served.url

    @property
    def engine(self) -> VerityEngine:
        proxy = self.served.app.proxy
        assert proxy is not None and isinstance(proxy.engine, VerityEngine)
        return proxy.engine

    def audit(self, expect: int = 0, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Every audit record written so far (flushes the writer first).

        Inline records are queued after the response is sent, so a test that has
        just read its response passes ``expect``: wait (bounded) for that many."""
        deadline = time.monotonic() + timeout
        while True:
            records = self._read_audit()
            if len(records) >= expect or time.monotonic() > deadline:
                return records
            time.sleep(0.02)

    def _read_audit(self) -> list[dict[str, Any]]:
        path = Path(self.served.settings.audit.path or "")
        proxy = self.served.app.proxy
        if proxy is not None and isinstance(proxy.engine, VerityEngine):
            sink = proxy.engine.audit
            if isinstance(sink, JsonlAuditSink):
                sink.flush()
        if not path.exists():
            return []
        return [orjson.loads(line) for line in path.read_bytes().splitlines() if line]

    def stop(self) -> None:
        self.served.stop()


StartGateway = Callable[..., PolicyGateway]


@pytest.fixture
def start_gateway(make_gateway: GatewayFactory, tmp_path: Path) -> Iterator[StartGateway]:
    """``start_gateway({"name": "yaml…"}, **settings)`` -> a running gateway with those
    policies (reload polling off unless asked), stopped after the test. Its layers are
    :data:`support.REGISTRY` unless ``layers=`` gives another registry."""
    started: list[PolicyGateway] = []

    def start(policies: dict[str, str], *, layers: LayerRegistry = support.REGISTRY,
              **overrides: Any) -> PolicyGateway:
        directory = tmp_path / f"policies-{len(started)}"
        directory.mkdir()
        for name, text in policies.items():
            support.write_policy(directory, name, text)
        telemetry = support.RecordingTelemetry()
        overrides.setdefault("reload_policies", False)
        overrides.setdefault("audit", {"path": str(tmp_path / f"audit-{len(started)}.jsonl")})
        served = make_gateway(policies_dir=str(directory),
                              app_kwargs={"telemetry": telemetry, "layers": layers},
                              **overrides)
        gw = PolicyGateway(served, directory, telemetry)
        started.append(gw)
        return gw

    yield start
    support.GATE.set()
    for gw in started:
        gw.stop()
