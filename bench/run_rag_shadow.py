"""RAG traffic through the shipped default shadow policy vs pass-through, same run.

    .venv/bin/python bench/run_rag_shadow.py                      # ~1 minute
    .venv/bin/python bench/run_rag_shadow.py --latencies 50 --concurrency 64

The traffic of issue 12: a HaluEval news article (~700 words) as ``<context>`` in
the system message, answered by a ~55-word summary (the mock's fixed answer; the
articles rotate over ``--cases`` rows of ``data/halueval/halueval-dev.jsonl``).
Configurations, each a fresh gateway (``gateway serve``, unpinned: the gateway,
its worker processes, the mock and the load generator share the box's cores):

- ``passthrough`` — an empty policies directory;
- ``shadow-loop`` — the shipped ``policies/`` (``default``: shadow with grounding,
  claims, citations + the ``grounding`` candidate), ``pool.workers: 0``:
  verification on the relay's event loop, as before the pool;
- ``shadow-pool`` — the same policies, ``pool.workers`` by default (the cores the
  relay does not need).

Per cell: requests/s, client p50/p99, the relay process's CPU per request and its
worker processes' (children), and from ``/readyz`` after the cell: jobs verified,
abandoned, dropped — the verified share of the shadow sample — and, as the load ended,
the relay's own load (``shadow.relay``: busy share, saturated, jobs it shed in the
cell; printed and in the JSON).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_passthrough as rp  # noqa: E402
from loadgen import run_load  # noqa: E402

DATA = HERE.parent / "data" / "halueval" / "halueval-dev.jsonl"
POLICIES = HERE.parent / "policies"
CONFIGS = ("passthrough", "shadow-loop", "shadow-pool")


def traffic(cases: int) -> tuple[list[bytes], str]:
    """Request bodies (one article each) and the mock's answer (a summary)."""
    rows = [orjson.loads(line) for line in DATA.read_bytes().splitlines() if line.strip()]
    news = [r for r in rows if r["source"] == "halueval-summarization"][:cases]
    if not news:
        raise SystemExit(f"no summarization rows in {DATA}")
    bodies = [orjson.dumps({"model": "bench", "messages": [
        {"role": "system", "content": "Answer from the document.\n<context>\n"
                                      + r["context_input"].strip() + "\n</context>"},
        {"role": "user", "content": "Summarize the document."}]}) for r in news]
    return bodies, news[0]["model_output"].strip()


def tree_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of ``pid`` and of its live descendants (the pool's workers)."""
    own = rp.cpu_seconds(pid)
    children = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                kids = [int(k) for k in task.read_text().split()]
            except OSError:
                continue
            for k in kids:
                try:
                    children += rp.cpu_seconds(k)
                except OSError:
                    continue
                todo.append(k)
    return own, children


def readyz(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as resp:  # noqa: S310
        data: dict[str, Any] = orjson.loads(resp.read())
        return data


def run(args: argparse.Namespace, workdir: Path, log: Path) -> list[dict[str, Any]]:
    bodies, answer = traffic(args.cases)
    (workdir / "answer.txt").write_text(answer, encoding="utf-8")
    (workdir / "empty").mkdir()
    words = sum(len(orjson.loads(b)["messages"][0]["content"].split()) for b in bodies)
    print(f"  {len(bodies)} articles, {words / len(bodies):.0f} words each on average; "
          f"answer {len(answer.split())} words", file=sys.stderr)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GATEWAY_"))}
    base_env["PYTHONPATH"] = str(rp.REPO)
    rows: list[dict[str, Any]] = []
    loop = rp.new_event_loop()
    try:
        for latency in args.latencies:
            mport = rp.free_port()
            mock_argv = [sys.executable, str(HERE / "mock_upstream.py"), "--port", str(mport),
                         "--latency-ms", str(latency), "--answer-file",
                         str(workdir / "answer.txt")]
            with rp.process("mock", mock_argv, env=base_env, cwd=str(workdir), log=log,
                            ready_url=f"http://127.0.0.1:{mport}/v1/models") as mock:
                for name in args.configs:
                    gport = rp.free_port()
                    env = {**base_env, "GATEWAY_LOG_LEVEL": "warning",
                           "GATEWAY_READYZ_DETAIL": "public",
                           "GATEWAY_AUDIT__PATH": str(workdir / f"audit-{name}.jsonl"),
                           **dict(kv.split("=", 1) for kv in args.gateway_env)}
                    if name == "shadow-loop":
                        env["GATEWAY_POOL__WORKERS"] = "0"
                    policies = workdir / "empty" if name == "passthrough" else POLICIES
                    gw_argv = [sys.executable, "-m", "gateway", "serve", "--host", "127.0.0.1",
                               "--port", str(gport), "--upstream",
                               f"http://127.0.0.1:{mport}/v1", "--policies", str(policies)]
                    with rp.process("gateway", gw_argv, env=env, cwd=str(workdir), log=log,
                                    ready_url=f"http://127.0.0.1:{gport}/readyz") as gw:
                        if name == "shadow-pool":  # the workers start in the background
                            deadline = time.monotonic() + 60
                            while not readyz(gport)["shadow"]["pool"]["started"] \
                                    and time.monotonic() < deadline:
                                time.sleep(0.2)
                        for c in args.concurrency:
                            rows.append(cell(loop, args, name, latency, c, gport, gw.pid,
                                             mock.pid, bodies))
    finally:
        loop.close()
    return rows


def cell(loop: Any, args: argparse.Namespace, name: str, latency: float, c: int,
         gport: int, gpid: int, mpid: int, bodies: list[bytes]) -> dict[str, Any]:
    snap: list[float] = []
    before = readyz(gport).get("shadow", {})

    def on_measure() -> None:
        snap[:] = [*tree_cpu(gpid), *rp.system_cpu()]

    ramp = min(latency / 1000, args.duration)
    res = loop.run_until_complete(run_load(
        f"http://127.0.0.1:{gport}{rp.CHAT}", concurrency=c, requests=args.requests,
        duration=args.duration, warmup=args.warmup, ramp=ramp, on_measure=on_measure,
        bodies=bodies))
    relay, workers = tree_cpu(gpid)
    busy, _steal = rp.system_cpu()
    at_end = readyz(gport).get("shadow", {}).get("relay", {})  # the last second of load
    time.sleep(args.settle)  # let the queue finish what it took before reading it
    after = readyz(gport).get("shadow", {})
    n = res.completed or 1
    s = res.summary()
    row: dict[str, Any] = {
        "latency_ms": latency, "config": name, "concurrency": c, "rps": s["rps"],
        "p50_ms": s["p50_ms"], "p99_ms": s["p99_ms"], "errors": s["errors"],
        "relay_cpu_ms_per_req": round(1000 * (relay - snap[0]) / n, 3),
        "workers_cpu_ms_per_req": round(1000 * (workers - snap[1]) / n, 3),
        "box_busy_cpus": round((busy - snap[2]) / max(res.elapsed_s, 1e-9), 2)}
    if after:
        tot_a, tot_b = after["sample"]["total"], before.get("sample", {}).get("total", {})
        delta = {k: tot_a.get(k, 0) - tot_b.get(k, 0) for k in tot_a}
        settled = sum(delta.values())
        row["shadow"] = delta
        row["verified_share"] = round(delta.get("verified", 0) / settled, 3) if settled else None
    if at_end:  # the relay's own load (gateway.pool.relay_load) as the load ended
        row["relay_load"] = {"busy": at_end.get("busy"), "saturated": at_end.get("saturated"),
                             "shed": at_end.get("shed", 0)
                             - before.get("relay", {}).get("shed", 0)}
    print(f"  {latency:>4g} ms c={c:<3} {name:<12} {row['rps']:>8.1f} rps  p50 {row['p50_ms']} "
          f"p99 {row['p99_ms']} ms  relay {row['relay_cpu_ms_per_req']} + workers "
          f"{row['workers_cpu_ms_per_req']} ms/req  verified {row.get('verified_share')} "
          f"{row.get('shadow', '')}  relay load {row.get('relay_load')}  errors {row['errors']}",
          file=sys.stderr, flush=True)
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| upstream | c | config | rps (vs pass-through) | p50 ms (added) | p99 ms "
             "| relay CPU ms/req | workers CPU ms/req | verified share (verified / abandoned "
             "/ dropped) |", "|---|---:|---|---|---|---:|---:|---:|---|"]
    base = {(r["latency_ms"], r["concurrency"]): r for r in rows if r["config"] == "passthrough"}
    for r in rows:
        b = base.get((r["latency_ms"], r["concurrency"]))
        rel = added = ""
        if b is not None and r is not b and b["rps"]:
            rel = f" ({100 * (r['rps'] - b['rps']) / b['rps']:+.1f}%)"
            added = f" ({r['p50_ms'] - b['p50_ms']:+.2f})"
        sh = r.get("shadow")
        share = "–" if not sh else (f"{r['verified_share']} ({sh.get('verified', 0)} / "
                                    f"{sh.get('abandoned', 0)} / {sh.get('dropped', 0)})")
        lines.append(f"| {r['latency_ms']:g} ms | {r['concurrency']} | {r['config']} "
                     f"| {r['rps']:.0f}{rel} | {r['p50_ms']:.2f}{added} | {r['p99_ms']:.2f} "
                     f"| {r['relay_cpu_ms_per_req']:.3f} | {r['workers_cpu_ms_per_req']:.3f} "
                     f"| {share} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    csv_f = lambda s: [float(x) for x in s.split(",") if x]  # noqa: E731
    csv_i = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    p.add_argument("--latencies", type=csv_f, default=[50.0])
    p.add_argument("--concurrency", type=csv_i, default=[64])
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--cases", type=int, default=40, help="articles rotated")
    p.add_argument("--duration", type=float, default=8.0)
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--settle", type=float, default=2.0,
                   help="seconds after a cell before /readyz is read")
    p.add_argument("--requests", type=int, default=50_000)
    p.add_argument("--out", type=Path, default=HERE / "results")
    p.add_argument("--gateway-env", action="append", default=[], metavar="KEY=VALUE",
                   help="an environment variable for every gateway started, e.g. "
                        "GATEWAY_POOL__RELAY_BUSY=1 (repeatable)")
    args = p.parse_args(argv)
    args.configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log = args.out / f"rag-shadow-{stamp}.log"
    with tempfile.TemporaryDirectory(prefix="verity-bench-") as tmp:
        rows = run(args, Path(tmp), log)
    table = markdown(rows)
    print(table)
    path = args.out / f"rag-shadow-{stamp}.json"
    path.write_bytes(orjson.dumps({"when": stamp, "machine": rp.machine(), "rows": rows,
                                   "table": table}, option=orjson.OPT_INDENT_2))
    print(f"\nwrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
