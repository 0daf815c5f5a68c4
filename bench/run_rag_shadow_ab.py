"""Two gateway trees side by side, at the same time: pass-through and shadow of each,
four gateways on one mock, each under its own closed-loop load (issue 12).

    .venv/bin/python bench/run_rag_shadow_ab.py --trees OTHER,. [--concurrency 16]
        [--duration 10] [--gateway-env GATEWAY_POOL__RELAY_BUSY=0.01 ...]

``bench/run_rag_shadow.py`` runs its configurations one after another: on a box
other work shares, the load changes between two cells more than a change to the
relay does. Here the four gateways (``passthrough`` — an empty policies directory —
and ``shadow-pool`` — the tree's shipped ``policies/``, for each of the two
``--trees``: checkouts, e.g. ``OTHER`` a ``git archive main`` unpacked in a scratch
directory and ``.`` this one) run at once on the RAG traffic of ``run_rag_shadow.py`` (50 ms mock
upstream, ``bench/mock_upstream.py --impl raw``), each with ``--concurrency``
clients of the lean load generator: whatever else runs on the box slows all four
alike. Per gateway: requests/s, client p50, the relay's CPU per request and its
workers', and for shadow the jobs' outcomes and the relay's own load (``/readyz``).
Compare the relay CPU per request within one run (shadow minus pass-through, tree
against tree); the rates depend on the four sharing the cores.
``--gateway-env GATEWAY_POOL__RELAY_BUSY=0.01 --gateway-env
GATEWAY_POOL__BUSY_JOBS_PER_SECOND=0`` sheds every job: what a shadow request's
bookkeeping costs the relay, verification aside.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_passthrough as rp  # noqa: E402
import run_rag_shadow as rs  # noqa: E402
from loadgen import run_load  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trees", required=True, help="two checkouts, comma-separated")
    p.add_argument("--concurrency", type=int, default=16, help="clients per gateway")
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--gateway-env", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    trees = [Path(t).resolve() for t in args.trees.split(",") if t]
    if len(trees) != 2 or not all((t / "gateway").is_dir() for t in trees):
        raise SystemExit("--trees: two checkouts of the gateway")
    bodies, answer = rs.traffic(40)
    extra = dict(kv.split("=", 1) for kv in args.gateway_env)
    with tempfile.TemporaryDirectory(prefix="verity-bench-") as tmp, ExitStack() as stack:
        work, log = Path(tmp), Path(tmp) / "log"
        (work / "answer.txt").write_text(answer, encoding="utf-8")
        (work / "empty").mkdir()
        env0 = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GATEWAY_"))}
        mport = rp.free_port()
        stack.enter_context(rp.process(
            "mock", [sys.executable, str(HERE / "mock_upstream.py"), "--impl", "raw", "--port",
                     str(mport), "--latency-ms", "50", "--answer-file", str(work / "answer.txt")],
            env={**env0, "PYTHONPATH": str(HERE.parent)}, cwd=tmp, log=log,
            ready_url=f"http://127.0.0.1:{mport}/v1/models"))
        gateways: dict[tuple[str, str], tuple[int, int]] = {}
        for i, tree in enumerate(trees):
            for config in ("passthrough", "shadow-pool"):
                port = rp.free_port()
                env = {**env0, "PYTHONPATH": str(tree), "GATEWAY_LOG_LEVEL": "warning",
                       "GATEWAY_READYZ_DETAIL": "public",
                       "GATEWAY_AUDIT__PATH": str(work / f"audit-{i}-{config}.jsonl"), **extra}
                policies = work / "empty" if config == "passthrough" else tree / "policies"
                gw = stack.enter_context(rp.process(
                    "gateway", [sys.executable, "-m", "gateway", "serve", "--host", "127.0.0.1",
                                "--port", str(port), "--upstream", f"http://127.0.0.1:{mport}/v1",
                                "--policies", str(policies)],
                    env=env, cwd=tmp, log=log, ready_url=f"http://127.0.0.1:{port}/readyz"))
                gateways[(f"{i}:{tree.name}", config)] = (port, gw.pid)
        deadline = time.monotonic() + 60
        for (_, config), (port, _) in gateways.items():
            while config == "shadow-pool" and not rs.readyz(port)["shadow"]["pool"]["started"] \
                    and time.monotonic() < deadline:
                time.sleep(0.2)
        snaps: dict[tuple[str, str], tuple[float, float]] = {}

        def marker(key: tuple[str, str], pid: int) -> Any:
            return lambda: snaps.__setitem__(key, rs.tree_cpu(pid))

        async def loads() -> list[Any]:
            return await asyncio.gather(*(run_load(
                f"http://127.0.0.1:{port}{rp.CHAT}", concurrency=args.concurrency,
                requests=1_000_000, duration=args.duration, warmup=args.warmup, ramp=0.05,
                on_measure=marker(key, pid), bodies=bodies, client="raw")
                for key, (port, pid) in gateways.items()))

        loop = rp.new_event_loop()
        try:
            results = loop.run_until_complete(loads())
        finally:
            loop.close()
        print("| tree | config | rps | p50 ms | relay CPU ms/req | workers CPU ms/req "
              "| jobs (verified / dropped) | relay load at the end |")
        print("|---|---|---:|---:|---:|---:|---|---|")
        for (key, (port, pid)), res in zip(gateways.items(), results, strict=True):
            relay, workers = rs.tree_cpu(pid)
            relay0, workers0 = snaps[key]
            n = max(res.completed, 1)
            s = res.summary()
            jobs = load = "–"
            if key[1] == "shadow-pool":
                shadow = rs.readyz(port)["shadow"]
                total, rel = shadow["sample"]["total"], shadow.get("relay", {})
                jobs = f"{total['verified']} / {total['dropped']}"
                load = f"busy {rel.get('busy')}, saturated {rel.get('saturated')}"
            print(f"| {key[0]} | {key[1]} | {s['rps']:.0f} | {s['p50_ms']:.2f} "
                  f"| {1000 * (relay - relay0) / n:.3f} | {1000 * (workers - workers0) / n:.3f} "
                  f"| {jobs} | {load} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
