"""Pass-through benchmark: direct to the mock vs through the gateway, in one run.

    .venv/bin/python bench/run_passthrough.py            # the full matrix, ~3 minutes

For each upstream latency (default 0 and 50 ms) it starts the mock upstream
(``bench/mock_upstream.py``) and the gateway (``python -m gateway serve
--upstream … --policies <empty dir>``) as subprocesses, then runs the load
generator in this process for every {JSON, stream} × concurrency cell, first
straight at the mock ("direct"), then through the gateway. Each cell has a
warm-up run that is not measured.

Measured per cell: requests/s, latency p50/p99, stream time to first chunk, and
the gateway's CPU time per request — ``utime + stime`` of the gateway process from
``/proc/<pid>/stat``, delta over the measured run, divided by completed requests.
"Added" columns are gateway minus direct for the same cell.

Pinning (on by default when ``taskset`` exists and there are ≥ 2 CPUs): the
gateway on CPU 0, the mock and the load generator (this process) on CPU 1, so
the gateway never competes with the load it is measured under.

Prints a Markdown table and writes JSON to ``bench/results/`` (gitignored).
``--policies DIR`` starts the gateway with that policies directory (shadow /
inline runs); ``--workers N`` starts it with N relay processes (its CPU is then the
supervisor's plus its workers'); ``--gateway-env K=V`` adds gateway environment (e.g. an OTLP
endpoint); ``--label`` names the run in the output file; ``--keyed`` runs it in
gateway-keys mode with an upstream key (the load authenticates): the configuration
with secrets to keep out of responses (``gateway/upstream/scrub.py``).
``--client raw --mock raw``: the lean load generator and mock (``bench/rawload.py``,
``bench/rawmock.py``), for runs where they share the cores with the gateway
(``bench/run_workers.py`` uses them by default).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from loadgen import LoadResult, new_event_loop, run_load  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
CHAT = "/v1/chat/completions"
BENCH_GATEWAY_KEY = "gw-bench-key-0123456789abcdef"
BENCH_UPSTREAM_KEY = "sk-bench-upstream-0123456789abcdef"
BUSY = 0.10  # share of one CPU used by other processes above which a cell is flagged


# ---- processes ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all threads), from /proc/<pid>/stat."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2:].split()  # skip "pid (comm) "
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of stat(5)


def tree_cpu_seconds(pid: int) -> float:
    """:func:`cpu_seconds` of ``pid`` plus its live children (``serve --workers``: the
    supervisor and its worker processes)."""
    total = cpu_seconds(pid)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            raw = stat.read_text()
        except OSError:
            continue
        if int(raw[raw.rindex(")") + 2:].split()[1]) == pid:  # field 4: ppid
            with contextlib.suppress(OSError, ValueError):  # it exited meanwhile
                total += cpu_seconds(int(stat.parent.name))
    return total


def system_cpu() -> tuple[float, float]:
    """(busy, steal) seconds summed over all CPUs, from /proc/stat."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = f[:8]
    return (user + nice + system + irq + softirq) / CLK_TCK, steal / CLK_TCK


def wait_for_quiet(threshold: float, timeout: float) -> float:
    """Wait (up to ``timeout`` s) until the box's CPU use over 0.5 s is below ``threshold``
    CPUs (our idle mock and gateway included); return the last load seen."""
    deadline = time.monotonic() + timeout
    while True:
        b0, _ = system_cpu()
        time.sleep(0.5)
        load = (system_cpu()[0] - b0) / 0.5
        if load < threshold or time.monotonic() >= deadline:
            return load
        time.sleep(1.5)


def _pin(cpus: str | None) -> list[str]:
    return ["taskset", "-c", cpus] if cpus is not None else []


@contextmanager
def process(name: str, argv: list[str], *, env: dict[str, str], cwd: str, log: Path,
            ready_url: str, timeout: float = 30.0) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` in its own process group; wait until ``ready_url`` answers; always
    stop the whole group on exit (SIGTERM, then SIGKILL)."""
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {log}")
            try:
                with urllib.request.urlopen(ready_url, timeout=1) as resp:  # noqa: S310
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} not ready after {timeout}s; see {log}")
            time.sleep(0.05)
        yield proc
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(5)


# ---- the matrix -------------------------------------------------------------------------------


@dataclass
class Cell:
    latency_ms: float
    stream: bool
    concurrency: int
    target: str  # "direct" | "gateway"
    result: LoadResult
    gateway_cpu_s: float | None
    mock_cpu_s: float
    foreign_cpu_s: float
    """CPU used by processes other than the gateway, the mock and the load generator."""
    steal_s: float

    def row(self) -> dict[str, Any]:
        s = self.result.summary()
        n = self.result.completed
        s.update(latency_ms=self.latency_ms, target=self.target, mode=self.mode,
                 gateway_cpu_s=self.gateway_cpu_s, mock_cpu_s=self.mock_cpu_s,
                 gateway_cpu_ms_per_req=(round(1000 * self.gateway_cpu_s / n, 3)
                                         if self.gateway_cpu_s is not None and n else None),
                 mock_cpu_ms_per_req=round(1000 * self.mock_cpu_s / n, 3) if n else None,
                 foreign_cpu_s=round(self.foreign_cpu_s, 2), steal_s=round(self.steal_s, 2))
        return s

    @property
    def mode(self) -> str:
        return "stream" if self.stream else "json"


def run_cell(loop: asyncio.AbstractEventLoop, url: str, *, stream: bool, concurrency: int,
             latency_ms: float, args: argparse.Namespace, gateway_pid: int, mock_pid: int,
             headers: dict[str, str] | None = None) -> tuple[LoadResult, dict[str, float]]:
    """One measured cell; CPU deltas cover the measured window (after the warm-up)."""
    snap: list[float] = []

    def on_measure() -> None:
        snap[:] = [tree_cpu_seconds(gateway_pid), cpu_seconds(mock_pid), *system_cpu()]

    ramp = 0.0 if args.no_ramp else min(latency_ms / 1000, args.duration)
    if args.quiet_wait > 0:
        wait_for_quiet(args.quiet_threshold, args.quiet_wait)
    result = loop.run_until_complete(run_load(
        url, concurrency=concurrency, requests=args.requests, duration=args.duration,
        warmup=args.warmup, ramp=ramp, stream=stream, on_measure=on_measure,
        headers=headers, client=args.client))
    if not snap:
        return result, {"gateway": 0.0, "mock": 0.0, "foreign": 0.0, "steal": 0.0}
    busy, steal = system_cpu()
    gw, mock = tree_cpu_seconds(gateway_pid) - snap[0], cpu_seconds(mock_pid) - snap[1]
    foreign = (busy - snap[2]) - gw - mock - result.client_cpu_s
    return result, {"gateway": gw, "mock": mock, "foreign": max(0.0, foreign),
                    "steal": steal - snap[3]}


def run_matrix(args: argparse.Namespace, pin: bool, workdir: Path, log: Path) -> list[Cell]:
    cells: list[Cell] = []
    policies = args.policies or str(workdir / "policies-empty")
    Path(policies).mkdir(exist_ok=True)
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("OTEL_", "GATEWAY_"))}
    base_env["PYTHONPATH"] = str(REPO)
    gw_env = {**base_env, "GATEWAY_LOG_LEVEL": "warning",
              "GATEWAY_AUDIT__PATH": str(workdir / "audit.jsonl")}
    for kv in args.gateway_env:
        key, _, value = kv.partition("=")
        gw_env[key] = value
    keyed: list[str] = []
    load_headers: dict[str, str] | None = None
    if args.keyed:  # gateway keys + an upstream key: the configuration that has secrets
        gw_env.update(GATEWAY_AUTH__KEYS="[{name: bench, tenant: bench, "
                                         "key_env: BENCH_GATEWAY_KEY}]",
                      BENCH_GATEWAY_KEY=BENCH_GATEWAY_KEY, BENCH_UPSTREAM_KEY=BENCH_UPSTREAM_KEY)
        keyed = ["--upstream-key-env", "BENCH_UPSTREAM_KEY"]
        load_headers = {"authorization": f"Bearer {BENCH_GATEWAY_KEY}"}
    loop = new_event_loop()
    try:
        for latency in args.latencies:
            mport, gport = free_port(), free_port()
            mock_argv = [*_pin(args.mock_cpus if pin else None), sys.executable,
                         str(HERE / "mock_upstream.py"), "--port", str(mport),
                         "--latency-ms", str(latency), "--chunks", str(args.chunks),
                         "--impl", args.mock]
            gw_argv = [*_pin(args.gateway_cpus if pin else None), sys.executable, "-m",
                       "gateway", "serve", "--host", "127.0.0.1", "--port", str(gport),
                       "--upstream", f"http://127.0.0.1:{mport}/v1", "--policies", policies,
                       "--workers", str(args.workers), *keyed]
            with process("mock", mock_argv, env=base_env, cwd=str(workdir), log=log,
                         ready_url=f"http://127.0.0.1:{mport}/v1/models") as mock, \
                    process("gateway", gw_argv, env=gw_env, cwd=str(workdir), log=log,
                            ready_url=f"http://127.0.0.1:{gport}/readyz") as gw:
                for stream in args.modes:
                    for c in args.concurrency:
                        for target, port in (("direct", mport), ("gateway", gport)):
                            url = f"http://127.0.0.1:{port}{CHAT}"
                            res, cpu = run_cell(loop, url, stream=stream,
                                                       concurrency=c, latency_ms=latency,
                                                       args=args,
                                                       gateway_pid=gw.pid, mock_pid=mock.pid,
                                                       headers=load_headers)
                            cell = Cell(latency, stream, c, target, res,
                                        cpu["gateway"] if target == "gateway" else None,
                                        cpu["mock"], cpu["foreign"], cpu["steal"])
                            cells.append(cell)
                            r = cell.row()
                            print(f"  {latency:>4g} ms {cell.mode:<6} c={c:<3} {target:<7} "
                                  f"{r['rps']:>8.1f} rps  p50 {r['p50_ms']} ms  "
                                  f"p99 {r['p99_ms']} ms  errors {r['errors']}"
                                  + (f"  gw {r['gateway_cpu_ms_per_req']} ms CPU/req"
                                     if target == "gateway" else "")
                                  + (f"  [busy box: other processes used "
                                     f"{r['foreign_cpu_s']:.1f} s CPU]"
                                     if cell.foreign_cpu_s > 0.1 * res.elapsed_s else ""),
                                  file=sys.stderr, flush=True)
    finally:
        loop.close()
    return cells


# ---- output -------------------------------------------------------------------------------------


def _f(v: float | None, nd: int = 2) -> str:
    return "–" if v is None else f"{v:.{nd}f}"


def _d(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None else f"{a - b:+.2f}"


def markdown(cells: list[Cell]) -> str:
    rows = {(c.latency_ms, c.mode, c.concurrency, c.target): c.row() for c in cells}
    head = ("| upstream | mode | c | direct rps | gateway rps | p50 direct → gateway (added) ms "
            "| p99 direct → gateway (added) ms | TTFC p50 direct → gateway (added) ms "
            "| gateway CPU ms/req |\n|---|---|---:|---:|---:|---|---|---|---:|")
    lines = [head]
    for (lat, mode, c, target), g in rows.items():
        if target != "gateway":
            continue
        d = rows.get((lat, mode, c, "direct"), {})
        ttfc = "–" if mode == "json" else (
            f"{_f(d.get('ttfc_p50_ms'))} → {_f(g['ttfc_p50_ms'])} "
            f"({_d(g['ttfc_p50_ms'], d.get('ttfc_p50_ms'))})")
        busy = max(g["foreign_cpu_s"] / max(g["elapsed_s"], 1e-9),
                   d.get("foreign_cpu_s", 0) / max(d.get("elapsed_s", 0), 1e-9)) > BUSY
        lines.append(
            f"| {lat:g} ms | {mode} | {c}{' †' if busy else ''} | {_f(d.get('rps'), 0)} | {_f(g['rps'], 0)} "
            f"| {_f(d.get('p50_ms'))} → {_f(g['p50_ms'])} ({_d(g['p50_ms'], d.get('p50_ms'))}) "
            f"| {_f(d.get('p99_ms'))} → {_f(g['p99_ms'])} ({_d(g['p99_ms'], d.get('p99_ms'))}) "
            f"| {ttfc} | {_f(g['gateway_cpu_ms_per_req'], 3)} |")
    worst = max(cells, key=lambda c: c.foreign_cpu_s / max(c.result.elapsed_s, 1e-9))
    share = worst.foreign_cpu_s / max(worst.result.elapsed_s, 1e-9)
    if any(c.foreign_cpu_s > BUSY * c.result.elapsed_s for c in cells):
        lines.append(f"\n† other processes used more than {BUSY:.0%} of one CPU during the "
                     "direct or the gateway run of this cell: read it with care.")
    lines.append(f"\nOther processes on the box used up to {100 * share:.0f}% of one CPU during "
                 f"a measured cell (steal up to "
                 f"{max(c.steal_s / max(c.result.elapsed_s, 1e-9) for c in cells) * 100:.0f}%).")
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for mod in ("aiohttp", "uvicorn", "uvloop", "httptools", "orjson"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - informational only
            versions[mod] = None
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {"cpu": model, "cpus": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(), "versions": versions, "commit": commit}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    csv_f = lambda s: [float(x) for x in s.split(",") if x]  # noqa: E731
    csv_i = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    p.add_argument("--latencies", type=csv_f, default=[0.0, 50.0], help="mock latencies, ms")
    p.add_argument("--concurrency", type=csv_i, default=[1, 16, 64])
    p.add_argument("--modes", default="json,stream",
                   help="comma list of json, stream")
    p.add_argument("--duration", type=float, default=5.0, help="seconds per measured cell")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up per cell")
    p.add_argument("--requests", type=int, default=50_000,
                   help="cap on requests started per cell (warm-up included)")
    p.add_argument("--no-ramp", action="store_true",
                   help="start all workers at once (default: spread their first requests "
                        "over one upstream latency, so a fixed-latency mock does not see "
                        "synchronised bursts of `c` requests)")
    p.add_argument("--chunks", type=int, default=20, help="content chunks per stream")
    p.add_argument("--mock", choices=("lean", "raw", "scripted"), default="lean",
                   help="mock implementation (bench/mock_upstream.py --impl): raw is the "
                        "cheapest (bench/rawmock.py)")
    p.add_argument("--client", choices=("aiohttp", "raw"), default="aiohttp",
                   help="load generator: aiohttp, or the lean raw-asyncio one "
                        "(bench/rawload.py)")
    p.add_argument("--policies", metavar="DIR",
                   help="gateway policies directory (default: an empty one = pass-through)")
    p.add_argument("--gateway-env", metavar="K=V", action="append", default=[],
                   help="extra gateway environment (repeatable)")
    p.add_argument("--keyed", action="store_true",
                   help="gateway-keys mode with an upstream key (the load sends the gateway "
                        "key): the configuration whose secrets are kept out of responses")
    p.add_argument("--quiet-wait", type=float, default=0.0, metavar="S",
                   help="on a shared box, wait up to S seconds before each cell for other "
                        "processes to go quiet (see --quiet-threshold)")
    p.add_argument("--quiet-threshold", type=float, default=0.15, metavar="CPUS",
                   help="box CPU use (in CPUs) under which it counts as quiet")
    p.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    p.add_argument("--gateway-cpus", default="0")
    p.add_argument("--mock-cpus", default="1", help="CPUs for the mock and the load generator")
    p.add_argument("--workers", type=int, default=1,
                   help="gateway relay processes (serve --workers); with more than one, "
                        "pass --no-pin or a --gateway-cpus list with as many CPUs")
    p.add_argument("--label", default="passthrough")
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or set(modes) - {"json", "stream"}:
        p.error("--modes takes json and/or stream")
    args.modes = [m == "stream" for m in modes]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pin = not args.no_pin and shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2
    if pin:
        os.sched_setaffinity(0, {int(c) for c in args.mock_cpus.split(",")})
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log = args.out / f"{args.label}-{stamp}.log"
    print(f"pinning: {'gateway on CPU ' + args.gateway_cpus + ', mock + loadgen on CPU ' + args.mock_cpus if pin else 'off'}; "
          f"logs: {log}", file=sys.stderr)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="verity-bench-") as tmp:
        cells = run_matrix(args, pin, Path(tmp), log)
    table = markdown(cells)
    print(table)
    report = {"label": args.label, "when": stamp, "machine": machine(),
              "pinning": {"gateway": args.gateway_cpus, "mock_and_loadgen": args.mock_cpus}
              if pin else None,
              "settings": {"duration_s": args.duration, "warmup_s": args.warmup,
                           "requests_cap": args.requests, "chunks": args.chunks,
                           "mock": args.mock, "client": args.client,
                           "policies": args.policies,
                           "ramp": not args.no_ramp, "quiet_wait_s": args.quiet_wait,
                           "workers": args.workers, "keyed": args.keyed},
              "wall_s": round(time.monotonic() - t0, 1),
              "cells": [c.row() for c in cells], "table": table}
    path = args.out / f"{args.label}-{stamp}.json"
    path.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    print(f"\nwrote {path} ({report['wall_s']} s)", file=sys.stderr)
    return 0 if all(c.result.completed for c in cells) else 1


if __name__ == "__main__":
    raise SystemExit(main())
