"""Does one huge-context request hold up other clients? Health probes around a 10 MB one.

    .venv/bin/python bench/probe_big_context.py                   # ~1 minute

For each configuration a fresh gateway (``gateway serve``, the shipped
``policies/``: the ``default`` shadow policy) in front of a 0 ms mock; a prober
sends ``GET /healthz`` back to back (one at a time) while one client sends a chat
completion whose system message is a ``--mb`` MB ``<context>``. Reported: the
probes' latency p50 / max over the window from sending the big request until its
verification's record is written (or ``--window`` seconds), and how many probes
took over 50 ms. Configurations:

- ``loop`` — ``pool.workers: 0``: verification on the relay's event loop;
- ``pool`` — worker processes (the default);
- ``loop-nolimit`` / ``pool-nolimit`` — the same with ``context.max_chars: null``
  (the whole context verified: seconds of layer work, stopped at the policy's
  ``budget.total_ms`` only where it runs in a worker).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_passthrough as rp  # noqa: E402

POLICIES = HERE.parent / "policies"
CONFIGS = ("loop", "pool", "loop-nolimit", "pool-nolimit")
SENTENCE = ("The committee met on 4 March 2021 and approved a budget of 3.2 million euros "
            "for the new library, which will open in the autumn of 2023. ")


def policies_for(name: str, workdir: Path) -> Path:
    if not name.endswith("-nolimit"):
        return POLICIES
    out = workdir / "policies-nolimit"
    if not out.exists():
        shutil.copytree(POLICIES, out)
        for f in out.glob("*.yaml"):
            text = f.read_text(encoding="utf-8")
            text = (text.replace("context:\n", "context:\n  max_chars: null\n", 1)
                    if "\ncontext:\n" in text else text + "\ncontext: {max_chars: null}\n")
            f.write_text(text, encoding="utf-8")
    return out


async def probe(url: str, big: bytes, audit: Path, window: float) -> dict[str, Any]:
    lat: list[float] = []
    done = asyncio.Event()
    async with aiohttp.ClientSession() as session:
        async def prober() -> None:
            while not done.is_set():
                t0 = time.perf_counter()
                async with session.get(url + "/healthz") as resp:
                    await resp.read()
                lat.append((time.perf_counter() - t0) * 1000)

        async def big_one() -> float:
            t0 = time.perf_counter()
            async with session.post(url + rp.CHAT, data=big, headers={
                    "content-type": "application/json", "authorization": "Bearer bench"}) as r:
                await r.read()
            answered = time.perf_counter() - t0
            deadline = time.monotonic() + window
            while time.monotonic() < deadline and not (audit.exists()
                                                        and audit.read_text().strip()):
                await asyncio.sleep(0.05)
            done.set()
            return answered * 1000

        task = asyncio.create_task(prober())
        await asyncio.sleep(0.5)  # baseline probes first
        base = len(lat)
        answered_ms = await big_one()
        await task
    during = sorted(lat[base:])
    record = orjson.loads(audit.read_text().splitlines()[-1]) if audit.exists() and \
        audit.read_text().strip() else {}
    return {"probes": len(during), "p50_ms": round(during[len(during) // 2], 2) if during else None,
            "max_ms": round(during[-1], 2) if during else None,
            "over_50ms": sum(1 for v in during if v > 50), "big_answered_ms": round(answered_ms, 1),
            "note": record.get("note"), "result": (record.get("shadow") or {}).get("result")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, default=10.0)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--window", type=float, default=40.0,
                   help="longest wait for the big request's record, seconds")
    p.add_argument("--loop-monitor", action="store_true",
                   help="also report the relay's longest event-loop holds (bench/loop_monitor.py)")
    args = p.parse_args(argv)
    text = SENTENCE * int(args.mb * 1024 * 1024 / len(SENTENCE))
    big = orjson.dumps({"model": "bench", "messages": [
        {"role": "system", "content": "<context>\n" + text + "\n</context>"},
        {"role": "user", "content": "When does the library open?"}]})
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GATEWAY_"))}
    base_env["PYTHONPATH"] = str(rp.REPO)
    rows = []
    with tempfile.TemporaryDirectory(prefix="verity-bench-") as tmp:
        workdir = Path(tmp)
        log = workdir / "log.txt"
        mport = rp.free_port()
        with rp.process("mock", [sys.executable, str(HERE / "mock_upstream.py"), "--port",
                                 str(mport)], env=base_env, cwd=tmp, log=log,
                        ready_url=f"http://127.0.0.1:{mport}/v1/models"):
            for name in [c for c in args.configs.split(",") if c]:
                gport = rp.free_port()
                audit = workdir / f"audit-{name}.jsonl"
                env = {**base_env, "GATEWAY_LOG_LEVEL": "warning",
                       "GATEWAY_AUDIT__PATH": str(audit), "GATEWAY_READYZ_DETAIL": "public"}
                if name.startswith("loop"):
                    env["GATEWAY_POOL__WORKERS"] = "0"
                stalls = workdir / f"stalls-{name}.json"
                launch = ([str(HERE / "loop_monitor.py"), str(stalls)] if args.loop_monitor
                          else ["-m", "gateway"])
                argv_gw = [sys.executable, *launch, "serve", "--host", "127.0.0.1",
                           "--port", str(gport), "--upstream", f"http://127.0.0.1:{mport}/v1",
                           "--policies", str(policies_for(name, workdir))]
                with rp.process("gateway", argv_gw, env=env, cwd=tmp, log=log,
                                ready_url=f"http://127.0.0.1:{gport}/readyz"):
                    time.sleep(3.0)  # the workers start in the background
                    if stalls.exists():
                        stalls.unlink()  # the start-up's: not the big request's
                    row = {"config": name, **asyncio.run(probe(
                        f"http://127.0.0.1:{gport}", big, audit, args.window))}
                    if args.loop_monitor:
                        gaps = orjson.loads(stalls.read_bytes()) if stalls.exists() else []
                        row["loop_cpu_ms"] = [g["cpu_ms"] for g in gaps[:3]]
                        row["loop_wall_ms"] = [g["wall_ms"] for g in gaps[:3]]
                rows.append(row)
                print(f"  {row}", file=sys.stderr, flush=True)
    extra = args.loop_monitor
    print("| config | probes | probe p50 ms | probe max ms | probes > 50 ms "
          "| big request answered ms | its record |"
          + (" relay's 3 longest loop holds: CPU ms (wall ms) |" if extra else ""))
    print("|---|---:|---:|---:|---:|---:|---|" + ("---|" if extra else ""))
    for r in rows:
        holds = ", ".join(f"{c} ({w})" for c, w in zip(r.get("loop_cpu_ms", []),
                                                       r.get("loop_wall_ms", []), strict=False))
        print(f"| {r['config']} | {r['probes']} | {r['p50_ms']} | {r['max_ms']} "
              f"| {r['over_50ms']} | {r['big_answered_ms']} | {r['result']}: {r['note']} |"
              + (f" {holds} |" if extra else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
