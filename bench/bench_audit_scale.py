"""The issue-15 targets on an existing audit store: report, dashboard, replay.

    .venv/bin/python bench/gen_audit.py --records 1000000 --out /tmp/audit-1m/store \
        --writers 2 --weeks 2                                  # ~10 min on 2 cores
    cp -r /tmp/audit-1m/store /tmp/audit-1m/jsonl              # optional: a JSONL copy
    GATEWAY_AUDIT__ROTATE_SECONDS=1 .venv/bin/python -m gateway audit compact \
        --audit /tmp/audit-1m/store                            # Parquet + rollups
    .venv/bin/python bench/bench_audit_scale.py --store /tmp/audit-1m/store \
        [--jsonl /tmp/audit-1m/jsonl] [--repeat 3] [--jobs 2]

Every measurement is the product's own command or page, end to end:

- ``report`` — ``gateway audit report --audit STORE`` in a fresh process (Python
  start, imports, opening the store, queries, the table), with and without filters
  (``--since`` inside an hour, ``--policy``); ``--jsonl`` adds one run over the
  uncompacted copy. Then, in process, the report's queries over the open store from
  rollups and from a scan of every record (what the rollups save).
- ``dashboard`` — ``gateway audit serve`` started (it opens the store before it
  listens), then ``GET /`` (the overview) timed to the first byte and to the last,
  the first request and ``--repeat`` more; also ``GET /?since=24h``. And the same
  page as the gateway mounts it (one DuckDB thread, 256 MB; the store opens at the
  first request) in process.
- ``replay`` — ``gateway audit replay --limit 10000`` with ``--jobs 1`` and ``--jobs N``
  under a keyword-only policy (written to a temporary folder) and the shipped
  ``policies/default.yaml`` (the outputs must be identical).

Prints one line per measurement and a Markdown table; the load average before and
after. The store is only read.
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEYWORD_POLICY = """
mode: shadow
layers:
  - name: keyword
    config: {block: [forbidden, guaranteed, "100%"]}
actions: {fail: {type: block}}
"""
ROWS: list[tuple[str, str, str]] = []


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def row(what: str, value: str, notes: str = "") -> None:
    ROWS.append((what, value, notes))
    print(f"{what}: {value} {notes}".rstrip(), flush=True)


def run(args: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in MB — via /usr/bin/time —, stdout) of a command."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss_file:
        timer = ["/usr/bin/time", "-f", "%M", "-o", rss_file.name] \
            if Path("/usr/bin/time").exists() else []
        t0 = time.perf_counter()
        proc = subprocess.run([*timer, *args], capture_output=True, text=True,
                              env={**os.environ, **(env or {})}, cwd=str(ROOT))
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): "
                             f"{proc.stderr[-2000:]}")
        text = rss_file.read().strip().splitlines()
        rss = int(text[-1]) // 1024 if text and text[-1].isdigit() else 0
    return wall, rss, proc.stdout


def gateway(*args: str) -> list[str]:
    return [sys.executable, "-m", "gateway", "audit", *args]


def timed(label: str, args: list[str], repeat: int, notes: str = "") -> None:
    walls = [run(args)[0] for _ in range(repeat)]
    row(label, f"{min(walls):.2f} s (median {statistics.median(walls):.2f}, n={repeat})", notes)


def since_inside_an_hour(store: str) -> str:
    """A time 36 h 17 min before the newest record: cuts an hour (raw edge)."""
    from gateway.audit.store import AuditStore

    s = AuditStore(store)
    try:
        (last,) = s.query("SELECT max(started_at) FROM records")[0]
    finally:
        s.close()
    return (last - timedelta(hours=36, minutes=17)).replace(second=0, microsecond=0) \
        .isoformat(timespec="minutes")


def report(store: str, jsonl: str | None, repeat: int) -> None:
    timed("report, Parquet + rollups", gateway("report", "--audit", store), repeat)
    since = since_inside_an_hour(store)
    timed("report --since (inside an hour) --policy default",
          gateway("report", "--audit", store, "--since", since, "--policy", "default"), repeat)
    from gateway.audit.report import summarize
    from gateway.audit.store import AuditStore

    for rollups in (True, False):
        s = AuditStore(store, rollups=rollups)
        try:
            summarize(s)  # warm the page cache
            walls = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                summarize(s)
                walls.append(time.perf_counter() - t0)
        finally:
            s.close()
        row(f"report queries in process, {'rollups' if rollups else 'raw scan of Parquet'}",
            f"{min(walls):.2f} s (median {statistics.median(walls):.2f})")
    if jsonl:
        wall, rss, _ = run(gateway("report", "--audit", jsonl))
        row("report, all JSONL (uncompacted copy)", f"{wall:.1f} s", f"peak RSS {rss} MB")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str) -> tuple[float, float, int]:
    """(seconds to the first byte, to the last, status) of one GET."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    t0 = time.perf_counter()
    conn.request("GET", path)
    resp = conn.getresponse()
    first = time.perf_counter() - t0
    body = resp.read()
    full = time.perf_counter() - t0
    conn.close()
    if resp.status != 200 or b"<svg" not in body:
        raise SystemExit(f"GET {path}: {resp.status}")
    return first, full, resp.status


def pages(port: int, label: str, repeat: int) -> None:
    first, full, _ = get(port, "/")
    row(f"{label}: GET / (the first request)", f"{full:.2f} s", f"first byte {first:.2f} s")
    for path in ("/", "/?since=24h"):
        got = [get(port, path) for _ in range(repeat)]
        fulls = [g[1] for g in got]
        row(f"{label}: GET {path}", f"{min(fulls):.2f} s (median {statistics.median(fulls):.2f})",
            f"first byte {min(g[0] for g in got):.2f} s")


def dashboard(store: str, repeat: int) -> None:
    port = free_port()
    proc = subprocess.Popen(gateway("serve", "--audit", store, "--port", str(port)),
                            cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/static/style.css")
                conn.getresponse().read()
                conn.close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("gateway audit serve did not start") from None
                time.sleep(0.2)
        pages(port, "audit serve", repeat)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    from gateway.dashboard.app import create_dashboard
    from gateway.testing.servers import ServerThread

    app = create_dashboard(store)  # what the gateway mounts: 1 thread, 256 MB
    with ServerThread(app) as srv:
        pages(srv.port, "mounted (1 DuckDB thread)", repeat)
    app.state.store.close()


def replay(store: str, jobs: int, limit: int) -> None:
    """Each policy with ``--jobs 1`` then ``--jobs N`` (alternated: an A/B on the same
    box); the two outputs must be identical."""
    with tempfile.TemporaryDirectory() as tmp:
        keyword = Path(tmp) / "keyword-only.yaml"
        keyword.write_text(KEYWORD_POLICY)
        for name, policy in (("keyword-only", str(keyword)),
                             ("default.yaml", str(ROOT / "policies" / "default.yaml"))):
            outs = []
            for n in dict.fromkeys((1, jobs)):
                wall, rss, out = run(gateway("replay", "--audit", store, "--policy", policy,
                                             "--limit", str(limit), "--jobs", str(n), "--json"))
                outs.append(out)
                replayed = out.split('"replayed":', 1)[1].split(",", 1)[0].strip()
                row(f"replay {name}, --limit {limit} --jobs {n}", f"{wall:.1f} s",
                    f"{replayed} replayed; parent peak RSS {rss} MB")
            if len(set(outs)) != 1:
                raise SystemExit(f"replay {name}: --jobs 1 and --jobs {jobs} differ")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True, help="the compacted audit directory")
    ap.add_argument("--jsonl", help="an uncompacted copy (one report over it)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--limit", type=int, default=10_000)
    ap.add_argument("--only", choices=("report", "dashboard", "replay"), action="append")
    args = ap.parse_args(argv)
    only = set(args.only or ("report", "dashboard", "replay"))
    print(f"{datetime.now():%Y-%m-%d %H:%M}  load average {load()}  cpus {os.cpu_count()}",
          flush=True)
    if "report" in only:
        report(args.store, args.jsonl, args.repeat)
    if "dashboard" in only:
        dashboard(args.store, args.repeat)
    if "replay" in only:
        replay(args.store, args.jobs, args.limit)
    print(f"\nload average after: {load()}\n\n| what | time | notes |\n|---|---|---|")
    for what, value, notes in ROWS:
        print(f"| {what} | {value} | {notes} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
