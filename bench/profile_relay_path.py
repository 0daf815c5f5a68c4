"""The relay's CPU for one pass-through request, without the HTTP server: the app's own
path (front door, exchange, upstream client, telemetry, response) driven in-process.

    .venv/bin/python bench/profile_relay_path.py [--requests 20000] [--rounds 3]
    .venv/bin/python bench/profile_relay_path.py --telemetry   # with an OTLP exporter
    .venv/bin/python bench/profile_relay_path.py --policies policies --shed-all  # shadow, shed

The gateway's ASGI app (``gateway.app.create_app``, its real lifespan, an empty
policies directory) is called directly with ``--concurrency`` ASGI requests at a time
on uvloop; its upstream is ``bench/mock_upstream.py --impl raw`` (0 ms, another
process). The request is the issue-12 RAG body (a ~700-word HaluEval article as
``<context>``). Per round, the process's CPU time per request (everything in this
process: the app, aiohttp's client, the event loop, the collector; not uvicorn's
protocol, which the app does not own): what an A/B of the common path reads with less
noise than a load test on a shared box. ``--telemetry`` points the OTLP exporter at
the mock, which answers every export 404 at once (spans and metrics built, batched
and sent; nothing retried).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_passthrough as rp  # noqa: E402
from run_rag_shadow import traffic  # noqa: E402


async def measure(args: argparse.Namespace, upstream: str, workdir: Path) -> list[float]:
    from gateway.app import create_app
    from gateway.settings import Settings
    from gateway.telemetry import create_telemetry

    (workdir / "empty").mkdir(exist_ok=True)
    extra: dict[str, Any] = {}
    if args.shed_all:  # the relay reads itself saturated at once and hands off nothing
        extra["pool"] = {"relay_busy": 0.01, "busy_jobs_per_second": 0}
    settings = Settings(policies_dir=str(args.policies or workdir / "empty"),
                        audit={"path": str(workdir / "audit.jsonl")},
                        upstreams=[{"name": "default", "base_url": upstream}], **extra)
    telemetry = None
    if args.telemetry:
        # The mock answers the exports 404 at once: spans and metrics are built,
        # batched and sent, with no retry (a refused connection would be retried).
        telemetry = create_telemetry({"OTEL_EXPORTER_OTLP_ENDPOINT": upstream.removesuffix("/v1"),
                                      "OTEL_SERVICE_NAME": "bench"})
    app = create_app(settings, telemetry=telemetry)
    bodies, _ = traffic(args.cases)
    headers = [(b"host", b"127.0.0.1:8080"), (b"content-type", b"application/json"),
               (b"authorization", b"Bearer sk-bench"), (b"accept", b"application/json"),
               (b"user-agent", b"OpenAI/Python 1.50.0")]
    failures = 0

    async def one(body: bytes) -> None:
        nonlocal failures
        scope: dict[str, Any] = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
            "query_string": b"", "root_path": "",
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8080)}
        sent = False
        gone = asyncio.Event()

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        status = 0

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        await app(scope, receive, send)
        gone.set()
        if status != 200:
            failures += 1

    async def load(n: int) -> None:
        todo = iter(range(n))

        async def worker() -> None:
            for i in todo:
                await one(bodies[i % len(bodies)])

        await asyncio.gather(*(worker() for _ in range(args.concurrency)))

    gc_time = [0.0, 0.0]  # seconds in the collector, collections
    started = [0.0]
    by_gen: dict[int, list[float]] = {}

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.thread_time()
        else:
            took = time.thread_time() - started[0]
            gc_time[0] += took
            gc_time[1] += 1
            g = by_gen.setdefault(info["generation"], [0, 0.0, 0])
            g[0] += 1
            g[1] += took
            g[2] += info["collected"]

    out: list[float] = []
    async with app.lifespan():
        if args.gen0 is not None:  # after the lifespan's gc.freeze(), like a setting would
            gc.set_threshold(args.gen0, *gc.get_threshold()[1:])
        gc.callbacks.append(on_gc)
        await load(min(2000, args.requests))  # warm: connections open, caches filled
        for _ in range(args.rounds):
            gc_time[:] = [0.0, 0.0]
            t0 = time.process_time()
            await load(args.requests)
            us = (time.process_time() - t0) / args.requests * 1e6
            out.append(us)
            print(f"  {us:7.1f} µs CPU per request; collector {gc_time[0] / args.requests * 1e6:.1f}"
                  f" µs per request in {gc_time[1] / args.requests:.2f} collections "
                  f"(thresholds {gc.get_threshold()})", file=sys.stderr, flush=True)
            print("    by generation (count, ms each, collected):", {
                k: (v[0], round(v[1] / v[0] * 1e3, 3), v[2]) for k, v in sorted(by_gen.items())},
                file=sys.stderr)
            by_gen.clear()
        gc.callbacks.remove(on_gc)
        if args.cycles:  # what reference cycles the requests leave to the collector
            gc.collect()
            gc.set_debug(gc.DEBUG_SAVEALL)
            await load(args.cycles)
            gc.collect()
            gc.set_debug(0)
            kinds = Counter(type(o).__qualname__ for o in gc.garbage)
            print(f"    cyclic garbage per request over {args.cycles}:", file=sys.stderr)
            for kind, n in kinds.most_common(25):
                print(f"      {n / args.cycles:6.2f} {kind}", file=sys.stderr)
            gc.garbage.clear()
    if failures:
        raise SystemExit(f"{failures} requests did not get a 200")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--cases", type=int, default=40, help="articles rotated")
    p.add_argument("--telemetry", action="store_true", help="an OTLP exporter configured")
    p.add_argument("--policies", type=Path, default=None,
                   help="a policies directory (default: an empty one, pass-through)")
    p.add_argument("--shed-all", action="store_true",
                   help="shed every shadow job (pool.relay_busy 0.01, no hand-off): what a "
                        "shadow request costs the relay beside pass-through")
    p.add_argument("--cycles", type=int, default=0, metavar="N",
                   help="after the rounds, list the reference cycles N requests leave")
    p.add_argument("--gen0", type=int, default=None,
                   help="the collector's generation-0 threshold, set once the app is ready")
    args = p.parse_args(argv)
    import uvloop

    with tempfile.TemporaryDirectory(prefix="verity-bench-") as tmp:
        workdir = Path(tmp)
        mport = rp.free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GATEWAY_"))}
        mock = [sys.executable, str(HERE / "mock_upstream.py"), "--port", str(mport),
                "--impl", "raw"]
        with rp.process("mock", mock, env=env, cwd=tmp, log=workdir / "mock.log",
                        ready_url=f"http://127.0.0.1:{mport}/v1/models"):
            best = min(uvloop.run(measure(args, f"http://127.0.0.1:{mport}/v1", workdir)))
    print(f"best of {args.rounds}: {best:.1f} µs CPU per pass-through request "
          f"({'telemetry on' if args.telemetry else 'telemetry off'}, c = {args.concurrency})")
    print(orjson.dumps({"best_us": round(best, 1)}).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
