"""CPU of one verification on RAG traffic, in-process (no HTTP): where the time goes.

    .venv/bin/python bench/profile_rag_verify.py                  # ~20 s
    .venv/bin/python bench/profile_rag_verify.py --profile 25     # + the top 25 functions
    .venv/bin/python bench/profile_rag_verify.py --cold           # no index cache hits

Each HaluEval news case of ``data/halueval/halueval-dev.jsonl`` (a ~700-word article
as ``<context>`` in the system message, its ~55-word summary as the answer) becomes a
:class:`~gateway.verify.job.VerificationJob` verified by
:meth:`Verifier.run <gateway.verify.verifier.Verifier.run>` with the shipped
``policies/``:

- ``default+candidate`` — the ``default`` shadow policy and its ``grounding``
  candidate (the shadow job of every request);
- the same with the job's shared work switched off (``--no-share``: each policy runs
  its layers from scratch — no layer result reused, and no ``grounding`` layer reading
  another's sentence cores (``AnswerShare``); the context is still extracted once);
- ``grounding inline`` — the ``grounding`` policy alone (``Verifier.verify``);
- with ``--prepared`` also ``grounding inline, prepared`` — the same with the
  context-side preparation an inline request starts while the upstream answers
  (``Preparations.start``, then ``Verifier.verify``): the CPU of a served inline
  request's verification, preparation included.

Every case is verified ``--rounds`` times; CPU per verification is
``time.process_time`` over all of them (the layers' cross-request caches see each
article ``--rounds`` times, as a cache does in production for repeated contexts), and,
less sensitive to a loaded box, the sum over cases of each case's fastest round.
``--cold``: the context index cache (``grounding``'s ``index_cache_chars``) never
hits, so every verification indexes its context (a document seen for the first time);
within one job the policy and its candidate still share it. ``--gc``: also the
cyclic garbage collector's collections and CPU per verification (part of the row's
CPU; this process does not ``gc.freeze()`` its start-up objects as a served gateway
does, so a full collection here walks more than there).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gateway.layers._grounding_answer import AnswerShare  # noqa: E402
from gateway.runtime import open_runtime  # noqa: E402
from gateway.settings import load_settings  # noqa: E402
from gateway.telemetry import PrepareSpan, RequestTrace  # noqa: E402
from gateway.text import index as index_module  # noqa: E402
from gateway.verify import scope as scope_module  # noqa: E402
from gateway.verify.job import PolicyRef, VerificationJob  # noqa: E402
from gateway.verify.outcome import Outcome  # noqa: E402
from gateway.verify.verifier import Verifier  # noqa: E402

DATA = REPO / "data" / "halueval" / "halueval-dev.jsonl"


def jobs(cases: int, live: PolicyRef, candidates: tuple[PolicyRef, ...]) -> list[VerificationJob]:
    rows = [orjson.loads(line) for line in DATA.read_bytes().splitlines() if line.strip()]
    news = [r for r in rows if r["source"] == "halueval-summarization"][:cases]
    return [VerificationJob(
        messages=[{"role": "system", "content": "Answer from the document.\n<context>\n"
                   + r["context_input"].strip() + "\n</context>"},
                  {"role": "user", "content": "Summarize the document."}],
        answer={"id": f"c{i}", "choices": [{"index": 0, "message": {
            "role": "assistant", "content": r["model_output"].strip()}}]},
        policy=live, audit_id=f"{i:032x}", mode="shadow", model="bench",
        candidates=candidates) for i, r in enumerate(news)]


class GcClock:
    """CPU time spent in the cyclic garbage collector (``gc.callbacks``), since ``reset``."""

    def __init__(self) -> None:
        self.seconds, self.collections, self._start = 0.0, 0, 0.0
        gc.callbacks.append(self._on)

    def reset(self) -> GcClock:
        self.seconds, self.collections = 0.0, 0
        return self

    def _on(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.seconds += time.process_time() - self._start
            self.collections += 1


async def measure(args: argparse.Namespace) -> None:
    gc_clock = GcClock() if args.gc else None
    if args.cold:  # every look-up a miss: the index is built inside each verification
        index_module.IndexCache.get = (  # type: ignore[method-assign]
            lambda self, docs: index_module.build_index(docs))
    settings = load_settings(environ={}, overrides={"policies_dir": str(REPO / "policies")})
    async with open_runtime(settings) as runtime:
        verifier = Verifier(runtime)
        policies = runtime.policies.policies
        default, grounding = policies["default"], policies["grounding"]
        ref = PolicyRef(default.name, default.version)
        cand = tuple(PolicyRef(policies[n].name, policies[n].version)
                     for n in default.spec.candidates)
        work = jobs(args.cases, ref, cand)
        gref = PolicyRef(grounding.name, grounding.version)
        trace = RequestTrace()

        async def shadow_one(job: VerificationJob) -> None:
            await verifier.run(job, trace, Outcome.for_job(job))

        async def inline_one(job: VerificationJob) -> None:
            await verifier.verify(job.with_policy(gref), policy=grounding, trace=trace)

        async def shadow_all() -> None:
            for job in work:
                await shadow_one(job)

        async def timed(label: str, one: Any) -> None:
            for job in work:  # warm: imports, compiled patterns, layer instances
                await one(job)
            best = [float("inf")] * len(work)
            clock = time.process_time
            gc_at = gc_clock.reset() if gc_clock else None
            t0 = clock()
            for _ in range(args.rounds):
                for i, job in enumerate(work):
                    t = clock()
                    await one(job)
                    best[i] = min(best[i], clock() - t)
            n = args.rounds * len(work)
            per = (clock() - t0) * 1000 / n
            low = sum(best) * 1000 / len(work)
            print(f"{label:<34} {per:.3f} ms CPU per verification (mean; "
                  f"{low:.3f} summing each case's fastest round)", flush=True)
            if gc_clock and gc_at is not None:
                print(f"{'':<34} GC: {gc_clock.collections / n:.2f} collections, "
                      f"{gc_clock.seconds * 1000 / n:.3f} ms per verification", flush=True)

        print(f"{len(work)} cases, {args.rounds} rounds; candidates {list(default.spec.candidates)}"
              f"{'; cold (no index cache hits)' if args.cold else ''}")
        await timed("default+candidate (shared)", shadow_one)
        keep = scope_module.JobScope.result
        keep_cores = AnswerShare.cores
        scope_module.JobScope.result = lambda *a, **k: None  # type: ignore[method-assign]
        AnswerShare.cores = lambda *a, **k: None  # type: ignore[method-assign]
        try:
            await timed("default+candidate (--no-share)", shadow_one)
        finally:
            scope_module.JobScope.result = keep  # type: ignore[method-assign]
            AnswerShare.cores = keep_cores  # type: ignore[method-assign]
        await timed("grounding inline", inline_one)
        if args.prepared:
            async def prepared_one(job: VerificationJob) -> None:
                job = job.with_policy(gref)
                runtime.prepared.start(job.audit_id, grounding, job.messages, PrepareSpan())
                try:
                    await verifier.verify(job, policy=grounding, trace=trace)
                finally:
                    runtime.prepared.discard(job.audit_id)

            await timed("grounding inline, prepared", prepared_one)
        if args.profile:
            prof = cProfile.Profile(time.process_time)
            prof.enable()
            await shadow_all()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=40)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="print the N functions with the most own time (default shadow job)")
    p.add_argument("--cold", action="store_true",
                   help="no context index cache hits between requests")
    p.add_argument("--gc", action="store_true",
                   help="also print the cyclic garbage collector's share of each row")
    p.add_argument("--prepared", action="store_true",
                   help="also time inline grounding with its context preparation")
    asyncio.run(measure(p.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
