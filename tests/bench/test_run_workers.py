"""``bench/run_workers.py``'s bookkeeping: pairing of cells, the estimate's arithmetic,
and counting a process's connections. No gateway is started and nothing is timed."""

from __future__ import annotations

import os
import socket
from typing import Any

from bench_modules import load_bench as _load

rw = _load("run_workers")


def _row(config: str, rnd: int, workers: int, rps: float, relay: float,
         **extra: Any) -> dict[str, Any]:
    row = {"config": config, "round": rnd, "workers": workers, "rps": rps, "p50_ms": 1.0,
           "p99_ms": 2.0, "completed": 100, "errors": 0, "relay_ms": relay,
           "relay_cpus": 0.5, "relay_share": [1.0] if workers == 1 else [0.5, 0.5],
           "relay_connections": [16] if workers == 1 else [8, 8],
           "relay_switches_per_req": 1.0, "pool_ms": 0.0, "pool_window_ms": 0.0,
           "mock_ms": 0.04, "client_ms": 0.06, "other_cpus": 0.0}
    row.update(extra)
    return row


def test_ratios_pair_cells_of_the_same_round() -> None:
    rows = [_row("passthrough", 0, 1, 1000, 0.5), _row("passthrough", 0, 2, 1500, 0.5),
            _row("passthrough", 1, 2, 900, 0.5), _row("passthrough", 1, 1, 1000, 0.5),
            _row("shadow", 0, 1, 100, 1.0)]
    assert rw.ratios(rows, "passthrough") == [1.5, 0.9]
    assert rw.ratios(rows, "shadow") == []  # no 2-worker cell to pair with
    table = rw.markdown(rows)
    assert "1.50x, 0.90x (median 1.20x)" in table
    assert table.count("\n| passthrough |") == 4


def test_estimate_is_the_stated_model() -> None:
    # relay 0.5 ms, mock + client 0.1 ms: one relay <= min(1/0.5, 2/0.6) = 2,000 req/s;
    # 2 relays on 2 cores 2/0.6 = 3,333 (1.67x), elsewhere 2/0.5 = 4,000; 8 cores 13,333.
    rows = [_row("passthrough", 0, 1, 1000, 0.5), _row("passthrough", 0, 2, 1500, 0.6)]
    text = rw.estimate(rows)
    assert "ESTIMATE" in text and "not a measurement" in text
    assert "1 relay on 2 cores: ≈ 2,000 req/s" in text
    assert "2 relays on 2 cores: ≈ 3,333 req/s (1.67x)" in text
    assert "≈ 4,000 (2.00x) with them elsewhere" in text
    assert "8 relays on 8 cores: ≈ 13,333 req/s (6.67x)" in text


def test_estimate_adds_the_verification_cost_when_there_is_a_pool() -> None:
    rows = [_row("shadow", 0, 1, 500, 1.0, pool_window_ms=0.2, pool_ms_per_verified=4.0,
                 verified_share=0.5)]
    text = rw.estimate(rows)
    # every request verified on 4 cores: 4 / (1.0 + 4.0) ms = 800 req/s
    assert "verifying every request instead: ≈ 800" in text
    assert "4.00 ms of pool CPU per verified job" in text


def test_connections_counts_established_sockets_on_the_port() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        accepted = [server.accept()[0] for _ in range(3)]
        try:
            assert rw.connections([os.getpid()], port) == [3]
            accepted[0].close()
            clients[0].close()
            assert rw.connections([os.getpid()], port) == [2]
        finally:
            for s in clients + accepted:
                s.close()
