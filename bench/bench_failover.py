"""Retries and fallbacks through a real gateway (issue 16's targets).

    .venv/bin/python bench/bench_failover.py [--latency-requests 2000] [--requests 10000]

Two scripted upstreams (``gateway.testing.scripted``) and a pass-through gateway
(uvicorn, no policy, no audit), all on loopback in this process's threads; the client
is httpx, sequential for latency, ``--concurrency`` tasks for the success count.

1. **Latency, first upstream always 503.** p50/p99 of a non-streaming chat completion
   (a) straight to upstream ``b``; (b) through the gateway to ``b`` as the model's only
   upstream; (c) through the gateway whose model goes to ``a`` first (503 on every
   call), with ``b`` as its fallback (after three 503s passive health skips ``a``
   but for a probe per cooldown); (d) as (c) with health off in effect
   (``failure_threshold: 1000``): every request pays the 503 leg. Target: (c) - (a)
   <= 5 ms at p50. The four are interleaved in rounds so load hits them alike.
2. **Success, first upstream failing 30 % at random** (``fail_rate=0.3``, seeded):
   ``--requests`` calls through a gateway with ``a`` then ``b``; every non-200 is
   counted. Target: >= 99.9 % success.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from typing import Any

import httpx

from gateway.app import create_app
from gateway.settings import load_settings
from gateway.testing.scripted import ScriptedUpstream
from gateway.testing.servers import ServerThread

BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello there"}]}


def gateway(upstreams: list[dict[str, Any]], routing: dict[str, Any], empty: str) -> ServerThread:
    settings = load_settings(environ={}, overrides={
        "upstreams": upstreams, "routing": routing, "policies_dir": empty,
        "audit": {"path": None}, "log_level": "warning"})
    return ServerThread(create_app(settings)).start()


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


async def timed(client: httpx.AsyncClient, url: str) -> float:
    start = time.perf_counter()
    r = await client.post(url + "/chat/completions", json=BODY)
    elapsed = (time.perf_counter() - start) * 1000
    if r.status_code != 200:
        raise SystemExit(f"{url}: {r.status_code} {r.text[:200]}")
    return elapsed


async def latency(urls: dict[str, str], n: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in urls}
    async with httpx.AsyncClient(timeout=30) as client:
        for url in urls.values():  # warm up connections
            for _ in range(50):
                await timed(client, url)
        for _ in range(n):
            for name, url in urls.items():
                out[name].append(await timed(client, url))
    return out


async def success(url: str, n: int, concurrency: int) -> dict[int, int]:
    statuses: dict[int, int] = {}
    queue = iter(range(n))

    async def worker(client: httpx.AsyncClient) -> None:
        for _ in queue:
            try:
                r = await client.post(url + "/chat/completions", json=BODY)
                code = r.status_code
            except httpx.HTTPError:
                code = 0
            statuses[code] = statuses.get(code, 0) + 1

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return statuses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--latency-requests", type=int, default=2000)
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()

    failing = ScriptedUpstream(fail_rate=1.0, record=False)
    flaky = ScriptedUpstream(fail_rate=0.3, seed=16, record=False)
    good = ScriptedUpstream(default_reply="from b", record=False)
    servers = [ServerThread(app).start() for app in (failing, flaky, good)]
    a_down, a_flaky, b = (s.url + "/v1" for s in servers)
    fast = {"base_backoff": 0.001, "max_backoff": 0.01}
    with tempfile.TemporaryDirectory() as empty:
        only_b = gateway([{"name": "b", "base_url": b}], {}, empty)
        fallback = gateway([{"name": "a", "base_url": a_down},
                            {"name": "b", "base_url": b, "models": []}],
                           {"retries": fast,
                            "fallbacks": [{"model": "*", "targets": [{"upstream": "b"}]}]},
                           empty)
        flaky_gw = gateway([{"name": "a", "base_url": a_flaky},
                            {"name": "b", "base_url": b, "models": []}],
                           {"retries": fast,
                            "fallbacks": [{"model": "*", "targets": [{"upstream": "b"}]}]},
                           empty)
        every_time = gateway([{"name": "a", "base_url": a_down},
                              {"name": "b", "base_url": b, "models": []}],
                             {"retries": fast, "health": {"failure_threshold": 1000},
                              "fallbacks": [{"model": "*", "targets": [{"upstream": "b"}]}]},
                             empty)
        gateways = [only_b, fallback, flaky_gw, every_time]
        try:
            runs = asyncio.run(latency({"direct to b": b,
                                        "gateway -> b": only_b.url + "/v1",
                                        "gateway -> a (503) -> b": fallback.url + "/v1",
                                        "same, every call to a": every_time.url + "/v1"},
                                       args.latency_requests))
            print(f"latency, {args.latency_requests} sequential requests each, ms:")
            for name, values in runs.items():
                print(f"  {name:24s} p50 {statistics.median(values):6.2f}  "
                      f"p99 {pct(values, 0.99):6.2f}")
            added = statistics.median(runs["gateway -> a (503) -> b"]) \
                - statistics.median(runs["direct to b"])
            print(f"  added at p50 over direct: {added:.2f} ms (target <= 5)")

            start = time.perf_counter()
            statuses = asyncio.run(success(flaky_gw.url + "/v1", args.requests,
                                           args.concurrency))
            ok = statuses.get(200, 0)
            print(f"first upstream failing 30 %: {ok}/{args.requests} succeeded "
                  f"({100 * ok / args.requests:.3f} %, target >= 99.9), statuses {statuses}, "
                  f"{time.perf_counter() - start:.1f} s")
        finally:
            for s in gateways:
                s.server.should_exit = True
            for s in gateways + servers:
                s.stop()


if __name__ == "__main__":
    main()
