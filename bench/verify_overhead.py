"""CPU of one verification *outside* its layers: the layers answer from memory.

    .venv/bin/python bench/verify_overhead.py [TREE] [--rounds 20] [--profile N]

The traffic of ``bench/profile_rag_verify.py`` (40 HaluEval news cases, the shipped
``policies/``), verified by the checkout ``TREE`` (default: this one; its ``gateway``
and ``bench/profile_rag_verify.py``, so an older checkout can be measured too) after
every layer class's ``verify`` is replaced by a look-up of the result it gave for the
same answer in a first pass. What is left is the work around the layers: policy and
plan look-ups, context extraction, the job's shared work, budgets, per-layer blocks
and outcomes, calibration, the decision — and, for the shadow row, closing and
building the job's audit record (``Outcome.finish``, ``Outcome.to_dict``), as a pool
worker does. Rows: ``shadow`` (``default`` + its ``grounding`` candidate,
``Verifier.run``) and ``inline`` (``grounding`` alone, ``Verifier.verify``); each the
fastest of ``--rounds`` passes over the cases, CPU time (``time.process_time``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


async def measure(tree: Path, rounds: int, profile: int) -> None:
    # The tree's own bench/profile_rag_verify.py puts the tree first on sys.path.
    sys.path.insert(0, str(tree / "bench"))
    import profile_rag_verify as prv  # noqa: PLC0415 - the tree's, not this one's

    assert Path(prv.__file__).resolve().parents[1] == tree

    from gateway.runtime import open_runtime  # noqa: PLC0415
    from gateway.settings import load_settings  # noqa: PLC0415
    from gateway.telemetry import RequestTrace  # noqa: PLC0415
    from gateway.verify.job import PolicyRef  # noqa: PLC0415
    from gateway.verify.outcome import Outcome  # noqa: PLC0415
    from gateway.verify.verifier import Verifier  # noqa: PLC0415

    settings = load_settings(environ={}, overrides={"policies_dir": str(tree / "policies")})
    async with open_runtime(settings) as runtime:
        verifier = Verifier(runtime)
        pol = runtime.policies.policies
        default, grounding = pol["default"], pol["grounding"]
        cand = tuple(PolicyRef(pol[n].name, pol[n].version) for n in default.spec.candidates)
        work = prv.jobs(40, PolicyRef(default.name, default.version), cand)
        gref = PolicyRef(grounding.name, grounding.version)
        trace = RequestTrace()
        stored: dict[tuple[type, str], Any] = {}
        for cls in {rl.cls for p in pol.values() for rl in p.layers}:
            async def remembered(self: Any, inp: Any, _real: Any = cls.verify,
                                 _cls: type = cls) -> Any:
                key = (_cls, inp.response_text)
                if key not in stored:
                    stored[key] = await _real(self, inp)
                return stored[key]
            cls.verify = remembered  # type: ignore[method-assign]

        async def shadow() -> None:
            for job in work:
                outcome = await verifier.run(job, trace, Outcome.for_job(job))
                outcome.finish()
                outcome.to_dict()

        async def inline() -> None:
            for job in work:
                await verifier.verify(job.with_policy(gref), policy=grounding, trace=trace)

        await shadow()  # the layers' results, imports, compiled patterns
        await inline()
        print(f"{tree}: {len(work)} cases, fastest of {rounds} passes")
        for label, run in (("shadow (run + record)", shadow), ("inline (verify)", inline)):
            best = float("inf")
            for _ in range(rounds):
                t = time.process_time()
                await run()
                best = min(best, time.process_time() - t)
            print(f"{label:<24} {best * 1e6 / len(work):7.1f} us CPU per job outside the layers",
                  flush=True)
        if profile:
            prof = cProfile.Profile(time.process_time)
            prof.enable()
            for _ in range(5):
                await shadow()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(profile)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tree", nargs="?", type=Path, default=HERE.parent,
                   help="the checkout to measure (default: this one)")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="print the N functions with the most own time (shadow row)")
    args = p.parse_args(argv)
    asyncio.run(measure(args.tree.resolve(), args.rounds, args.profile))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
