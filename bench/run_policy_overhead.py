"""Shadow and inline overhead: the gateway with policies vs pure pass-through.

    .venv/bin/python bench/run_policy_overhead.py          # ~4 minutes

Reuses ``bench/run_passthrough.py`` (processes, pinning, CPU accounting, the load
generator). For each upstream latency it starts the mock once, then one gateway
per configuration, each measured on the same cells:

- ``passthrough`` — an empty policies directory (the baseline);
- ``shadow`` — ``mode: shadow`` with the ``keyword`` and ``length`` layers (the
  client gets the upstream bytes; verification and the JSONL audit run after);
- ``inline`` — the same layers ``mode: inline`` (``streaming: buffer``);
- ``inline-pt`` — inline with ``streaming: passthrough`` (stream cells only).

``keyword`` and ``length`` cost a few microseconds each, so inline's added latency
over pass-through *is* the runtime's own overhead above the slowest layer (the
target: ≤ 2 ms). Shadow's target: requests/s within 5 % of pass-through at
concurrency 16. After each gateway run ``/readyz`` gives the shadow queue's
completed / dropped counts (a drop is an audit that did not happen, never a
slower client).
"""

from __future__ import annotations

import argparse
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

LAYERS = """
layers:
  - name: keyword
    config: {block: ["/\\\\bAKIA[0-9A-Z]{16}\\\\b/", "password", "ssn"]}
  - name: length
    config: {max_chars: 20000}
risk: {level: medium}
decision: {min_confidence: 0.5}
actions: {fail: {type: block}}
"""
CONFIGS: dict[str, str | None] = {
    "passthrough": None,
    "shadow": "mode: shadow\ndefault: true\n" + LAYERS,
    "inline": "mode: inline\ndefault: true\nstreaming: buffer\n" + LAYERS,
    "inline-pt": "mode: inline\ndefault: true\nstreaming: passthrough\n" + LAYERS,
}


def _policies(workdir: Path, name: str) -> str:
    directory = workdir / f"policies-{name}"
    directory.mkdir(exist_ok=True)
    text = CONFIGS[name]
    if text is not None:
        (directory / f"{name}.yaml").write_text(text, encoding="utf-8")
    return str(directory)


def _readyz(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:  # noqa: S310
        data: dict[str, Any] = orjson.loads(resp.read())
        return data


def run(args: argparse.Namespace, pin: bool, workdir: Path, log: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    base_env = {k: v for k, v in rp.os.environ.items() if not k.startswith(("OTEL_", "GATEWAY_"))}
    base_env["PYTHONPATH"] = str(rp.REPO)
    loop = rp.new_event_loop()
    try:
        for latency in args.latencies:
            mport = rp.free_port()
            mock_argv = [*rp._pin(args.mock_cpus if pin else None), sys.executable,
                         str(HERE / "mock_upstream.py"), "--port", str(mport),
                         "--latency-ms", str(latency), "--chunks", str(args.chunks)]
            with rp.process("mock", mock_argv, env=base_env, cwd=str(workdir), log=log,
                            ready_url=f"http://127.0.0.1:{mport}/v1/models") as mock:
                for _round in range(args.rounds):
                    for name in args.configs:
                        gport = rp.free_port()
                        env = {**base_env, "GATEWAY_LOG_LEVEL": "warning",
                               # forward mode: _readyz() reads the shadow queue's detail
                               "GATEWAY_READYZ_DETAIL": "public",
                               "GATEWAY_AUDIT__PATH": str(workdir / f"audit-{name}.jsonl")}
                        gw_argv = [*rp._pin(args.gateway_cpus if pin else None), sys.executable,
                                   "-m", "gateway", "serve", "--host", "127.0.0.1",
                                   "--port", str(gport), "--upstream",
                                   f"http://127.0.0.1:{mport}/v1",
                                   "--policies", _policies(workdir, name)]
                        with rp.process("gateway", gw_argv, env=env, cwd=str(workdir), log=log,
                                        ready_url=f"http://127.0.0.1:{gport}/readyz") as gw:
                            for stream in args.modes:
                                if name == "inline-pt" and not stream:
                                    continue
                                for c in args.concurrency:
                                    res, cpu = rp.run_cell(
                                        loop, f"http://127.0.0.1:{gport}{rp.CHAT}",
                                        stream=stream, concurrency=c, latency_ms=latency,
                                        args=args, gateway_pid=gw.pid, mock_pid=mock.pid)
                                    s = res.summary()
                                    n = res.completed or 1
                                    row = {"latency_ms": latency, "config": name,
                                           "mode": "stream" if stream else "json",
                                           "concurrency": c, "rps": s["rps"],
                                           "p50_ms": s["p50_ms"], "p99_ms": s["p99_ms"],
                                           "ttfc_p50_ms": s["ttfc_p50_ms"],
                                           "errors": s["errors"],
                                           "cpu_ms_per_req": round(1000 * cpu["gateway"] / n, 3),
                                           "foreign_cpu_s": round(cpu.get("foreign", 0.0), 2)}
                                    rows.append(row)
                                    print(f"  {latency:>4g} ms {row['mode']:<6} c={c:<3} "
                                          f"{name:<11} {row['rps']:>8.1f} rps  "
                                          f"p50 {row['p50_ms']} ms  p99 {row['p99_ms']} ms  "
                                          f"cpu {row['cpu_ms_per_req']} ms/req  "
                                          f"foreign {row['foreign_cpu_s']} s  "
                                          f"errors {row['errors']}", file=sys.stderr, flush=True)
                            time.sleep(0.5)  # let the shadow queue finish before reading it
                            shadow = _readyz(gport).get("shadow")
                            if shadow:
                                rows.append({"latency_ms": latency, "config": name,
                                             "shadow": shadow})
                                print(f"  shadow queue: {shadow}", file=sys.stderr)
    finally:
        loop.close()
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    cells: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        if "rps" in r:
            cells.setdefault((r["latency_ms"], r["mode"], r["concurrency"], r["config"]),
                             []).append(r)

    def med(key: tuple[Any, ...], field: str) -> float | None:
        """Best of the rounds (max rps, min latency/CPU): other load on the box only
        ever makes a round worse, so the best round is the least disturbed one."""
        vals = [r[field] for r in cells.get(key, []) if r.get(field) is not None]
        if not vals:
            return None
        return max(vals) if field == "rps" else min(vals)

    lines = ["| upstream | mode | c | config | rps (vs pass-through) | p50 ms (added) "
             "| p99 ms | gateway CPU ms/req |", "|---|---|---:|---|---|---|---:|---:|"]
    for key in sorted(cells, key=lambda k: (k[0], k[1], k[2], list(CONFIGS).index(k[3]))):
        lat, mode, c, name = key
        base = (lat, mode, c, "passthrough")
        rps, brps = med(key, "rps"), med(base, "rps")
        p50, bp50 = med(key, "p50_ms"), med(base, "p50_ms")
        rel = "" if name == "passthrough" or not brps or rps is None else \
            f" ({100 * (rps - brps) / brps:+.1f}%)"
        added = "" if name == "passthrough" or p50 is None or bp50 is None else \
            f" ({p50 - bp50:+.2f})"
        lines.append(f"| {lat:g} ms | {mode} | {c} | {name} | {rps:.0f}{rel} | {p50:.2f}{added} "
                     f"| {med(key, 'p99_ms'):.2f} | {med(key, 'cpu_ms_per_req'):.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    csv_f = lambda s: [float(x) for x in s.split(",") if x]  # noqa: E731
    csv_i = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    p.add_argument("--latencies", type=csv_f, default=[0.0, 50.0])
    p.add_argument("--concurrency", type=csv_i, default=[1, 16])
    p.add_argument("--modes", default="json,stream")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--rounds", type=int, default=1,
                   help="repeat every configuration; the table shows the best round")
    p.add_argument("--table", type=Path, metavar="JSON",
                   help="only re-print the table of an earlier results file")
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--requests", type=int, default=50_000)
    p.add_argument("--no-ramp", action="store_true")
    p.add_argument("--chunks", type=int, default=20)
    p.add_argument("--quiet-wait", type=float, default=0.0, metavar="S",
                   help="wait up to S seconds before each cell for the box to go quiet "
                        "(run_passthrough's --quiet-wait)")
    p.add_argument("--quiet-threshold", type=float, default=0.15, metavar="CPUS")
    p.add_argument("--no-pin", action="store_true")
    p.add_argument("--gateway-cpus", default="0")
    p.add_argument("--mock-cpus", default="1")
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args(argv)
    args.modes = [m.strip() == "stream" for m in args.modes.split(",") if m.strip()]
    args.configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    if args.table is not None:
        print(markdown(orjson.loads(args.table.read_bytes())["rows"]))
        return 0
    pin = not args.no_pin and rp.shutil.which("taskset") is not None \
        and (rp.os.cpu_count() or 1) >= 2
    if pin:
        rp.os.sched_setaffinity(0, {int(c) for c in args.mock_cpus.split(",")})
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log = args.out / f"policy-overhead-{stamp}.log"
    with tempfile.TemporaryDirectory(prefix="verity-bench-") as tmp:
        rows = run(args, pin, Path(tmp), log)
    table = markdown(rows)
    print(table)
    path = args.out / f"policy-overhead-{stamp}.json"
    path.write_bytes(orjson.dumps({"when": stamp, "machine": rp.machine(), "rows": rows,
                                   "table": table}, option=orjson.OPT_INDENT_2))
    print(f"\nwrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
