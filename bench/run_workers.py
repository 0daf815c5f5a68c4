"""``gateway serve --workers 2`` vs ``--workers 1`` (issue 12), pass-through and shadow, one run.

    .venv/bin/python bench/run_workers.py --configs passthrough   # ~40 s
    .venv/bin/python bench/run_workers.py --configs shadow        # ~60 s (queue drains)
    .venv/bin/python bench/run_workers.py                         # both, one after the other
    .venv/bin/python bench/run_workers.py --client aiohttp --mock lean   # the old parts

0 ms mock upstream, c = 16, nothing pinned: the relay processes, their verification
pools, the mock and the load generator share the box's cores (on the 2-core VM that
is the issue's target: ≥ 1.3x one worker). Configurations:

- ``passthrough`` — an empty policies directory; the load is ``run_passthrough.py``'s
  short chat request, the mock's default JSON answer;
- ``shadow`` — the shipped ``policies/`` (``default`` in shadow mode + its ``grounding``
  candidate) on ``run_rag_shadow.py``'s RAG traffic (a ~700-word HaluEval article as
  ``<context>``, a ~55-word summary as the mock's answer);
- ``passthrough-rag`` (not by default) — the RAG traffic with an empty policies directory.

For each configuration one mock and two gateways (``--workers 1`` and ``--workers 2``)
are started and left idle until all their relay processes answer ``/readyz`` and their
pools have started; then cells alternate 1, 2 / 2, 1 per round, so drift on a shared
box hits both. Before each cell the runner waits for the gateways to go quiet (a shadow
cell's pool drains its queue after the load stops: that CPU is counted in the cell).

The lean parts are the default — ``bench/rawload.py`` (``--client raw``) and
``bench/rawmock.py`` (``--mock raw``) — because on 2 cores every millisecond the load
generator and the mock spend is one the relays cannot.

Per cell: requests/s, p50/p99, errors, and the CPU split per completed request, from
``/proc/<pid>/stat`` deltas over the measured window: each relay process, their pool
workers (window plus drain), the supervisor, the mock, the load generator (its own
``process_time``), and the rest of the box (other processes). Then the ratio of each
2-worker cell to the 1-worker cell beside it, and an **estimate** (printed as such) of
what 4 and 8 cores would give, derived from the measured per-part CPU.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_passthrough as rp  # noqa: E402
from loadgen import chat_body, new_event_loop, run_load  # noqa: E402

POLICIES = HERE.parent / "policies"
CONFIGS = ("passthrough", "shadow", "passthrough-rag")


def descendants(pid: int) -> list[int]:
    """All live descendants of ``pid`` (``/proc/<pid>/task/*/children``), depth first."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                kids = [int(k) for k in task.read_text().split()]
            except OSError:
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


def switches(pid: int) -> int:
    """Voluntary + involuntary context switches of ``pid``'s main thread (its event
    loop): how often the loop slept or was preempted."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return sum(int(line.split()[1]) for line in text.splitlines()
               if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))


def cpu(pid: int) -> float:
    try:
        return rp.cpu_seconds(pid)
    except (OSError, ValueError):
        return 0.0


@dataclass
class Gateway:
    """One ``gateway serve --workers N`` tree: the supervisor (or the only relay), its
    relay processes and their pool workers."""

    workers: int
    port: int
    pid: int
    relays: list[int] = field(default_factory=list)
    pools: list[int] = field(default_factory=list)

    def snapshot(self) -> dict[str, float]:
        snap = {"top": cpu(self.pid) if self.pid not in self.relays else 0.0}
        for r in self.relays:
            snap[f"relay{r}"] = cpu(r)
            snap[f"switches{r}"] = switches(r)
        snap["pool"] = sum(cpu(p) for p in self.pools)
        return snap

    def tree_cpu(self) -> float:
        return cpu(self.pid) + sum(cpu(p) for p in descendants(self.pid))


def connections(pids: list[int], port: int) -> list[int]:
    """Established connections to local ``port`` held by each of ``pids`` (how
    ``SO_REUSEPORT`` spread the load generator's kept-alive connections)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if int(f[1].rsplit(":", 1)[1], 16) == port and f[3] == "01":
                inodes.add(f[9])
    out = []
    for pid in pids:
        n = 0
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                n += 1
        out.append(n)
    return out


def readyz(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as resp:  # noqa: S310
        data: dict[str, Any] = orjson.loads(resp.read())
        return data


def per_worker_readyz(gw: Gateway, timeout: float = 60.0) -> dict[int, dict[str, Any]]:
    """``/readyz`` of every relay process (fresh connections until each index answered,
    pool started)."""
    seen: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            r = readyz(gw.port)
        except OSError:
            time.sleep(0.1)
            continue
        index = (r.get("worker") or {}).get("index", 0)
        pool = r.get("shadow", {}).get("pool") or {}
        if pool.get("started", True):
            seen[index] = r
        if len(seen) == gw.workers:
            return seen
        time.sleep(0.05)
    raise TimeoutError(f"gateway --workers {gw.workers}: only relays {sorted(seen)} ready "
                       f"after {timeout}s")


def settle(gateways: list[Gateway], threshold: float = 0.05, most: float = 20.0) -> float:
    """Wait (at most ``most`` s) until the gateways together use under ``threshold`` of a
    CPU over 0.5 s; return the seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < most:
        a = sum(g.tree_cpu() for g in gateways)
        time.sleep(0.5)
        if (sum(g.tree_cpu() for g in gateways) - a) / 0.5 < threshold:
            break
    return time.monotonic() - t0


def sample_totals(per_worker: dict[int, dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in per_worker.values():
        for k, v in (r.get("shadow", {}).get("sample", {}).get("total") or {}).items():
            out[k] = out.get(k, 0) + int(v)
    return out


def traffic(name: str, cases: int) -> tuple[list[bytes], str | None]:
    """(request bodies, the mock's answer or None for its default)."""
    if name == "passthrough":
        return [chat_body(False)], None
    import run_rag_shadow

    return run_rag_shadow.traffic(cases)


def run_config(name: str, args: argparse.Namespace, workdir: Path, log: Path,
               loop: Any) -> list[dict[str, Any]]:
    bodies, answer = traffic(name, args.cases)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GATEWAY_"))}
    base_env["PYTHONPATH"] = str(rp.REPO)
    mport = rp.free_port()
    mock_argv = [sys.executable, str(HERE / "mock_upstream.py"), "--port", str(mport),
                 "--impl", args.mock]
    if answer is not None:
        (workdir / "answer.txt").write_text(answer, encoding="utf-8")
        mock_argv += ["--answer-file", str(workdir / "answer.txt")]
    policies = POLICIES if name == "shadow" else workdir / "empty"
    policies.mkdir(exist_ok=True)
    rows: list[dict[str, Any]] = []
    with rp.process("mock", mock_argv, env=base_env, cwd=str(workdir), log=log,
                    ready_url=f"http://127.0.0.1:{mport}/v1/models") as mock:
        gws: dict[int, Gateway] = {}
        stack = []
        try:
            for n in (1, 2):
                port = rp.free_port()
                env = {**base_env, "GATEWAY_LOG_LEVEL": "warning",
                       "GATEWAY_READYZ_DETAIL": "public",
                       "GATEWAY_AUDIT__PATH": str(workdir / f"audit-{name}-{n}")}
                argv = [sys.executable, "-m", "gateway", "serve", "--host", "127.0.0.1",
                        "--port", str(port), "--upstream", f"http://127.0.0.1:{mport}/v1",
                        "--policies", str(policies), "--workers", str(n)]
                cm = rp.process(f"gateway-{n}", argv, env=env, cwd=str(workdir), log=log,
                                ready_url=f"http://127.0.0.1:{port}/readyz", timeout=60)
                proc = cm.__enter__()
                stack.append(cm)
                gw = Gateway(n, port, proc.pid)
                ready = per_worker_readyz(gw)
                gw.relays = sorted(r["worker"]["pid"] for r in ready.values()) \
                    if n > 1 else [proc.pid]
                gw.pools = sorted(p for r in ready.values()
                                  for p in (r.get("shadow", {}).get("pool") or {}).get("pids",
                                                                                        []))
                gws[n] = gw
            settle(list(gws.values()))
            for rnd in range(args.rounds):
                for n in ((1, 2) if rnd % 2 == 0 else (2, 1)):
                    rows.append(cell(loop, args, name, rnd, gws[n], list(gws.values()),
                                     mock.pid, bodies))
        finally:
            for cm in reversed(stack):
                cm.__exit__(None, None, None)
    return rows


def cell(loop: Any, args: argparse.Namespace, name: str, rnd: int, gw: Gateway,
         all_gws: list[Gateway], mock_pid: int, bodies: list[bytes]) -> dict[str, Any]:
    settle(all_gws)
    if args.quiet_wait > 0:
        rp.wait_for_quiet(args.quiet_threshold, args.quiet_wait)
    before = sample_totals(per_worker_readyz(gw))
    pool_before = sum(cpu(p) for p in gw.pools)
    snap: dict[str, Any] = {}

    def on_measure() -> None:
        snap.update(gw=gw.snapshot(), mock=cpu(mock_pid), box=rp.system_cpu()[0])

    conns: list[list[int]] = []

    def count_connections() -> None:  # once the load runs, mid-window
        conns.append(connections(gw.relays, gw.port))

    loop.call_later(args.warmup + args.duration / 2, count_connections)
    res = loop.run_until_complete(run_load(
        f"http://127.0.0.1:{gw.port}{rp.CHAT}", concurrency=args.concurrency,
        requests=args.requests, duration=args.duration, warmup=args.warmup,
        on_measure=on_measure, bodies=bodies, client=args.client))
    end: dict[str, Any] = {"gw": gw.snapshot(), "mock": cpu(mock_pid),
                           "box": rp.system_cpu()[0]}
    pool_window = end["gw"]["pool"] - snap["gw"]["pool"]
    drained = settle(all_gws)
    pool_after = sum(cpu(p) for p in gw.pools)
    after = sample_totals(per_worker_readyz(gw))
    n = res.completed or 1
    window = max(res.elapsed_s, 1e-9)
    relays = [end["gw"][k] - snap["gw"][k] for k in snap["gw"] if k.startswith("relay")]
    pool = pool_after - snap["gw"]["pool"]
    ours = (sum(relays) + (end["gw"]["pool"] - snap["gw"]["pool"])
            + end["gw"]["top"] - snap["gw"]["top"] + end["mock"] - snap["mock"]
            + res.client_cpu_s)
    s = res.summary()

    def ms(sec: float) -> float:
        return round(1000 * sec / n, 3)

    row: dict[str, Any] = {
        "config": name, "round": rnd, "workers": gw.workers, "rps": s["rps"],
        "p50_ms": s["p50_ms"], "p99_ms": s["p99_ms"], "completed": res.completed,
        "errors": res.errors, "first_error": res.first_error,
        "relay_ms": ms(sum(relays)), "relay_cpus": round(sum(relays) / window, 2), "relay_each_ms": [ms(r) for r in relays],
        "relay_share": [round(r / max(sum(relays), 1e-9), 2) for r in relays],
        "supervisor_ms": ms(end["gw"]["top"] - snap["gw"]["top"]) if gw.workers > 1 else 0.0,
        "relay_connections": conns[0] if conns else None,
        "relay_switches_per_req": round(sum(end["gw"][k] - snap["gw"][k] for k in snap["gw"]
                                            if k.startswith("switches")) / n, 2),
        "pool_ms": ms(pool), "pool_window_ms": ms(pool_window), "mock_ms": ms(end["mock"] - snap["mock"]),
        "client_ms": ms(res.client_cpu_s),
        "other_cpus": round(max(0.0, (end["box"] - snap["box"]) - ours) / window, 2),
        "drain_s": round(drained, 1)}
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    if any(delta.values()):
        settled = sum(delta.values())
        row["shadow"] = delta
        row["verified_share"] = round(delta.get("verified", 0) / settled, 3)
        if delta.get("verified"):  # warm-up, window and drain: all the jobs the pool ran
            row["pool_ms_per_verified"] = round(
                1000 * (pool_after - pool_before) / delta["verified"], 3)
    print(f"  {name:<15} r{rnd} w{gw.workers}  {row['rps']:>8.1f} rps  p50 {row['p50_ms']} "
          f"p99 {row['p99_ms']} ms  errors {row['errors']}  CPU ms/req: relays "
          f"{row['relay_ms']} ({row['relay_cpus']} CPUs) {row['relay_share']} connections {row['relay_connections']} "
          f"switches/req {row['relay_switches_per_req']} pool "
          f"{row['pool_window_ms']} (+ drain: {row['pool_ms']}) mock {row['mock_ms']} "
          f"client {row['client_ms']}  other processes {row['other_cpus']} CPUs"
          + (f"  verified {row['verified_share']} {delta}" if "shadow" in row else ""),
          file=sys.stderr, flush=True)
    return row


# ---- output -------------------------------------------------------------------------------


def ratios(rows: list[dict[str, Any]], name: str) -> list[float]:
    """2-worker rps / 1-worker rps of the same round (the cells ran side by side)."""
    out = []
    for rnd in sorted({r["round"] for r in rows if r["config"] == name}):
        pair = {r["workers"]: r for r in rows if r["config"] == name and r["round"] == rnd}
        if 1 in pair and 2 in pair and pair[1]["rps"]:
            out.append(round(pair[2]["rps"] / pair[1]["rps"], 2))
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| config | round | workers | rps | p50 / p99 ms | relay CPU ms/req (share per "
             "relay; connections) | relays' CPUs | relay switches/req | pool in window (+ drain) | mock "
             "| load gen | other processes (CPUs) | verified share |",
             "|---|---:|---:|---:|---|---|---:|---:|---|---:|---:|---:|---|"]
    for r in rows:
        share = "/".join(f"{x:.2f}" for x in r["relay_share"])
        if r.get("relay_connections"):
            share += "; " + "/".join(str(c) for c in r["relay_connections"])
        lines.append(
            f"| {r['config']} | {r['round']} | {r['workers']} | {r['rps']:.0f} "
            f"| {r['p50_ms']:.1f} / {r['p99_ms']:.1f} | {r['relay_ms']:.3f} ({share}) "
            f"| {r['relay_cpus']:.2f} | {r.get('relay_switches_per_req', '–')} "
            f"| {r['pool_window_ms']:.3f} ({r['pool_ms']:.3f}) | {r['mock_ms']:.3f} | {r['client_ms']:.3f} "
            f"| {r['other_cpus']:.2f} | {r.get('verified_share', '–')} |")
    lines.append("")
    for name in dict.fromkeys(r["config"] for r in rows):
        rs = ratios(rows, name)
        if rs:
            lines.append(f"- {name}: 2 workers / 1 worker per round: "
                         f"{', '.join(f'{x:.2f}x' for x in rs)} (median "
                         f"{statistics.median(rs):.2f}x)")
    return "\n".join(lines)


def estimate(rows: list[dict[str, Any]]) -> str:
    """What 2, 4 and 8 cores would give, from the measured CPU per request.

    A model, not a measurement: a relay process is one event loop, so it serves at most
    1 / relay CPU per request on its core; N relays on N cores with the mock and the
    load generator on the same cores serve at most N / (relay + pool + mock + load
    generator) — pool: the verification CPU spent during the load, at the pool's lower
    priority —; with the mock and load generator elsewhere, N / (relay + pool). One
    relay on a 2-core box therefore gets min(1 / relay, 2 / (relay + pool + mock + load
    generator)).
    """
    out = ["ESTIMATE from the measured CPU per request (medians of the 1-worker cells; "
           "a model, not a measurement):"]
    for name in dict.fromkeys(r["config"] for r in rows):
        one = [r for r in rows if r["config"] == name and r["workers"] == 1]
        if not one:
            continue
        med = {k: statistics.median(r[k] for r in one)
               for k in ("relay_ms", "pool_window_ms", "mock_ms", "client_ms")}
        relay, pool = med["relay_ms"], med["pool_window_ms"]
        load = med["mock_ms"] + med["client_ms"]
        jobs = [r["pool_ms_per_verified"] for r in rows
                if r["config"] == name and "pool_ms_per_verified" in r]
        per_job = statistics.median(jobs) if jobs else 0.0
        here = relay + load + pool  # CPU per request on the box's cores, pool included
        single = min(1000 / relay, 2000 / here)
        line = (f"- {name}: relay {relay:.3f} ms/req, mock + load generator {load:.3f}"
                + (f", pool {pool:.3f} in the window" if pool else "")
                + (f", {per_job:.2f} ms of pool CPU per verified job" if per_job else "")
                + f". 1 relay on 2 cores: ≈ {single:,.0f} req/s. ")
        for cores in (2, 4, 8):
            same = 1000 * cores / here
            apart = 1000 * cores / (relay + pool)
            line += (f"{cores} relays on {cores} cores: ≈ {same:,.0f} req/s "
                     f"({same / single:.2f}x) with the mock and load generator on the same "
                     f"cores, ≈ {apart:,.0f} ({apart / single:.2f}x) with them elsewhere")
            if per_job:
                line += (f" — verifying every request instead: ≈ "
                         f"{1000 * cores / (relay + per_job):,.0f}")
            line += "; "
        out.append(line.rstrip("; ") + ".")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", default="passthrough,shadow",
                   help=f"comma list of {', '.join(CONFIGS)}")
    p.add_argument("--rounds", type=int, default=2,
                   help="pairs of cells per config (1 then 2 workers, then 2 then 1, …)")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--duration", type=float, default=5.0, help="measured seconds per cell")
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--requests", type=int, default=200_000, help="cap per cell")
    p.add_argument("--cases", type=int, default=40, help="RAG articles rotated")
    p.add_argument("--client", choices=("raw", "aiohttp"), default="raw")
    p.add_argument("--mock", choices=("raw", "lean", "scripted"), default="raw")
    p.add_argument("--quiet-wait", type=float, default=0.0, metavar="S",
                   help="on a shared box, wait up to S seconds before each cell for the box "
                        "to go quiet (see --quiet-threshold)")
    p.add_argument("--quiet-threshold", type=float, default=0.15, metavar="CPUS")
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args(argv)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    if not configs or set(configs) - set(CONFIGS):
        p.error(f"--configs takes {', '.join(CONFIGS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log = args.out / f"workers-{stamp}.log"
    print(f"client {args.client}, mock {args.mock}, c = {args.concurrency}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; logs: {log}",
          file=sys.stderr)
    rows: list[dict[str, Any]] = []
    # SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so the mock and gateways are stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    loop = new_event_loop()
    try:
        with tempfile.TemporaryDirectory(prefix="verity-bench-") as tmp:
            for name in configs:
                rows += run_config(name, args, Path(tmp), log, loop)
    finally:
        loop.close()
    table = markdown(rows)
    est = estimate(rows)
    print(table + "\n\n" + est)
    path = args.out / f"workers-{stamp}.json"
    path.write_bytes(orjson.dumps({"when": stamp, "machine": rp.machine(),
                                   "settings": {k: str(v) for k, v in vars(args).items()},
                                   "rows": rows, "table": table, "estimate": est},
                                  option=orjson.OPT_INDENT_2))
    print(f"\nwrote {path}", file=sys.stderr)
    return 0 if all(r["completed"] and not r["errors"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
