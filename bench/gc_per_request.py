"""What the cyclic garbage collector costs the relay per request, and what reference
cycles requests leave behind (issue 12, session 6).

    .venv/bin/python bench/gc_per_request.py                       # pass-through
    .venv/bin/python bench/gc_per_request.py --shadow --saveall    # the shipped policies
    .venv/bin/python bench/gc_per_request.py --gateway-env GATEWAY_SERVER__GC_GEN0_THRESHOLD=700

A gateway (``bench/_gc_probe.py serve``: ``gateway serve`` with a probe) in front of
``bench/mock_upstream.py --impl raw`` (0 ms), the issue-12 RAG traffic (a ~700-word
HaluEval article as ``<context>``), ``--concurrency`` clients. After a warm-up, a
window of ``--requests`` requests: the relay's CPU per request, the collector's
passes in it (count and thread CPU per generation) and, with ``--saveall``, the
cyclic garbage found per request by type (``gc.DEBUG_SAVEALL``: the window's garbage
is kept until it ends, so its collections cost more than usual — read the CPU columns
from a run without it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_passthrough as rp  # noqa: E402
from loadgen import run_load  # noqa: E402
from run_rag_shadow import POLICIES, traffic  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=4000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--shadow", action="store_true", help="the shipped policies/")
    p.add_argument("--saveall", action="store_true", help="list the cyclic garbage")
    p.add_argument("--gateway-env", action="append", default=[], metavar="K=V")
    args = p.parse_args(argv)
    bodies, answer = traffic(40)
    with tempfile.TemporaryDirectory(prefix="verity-bench-") as tmp:
        work = Path(tmp)
        (work / "empty").mkdir()
        (work / "answer.txt").write_text(answer, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GATEWAY_"))}
        env.update({"PYTHONPATH": str(rp.REPO), "GATEWAY_LOG_LEVEL": "warning",
                    "GATEWAY_AUDIT__PATH": str(work / "audit.jsonl"),
                    "GC_PROBE_OUT": str(work / "probe.jsonl"),
                    **dict(kv.split("=", 1) for kv in args.gateway_env)})
        if args.saveall:
            env["GC_PROBE_SAVEALL"] = "1"
        mport, gport = rp.free_port(), rp.free_port()
        log = work / "log"
        mock = [sys.executable, str(HERE / "mock_upstream.py"), "--port", str(mport),
                "--impl", "raw", "--answer-file", str(work / "answer.txt")]
        gw = [sys.executable, str(HERE / "_gc_probe.py"), "serve", "--host", "127.0.0.1",
              "--port", str(gport), "--upstream", f"http://127.0.0.1:{mport}/v1",
              "--policies", str(POLICIES if args.shadow else work / "empty")]
        url = f"http://127.0.0.1:{gport}{rp.CHAT}"
        loop = asyncio.new_event_loop()
        try:
            with rp.process("mock", mock, env=env, cwd=tmp, log=log,
                            ready_url=f"http://127.0.0.1:{mport}/v1/models"), \
                    rp.process("gateway", gw, env=env, cwd=tmp, log=log,
                               ready_url=f"http://127.0.0.1:{gport}/readyz") as g:
                if args.shadow:
                    time.sleep(8)  # the pool's workers start in the background
                loop.run_until_complete(run_load(url, concurrency=args.concurrency,
                                                 requests=1000, duration=10, bodies=bodies))
                os.kill(g.pid, signal.SIGUSR1)
                time.sleep(0.5)
                res = loop.run_until_complete(run_load(
                    url, concurrency=args.concurrency, requests=args.requests, duration=60,
                    bodies=bodies))
                time.sleep(1.0)  # shadow jobs in flight settle
                os.kill(g.pid, signal.SIGUSR2)
                deadline = time.monotonic() + 30
                while not (work / "probe.jsonl").exists() and time.monotonic() < deadline:
                    time.sleep(0.2)
                time.sleep(0.5)
        finally:
            loop.close()
        probe = orjson.loads((work / "probe.jsonl").read_bytes().splitlines()[0])
    n = res.completed or 1
    gc_s = sum(probe["collector_cpu_s"].values())
    print(f"{res.completed} requests ({res.errors} errors), c = {args.concurrency}, "
          f"{'shadow' if args.shadow else 'pass-through'}, thresholds {probe['thresholds']}")
    print(f"relay CPU {1e6 * probe['process_cpu_s'] / n:.0f} µs per request; collector "
          f"{1e6 * gc_s / n:.1f} µs per request in {sum(probe['collections'].values())} passes "
          f"{probe['collections']}")
    if args.saveall:
        total = sum(probe["garbage"].values())
        print(f"cyclic garbage: {total / n:.1f} objects per request")
        for kind, count in probe["garbage"].items():
            print(f"  {count / n:6.2f} {kind}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
