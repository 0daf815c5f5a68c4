"""bench/bench_failover_pure.py runs end to end at a tiny size (no timings read)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_failover_pure.py"


def test_runs(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_failover_pure", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.main(["--requests", "200", "--chunks", "5"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["case", "mean", "us", "p50", "us", "p99", "us"]
    assert [line.split()[0] for line in lines[1:]] == [
        "plan,", "plan,", "plan,", "request", "response", "stream"]
