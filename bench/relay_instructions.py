"""Instructions the relay process executes per request, counted by valgrind: pass-through
against a shadow request whose job is shed on arrival (issue 12, session 8). A loaded box
cannot move an instruction count; it moves the wall-clock benchmarks by tens of points.

    .venv/bin/python bench/relay_instructions.py [TREE ...] [--requests 1000] [--concurrency 16]
        [--configs passthrough,shed] [--top 25]

For each checkout ``TREE`` (default: this one; a ``git archive`` copy works, it is put
first on ``PYTHONPATH``) and each configuration, a fresh ``python -m gateway serve`` runs
under ``valgrind --tool=callgrind`` with instrumentation off (``PYTHONHASHSEED=0``), in
front of ``bench/mock_upstream.py --impl raw`` (0 ms) with the issue-12 RAG traffic
(``bench/run_rag_shadow.py``'s: a ~700-word article as ``<context>``). After a warm-up
of 300 requests, ``callgrind_control -i on <pid>`` opens the window; ``--requests``
requests at ``--concurrency`` later ``callgrind_control -d <pid>`` closes it. Everything
the relay process ran in the window is counted — the event loop, uvicorn, aiohttp, the
collector, allocation, the audit writer thread — divided by the requests.

- ``passthrough`` — an empty policies directory;
- ``shed`` — the shipped ``policies/`` with every shadow job shed as it arrives
  (``GATEWAY_POOL__RELAY_BUSY=0.01``, ``GATEWAY_POOL__BUSY_JOBS_PER_SECOND=0``: what a
  saturated relay does with almost every shadow request); its record written.

The difference is what a shed shadow request costs the relay beyond pass-through.
Work a clock drives is not per-request work, and under valgrind a second holds ~40
requests instead of ~1,000: the policy watcher is off (``GATEWAY_RELOAD_POLICIES=false``:
its per-second poll would read as tens of thousands of instructions per request), and
the timers left (the relay-load tick, the pool) are taken out with a second window of
``IDLE_S`` seconds without requests, scaled to the load window's length.
``--top N`` lists the N C functions (exclusive instructions per request, timers taken
out) whose count differs most between the two configurations (``callgrind_annotate``).
One run per cell is enough: repeat runs agree within ~±6 k instructions per request
(the event loop batches a little differently each time). Needs ``valgrind``; ~4 minutes
per tree on a busy 2-core box. ``callgrind_control`` is always given the gateway's pid
(without one it reaches every callgrind run on the machine).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_passthrough as rp  # noqa: E402
from loadgen import run_load  # noqa: E402
from run_rag_shadow import traffic  # noqa: E402

SHED_ENV = {"GATEWAY_POOL__RELAY_BUSY": "0.01", "GATEWAY_POOL__BUSY_JOBS_PER_SECOND": "0"}
WARMUP = 300
IDLE_S = 10.0


def _control(*args: str) -> None:
    # Always with the pid: without one, callgrind_control reaches every callgrind run
    # on the box (other people's too).
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True, timeout=120)


def measure(tree: Path, config: str, requests: int, concurrency: int,
            work: Path) -> tuple[float, Path, Path, float]:
    """Instructions per request of one cell (the timers' share taken out); the callgrind
    dumps of its window and of the idle window, and the scale from idle to busy."""
    bodies, answer = traffic(40)
    (work / "answer.txt").write_text(answer, encoding="utf-8")
    (work / "empty").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GATEWAY_"))}
    env.update({"PYTHONPATH": str(tree), "PYTHONHASHSEED": "0", "GATEWAY_LOG_LEVEL": "warning",
                "GATEWAY_READYZ_DETAIL": "public", "GATEWAY_RELOAD_POLICIES": "false",
                "GATEWAY_AUDIT__PATH": str(work / f"audit-{config}.jsonl")})
    if config == "shed":
        env.update(SHED_ENV)
    policies = tree / "policies" if config == "shed" else work / "empty"
    out = work / f"cg-{config}.out"
    mport, gport = rp.free_port(), rp.free_port()
    log = work / "log"
    mock = [sys.executable, str(HERE / "mock_upstream.py"), "--port", str(mport),
            "--impl", "raw", "--answer-file", str(work / "answer.txt")]
    gw = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
          sys.executable, "-m", "gateway", "serve", "--host", "127.0.0.1", "--port",
          str(gport), "--upstream", f"http://127.0.0.1:{mport}/v1", "--policies", str(policies)]
    url = f"http://127.0.0.1:{gport}{rp.CHAT}"
    loop = asyncio.new_event_loop()
    try:
        with rp.process("mock", mock, env=env, cwd=str(work), log=log,
                        ready_url=f"http://127.0.0.1:{mport}/v1/models"), \
                rp.process("gateway", gw, env=env, cwd=str(work), log=log, timeout=300,
                           ready_url=f"http://127.0.0.1:{gport}/readyz") as g:
            if config == "shed":
                time.sleep(5)  # the pool's workers start in the background
            loop.run_until_complete(run_load(url, concurrency=concurrency, requests=WARMUP,
                                             duration=600, bodies=bodies))
            _control("-z", str(g.pid))
            _control("-i", "on", str(g.pid))
            t0 = time.monotonic()
            res = loop.run_until_complete(run_load(url, concurrency=concurrency,
                                                   requests=requests, duration=600,
                                                   bodies=bodies))
            busy_s = time.monotonic() - t0
            _control("-d", str(g.pid))
            time.sleep(IDLE_S)  # the same process with no request: its timers alone
            _control("-d", str(g.pid))
            _control("-i", "off", str(g.pid))
    finally:
        loop.close()
    if res.completed != requests or res.errors:
        raise SystemExit(f"{config}: {res.completed} of {requests} requests, {res.errors} errors")
    dump, idle = sorted(work.glob(f"cg-{config}.out.*"), key=lambda p: int(p.suffix[1:]))[:2]
    timers = _total(idle) * busy_s / IDLE_S
    print(f"  {config}: window {busy_s:.1f} s, {_total(dump) / requests / 1e3:,.1f} k per "
          f"request; timers {timers / requests / 1e3:,.1f} k of it", file=sys.stderr)
    return (_total(dump) - timers) / requests, dump, idle, busy_s / IDLE_S


def _total(path: Path) -> int:
    m = re.search(rb"^(?:summary|totals):\s+(\d+)", path.read_bytes(), re.M)
    return int(m.group(1)) if m else 0


def functions(dump: Path) -> dict[str, int]:
    """Exclusive instructions per C function (``callgrind_annotate``)."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", str(dump)],
                          capture_output=True, text=True, check=True).stdout
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if m and ":" in m.group(2):
            out[m.group(2).strip()] = int(m.group(1).replace(",", ""))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trees", nargs="*", type=Path, default=[HERE.parent])
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--configs", default="passthrough,shed")
    p.add_argument("--top", type=int, default=0)
    args = p.parse_args(argv)
    configs = args.configs.split(",")
    for tree in args.trees:
        tree = tree.resolve()
        per: dict[str, float] = {}
        fns: dict[str, dict[str, int]] = {}
        for config in configs:
            with tempfile.TemporaryDirectory(prefix="verity-instr-") as tmp:
                per[config], dump, idle, scale = measure(tree, config, args.requests,
                                                         args.concurrency, Path(tmp))
                if args.top:
                    busy, quiet = functions(dump), functions(idle)
                    fns[config] = {k: round(v - scale * quiet.get(k, 0))
                                   for k, v in busy.items()}
            print(f"{tree}: {config}: {per[config] / 1e3:,.1f} k instructions per request "
                  f"({args.requests} requests, c = {args.concurrency})", flush=True)
        if "passthrough" in per and "shed" in per:
            print(f"{tree}: a shed shadow request over pass-through: "
                  f"{(per['shed'] - per['passthrough']) / 1e3:+,.1f} k instructions", flush=True)
        if args.top and len(fns) == 2:
            a, b = (fns[c] for c in configs)
            diff = {k: (b.get(k, 0) - a.get(k, 0)) / args.requests for k in {*a, *b}}
            for name, d in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:args.top]:
                print(f"  {d / 1e3:+8.2f} k  {name[:110]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
