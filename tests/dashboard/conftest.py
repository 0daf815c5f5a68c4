"""An audit with every kind of record the dashboard shows, and the dashboard serving it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("duckdb", reason="the dashboard reads the audit with the 'audit' extra")

from gateway.dashboard.app import create_dashboard  # noqa: E402
from gateway.testing.servers import ServerThread  # noqa: E402

RECORDED_ANSWER = "Paris is the capital of France."
"""Model text in a record whose policy records content: on that record's page only."""
JAEGER = "http://jaeger.example:16686"


def record(i: int, *, policy: str = "live", verdict: str | None = "pass",
           tenant: str | None = "acme", model: str = "gpt-x", hour: int = 10,
           content: bool = False) -> dict[str, Any]:
    action = {"pass": "pass", "marginal": "disclaimer", "fail": "block"}.get(verdict or "")
    out: dict[str, Any] = {
        "audit_id": f"{i:08x}" + "ab" * 12, "policy": policy, "policy_version": "v1",
        "mode": "shadow", "model": model, "tenant": tenant,
        "started_at": f"2026-11-24T{hour:02d}:{i % 60:02d}:00.000Z", "duration_ms": 40.0 + i,
        "verdict": verdict, "score": 0.8 if verdict else None, "action": action,
        "applied": False, "trace_id": f"{i:032x}",
        "note": None if verdict else "not verified: shadow queue full",
        "reasons": ["grounding: 1 of 3 claims unsupported"] if verdict == "fail" else [],
        "layers": [
            {"key": "grounding", "name": "grounding", "score": 0.2 if verdict == "fail" else 0.9,
             "passed": verdict != "fail", "latency_ms": 5.0 + i % 3},
            {"key": "judge", "name": "nli", "score": 0.7, "passed": True, "latency_ms": 300.0,
             "judge_calls": 2, "cost": 0.002}],
        "candidates": [{"name": "strict", "verdict": "fail", "action": "block",
                        "layers": [{"key": "len", "name": "length", "score": 0.0,
                                    "passed": False}]}],
        "failed_claims": [], "failed_claim_count": 1 if verdict == "fail" else 0,
    }
    if content:
        out["content"] = {"messages": [{"role": "user", "content": "capital of France?"}],
                          "output": RECORDED_ANSWER}
    return out


def records() -> list[dict[str, Any]]:
    out = []
    for i in range(60):
        verdict = ("pass", "pass", "marginal", "fail", None)[i % 5]
        out.append(record(i, verdict=verdict, tenant=("acme", "globex", None)[i % 3],
                          model=("gpt-x", "claude-y")[i % 2], hour=8 + i % 6))
    out.append(record(100, policy="recorded", content=True))
    return out


@pytest.fixture(scope="package")
def audit_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("audit")
    day = root / "date=2026-11-24"
    day.mkdir()
    lines = [json.dumps(r) for r in records()]
    (day / "verity-h-1-s-00001.jsonl").write_text("\n".join(lines[:30]) + "\n")
    (day / "verity-h-2-s-00001.jsonl").write_text("\n".join(lines[30:]) + "\n")
    return root


@pytest.fixture(scope="package")
def dashboard(audit_dir: Path) -> Iterator[ServerThread]:
    app = create_dashboard(str(audit_dir), jaeger_url=JAEGER)
    with ServerThread(app) as server:
        yield server
    app.state.store.close()
