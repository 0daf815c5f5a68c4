"""The relay's CPU per *verified* shadow job: building it, handing it to a worker
process, taking its record back and writing it (issue 12).

    .venv/bin/python bench/profile_shadow_handoff.py [--jobs 400] [--rounds 3] [--repo DIR]

In-process, no HTTP: the shipped ``policies/`` (``default`` + its ``grounding``
candidate), a RAG request (a ~700-word HaluEval article as ``<context>``), the
gateway's default job runner (``gateway.pool``) with ``--workers`` worker processes
(default 1) behind a started shadow queue large enough that nothing is shed, a JSONL
audit file. Per round ``--jobs`` jobs are submitted as a shadow request submits them
(``r.job(...)`` then ``runner.submit``) and awaited until every record is written;
the relay process's CPU time (``time.process_time``: every thread of the relay —
the event loop, a pool's helper threads, the audit writer — and none of the worker
processes') per job, best of ``--rounds``. What a *shed* request costs the relay is
``bench/profile_shadow_shed.py``.

``--repo DIR`` imports the gateway from another checkout (e.g. ``git archive main``
unpacked in a scratch directory) for an A/B in one session.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent


def article() -> tuple[list[dict[str, Any]], str]:
    data = HERE.parent / "data" / "halueval" / "halueval-dev.jsonl"
    for line in data.read_bytes().splitlines():
        row = orjson.loads(line)
        if row["source"] == "halueval-summarization":
            return [{"role": "system", "content": "Answer from the document.\n<context>\n"
                     + row["context_input"].strip() + "\n</context>"},
                    {"role": "user", "content": "Summarize the document."}], \
                row["model_output"].strip()
    raise SystemExit(f"no summarization row in {data}")


async def measure(args: argparse.Namespace, audit: Path) -> float:
    from gateway.audit.sink import JsonlAuditSink
    from gateway.modes.request import PolicyRequest
    from gateway.policy.select import select_policy
    from gateway.pool.runner import ProcessRunner
    from gateway.runtime import open_runtime
    from gateway.settings import Settings
    from gateway.telemetry import create_telemetry
    from gateway.types import RequestInfo
    from gateway.verify.queue import ShadowQueue
    from gateway.verify.record import Recorder
    from gateway.verify.verifier import Verifier
    from gateway.wire.chat import CHAT_COMPLETIONS

    settings = Settings(policies_dir=str(HERE.parent / "policies"), audit={"path": str(audit)},
                        shadow={"queue_size": max(1000, args.jobs)},
                        pool={"workers": args.workers})
    telemetry = create_telemetry({})
    messages, answer = article()
    completion = {"id": "chatcmpl-1", "object": "chat.completion", "model": "bench",
                  "choices": [{"index": 0, "finish_reason": "stop", "message": {
                      "role": "assistant", "content": answer}}]}
    async with open_runtime(settings, telemetry=telemetry) as runtime:
        if args.freeze:  # as the gateway does once ready (gateway/app.py)
            gc.freeze()
        sink = JsonlAuditSink(audit)
        recorder = Recorder(telemetry, sink)
        queue = ShadowQueue(settings.shadow, telemetry)
        queue.start()
        runner = ProcessRunner(settings, queue, Verifier(runtime), recorder, telemetry,
                               args.workers)
        await runner.start()
        info = RequestInfo(model="bench", route="/v1/chat/completions",
                           headers={"content-type": "application/json"})
        selection = select_policy(runtime.policies.policies, info)
        assert selection is not None and selection.policy.spec.mode == "shadow"
        trace = telemetry.start_shadow(None)

        def submit() -> None:
            x = SimpleNamespace(messages=messages, fmt=CHAT_COMPLETIONS, info=info,
                                served={"name": "default", "attempts": 1}, trace=trace,
                                payload={"model": "bench", "messages": messages},
                                stream=False)
            r = PolicyRequest(x, selection)  # type: ignore[arg-type]
            outcome = r.new_outcome("shadow")
            outcome.upstream_status = 200
            outcome.response_id = completion["id"]
            if runner.shed("verify") or not runner.submit(
                    r.job(completion, outcome, background=True)):
                raise AssertionError("a job was shed: the queue must take them all")

        async def settled(n: int) -> None:
            while sum(queue.sample.totals.values()) < n:
                await asyncio.sleep(0.05)

        best = float("inf")
        try:
            for i in range(args.rounds + 1):  # round 0 warms the worker up
                n = args.jobs if i else 20
                sink.flush(30)
                done = sum(queue.sample.totals.values())
                t0, w0, os0 = time.process_time(), time.perf_counter(), os.times()
                for _ in range(n):
                    submit()
                await settled(done + n)
                sink.flush(60)  # every record encoded and written: its CPU counted
                us = (time.process_time() - t0) / n * 1e6
                wall = time.perf_counter() - w0
                os1 = os.times()
                user = (os1.user - os0.user) / n * 1e6
                system = (os1.system - os0.system) / n * 1e6
                totals = queue.sample.totals
                if i:
                    best = min(best, us)
                print(f"  round {i}: {us:7.1f} µs relay CPU per verified job "
                      f"(user {user:.0f} + system {system:.0f}; {n} jobs in {wall:.2f} s; "
                      f"{totals})", file=sys.stderr)
                if totals.get("verified", 0) < done + n - totals.get("dropped", 0):
                    print("  (some jobs were not verified: see the totals)", file=sys.stderr)
        finally:
            await queue.close()
            await runner.close()
            sink.close()
        return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--repo", type=Path, default=HERE.parent,
                   help="the checkout whose gateway package is measured")
    p.add_argument("--no-freeze", dest="freeze", action="store_false",
                   help="leave start-up objects in the collector's full passes (the "
                        "gateway freezes them once ready)")
    args = p.parse_args(argv)
    sys.path.insert(0, str(args.repo.resolve()))
    with tempfile.TemporaryDirectory(prefix="verity-bench-") as tmp:
        best = asyncio.run(measure(args, Path(tmp) / "audit.jsonl"))
    import gateway
    print(f"| gateway from | relay CPU per verified shadow job (best of {args.rounds}) |")
    print("|---|---:|")
    print(f"| {Path(gateway.__file__).parent.parent} | {best:.1f} µs |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
