"""The relay's CPU for one *shed* shadow request: the job built then refused, vs refused
before it is built (issue 12).

    .venv/bin/python bench/profile_shadow_shed.py [--requests 20000] [--rounds 3]

Under load ~80% of shadow jobs are shed (the worker processes cannot keep up), so what
a shed request costs the relay is most of what shadow costs it. In-process, no HTTP,
no worker process: the shipped ``policies/`` (``default`` + its ``grounding``
candidate), a RAG request (a ~700-word HaluEval article as ``<context>``), the pool's
:class:`~gateway.pool.ProcessRunner` in front of a full shadow queue, a JSONL audit
file. Per path, process CPU time (the audit writer thread's encoding included) per
request, best of ``--rounds``:

- ``built`` — ``runner.submit(r.job(...))``: the job is built, wrapped, refused by the
  queue, and its record rebuilt from the job (``Outcome.for_job``);
- ``shed-first`` — ``runner.shed("verify")`` then ``record_shed`` from the request's
  outcome (what ``gateway.modes.shadow`` does).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from gateway.audit.sink import JsonlAuditSink  # noqa: E402
from gateway.modes.request import PolicyRequest  # noqa: E402
from gateway.policy.select import select_policy  # noqa: E402
from gateway.pool.runner import ProcessRunner  # noqa: E402
from gateway.runtime import open_runtime  # noqa: E402
from gateway.settings import Settings  # noqa: E402
from gateway.telemetry import create_telemetry  # noqa: E402
from gateway.types import RequestInfo  # noqa: E402
from gateway.verify.job import PolicyRef  # noqa: E402
from gateway.verify.outcome import AuditIds  # noqa: E402
from gateway.verify.queue import ShadowJob, ShadowQueue  # noqa: E402
from gateway.verify.record import Recorder  # noqa: E402
from gateway.verify.runner import record_shed  # noqa: E402
from gateway.verify.verifier import Verifier  # noqa: E402
from gateway.wire.chat import CHAT_COMPLETIONS  # noqa: E402

DATA = HERE.parent / "data" / "halueval" / "halueval-dev.jsonl"


def article() -> tuple[list[dict[str, Any]], str]:
    for line in DATA.read_bytes().splitlines():
        row = orjson.loads(line)
        if row["source"] == "halueval-summarization":
            return [{"role": "system", "content": "Answer from the document.\n<context>\n"
                     + row["context_input"].strip() + "\n</context>"},
                    {"role": "user", "content": "Summarize the document."}], \
                row["model_output"].strip()
    raise SystemExit(f"no summarization row in {DATA}")


async def measure(args: argparse.Namespace, audit: Path) -> dict[str, float]:
    settings = Settings(policies_dir=str(HERE.parent / "policies"), audit={"path": str(audit)},
                        shadow={"queue_size": 1, "concurrency": 1})
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
        queue._accepting = True  # not started: nothing takes the one queued job away
        queue.submit(ShadowJob(lambda: asyncio.sleep(0)))
        runner = ProcessRunner(settings, queue, Verifier(runtime), recorder, telemetry, 1)
        info = RequestInfo(model="bench", route="/v1/chat/completions",
                           headers={"content-type": "application/json"})
        selection = select_policy(runtime.policies.policies, info)
        assert selection is not None and selection.policy.spec.mode == "shadow"
        trace = telemetry.start_shadow(None)
        ids = AuditIds()  # as the engine draws them

        def request() -> tuple[PolicyRequest, Any]:
            x = SimpleNamespace(messages=messages, fmt=CHAT_COMPLETIONS, info=info,
                                served={"name": "default", "attempts": 1}, trace=trace,
                                payload={"model": "bench", "messages": messages},
                                stream=False)
            r = PolicyRequest(x, selection, ids())  # type: ignore[arg-type]
            outcome = r.new_outcome("shadow")
            outcome.upstream_status = 200
            outcome.response_id = completion["id"]
            return r, outcome

        def built() -> None:
            r, outcome = request()
            runner.submit(r.job(completion, outcome, background=True))

        def shed_first() -> None:
            r, outcome = request()
            if runner.shed("verify"):
                record_shed(recorder, telemetry, outcome,
                            [PolicyRef(c.name, c.version) for c in r.selection.candidates],
                            r.x.trace)
            else:
                raise AssertionError("the queue is full: the job must be shed")

        best: dict[str, float] = {}
        try:
            for _ in range(args.rounds):
                for name, step in (("built", built), ("shed-first", shed_first)):
                    sink.flush(30)
                    t0 = time.process_time()
                    for _ in range(args.requests):
                        step()
                    sink.flush(60)  # the records encoded and written: their CPU counted
                    us = (time.process_time() - t0) / args.requests * 1e6
                    best[name] = min(best.get(name, us), us)
                    print(f"  {name:<10} {us:7.1f} µs CPU per shed request", file=sys.stderr)
        finally:
            sink.close()
            await runner.close()
        return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-freeze", dest="freeze", action="store_false",
                   help="leave start-up objects in the collector's full passes (the "
                        "gateway freezes them once ready)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="verity-bench-") as tmp:
        best = asyncio.run(measure(args, Path(tmp) / "audit.jsonl"))
    print("| path | relay CPU per shed shadow request (best of rounds) |")
    print("|---|---:|")
    for name, us in best.items():
        print(f"| {name} | {us:.1f} µs |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
