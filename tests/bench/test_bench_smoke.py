"""Smoke test for the benchmark harness: the load generator counts and stops.

No timing assertions: this only proves that ``bench/loadgen.py`` talks to the
mock upstream (``bench/mock_upstream.py``), counts what it sent, honours both of
its bounds and refuses non-loopback targets.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator

import pytest
from bench_modules import BENCH  # noqa: E402
from bench_modules import load_bench as _load

from gateway.testing.servers import ServerThread

loadgen = _load("loadgen")
mock_upstream = _load("mock_upstream")


@pytest.fixture(scope="module", params=["lean", "scripted"])
def mock_url(request: pytest.FixtureRequest) -> Iterator[str]:
    app = mock_upstream.create_app(request.param, latency_ms=1, chunks=5)
    with ServerThread(app) as srv:
        yield f"{srv.url}/v1/chat/completions"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_loadgen_counts_every_request(mock_url: str, stream: bool) -> None:
    result = asyncio.run(loadgen.run_load(mock_url, concurrency=3, requests=12,
                                          duration=30.0, stream=stream))
    assert (result.completed, result.errors) == (12, 0), result.first_error
    assert len(result.latencies_ms) == 12
    assert len(result.ttfc_ms) == (12 if stream else 0)
    summary = result.summary()
    assert summary["statuses"] == {200: 12}
    assert summary["p50_ms"] is not None and summary["rps"] > 0


def test_loadgen_stops_at_its_time_bound(mock_url: str) -> None:
    seen: list[bool] = []
    result = asyncio.run(loadgen.run_load(mock_url, concurrency=2, requests=1_000_000,
                                          duration=0.3, warmup=0.1, ramp=0.05,
                                          on_measure=lambda: seen.append(True)))
    assert 0 < result.completed < 1_000_000
    assert result.errors == 0
    assert seen == [True]


def test_loadgen_refuses_non_loopback_targets() -> None:
    with pytest.raises(ValueError, match="loopback only"):
        loadgen.assert_loopback("http://192.0.2.1:8080/v1/chat/completions")
    loadgen.assert_loopback("http://127.0.0.1:1/v1/chat/completions")


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert loadgen.percentile(values, 50) == 50.0
    assert loadgen.percentile(values, 99) == 99.0
    assert loadgen.percentile([], 50) is None


def test_layer_benchmarks_run_on_both_texts(capsys: pytest.CaptureFixture[str]) -> None:
    """bench_layers and bench_grounding_e2e run end to end (tiny sizes; no timings read)."""
    sys.path.insert(0, str(BENCH))
    try:
        layers = _load("bench_layers")
        e2e = _load("bench_grounding_e2e")
        assert layers.main(["--iterations", "3", "--context-words", "400",
                            "--answer-words", "80", "--no-gc-freeze"]) == 0
        texts = ["synthetic"] + (["news"] if layers.DATA.exists() else [])
        for text in texts:
            assert e2e.main(["--requests", "2", "--upstream-ms", "0", "--text", text,
                             "--context-words", "400", "--answer-words", "80"]) == 0
    finally:
        sys.path.remove(str(BENCH))
    out = capsys.readouterr().out
    assert "all three, cold" in out and out.count("inline, no prepare") == len(texts)
