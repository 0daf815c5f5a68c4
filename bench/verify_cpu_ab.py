"""CPU per verification of two checkouts, alternated pass by pass (a loaded box slows both).

    .venv/bin/python bench/verify_cpu_ab.py OLD_CHECKOUT . [--passes 24]
        [--policy inline|shadow] [--cold] [--record]

The traffic of ``bench/profile_rag_verify.py`` (40 HaluEval news cases: a ~700-word
article as ``<context>``, its ~55-word summary as the answer), verified in one process
per checkout (its own ``gateway`` first on ``sys.path``; the other checkout needs
``data/halueval/halueval-dev.jsonl`` and this script's ``bench/profile_rag_verify.py``
beside it): ``inline`` is the ``grounding`` policy alone, ``shadow`` the ``default``
policy with its candidate. A pass verifies every case once (CPU time); the checkouts
take turns, alternating which goes first, and the ratio new/old is taken per pair of
passes, so load that changes over the run slows both alike. ``--cold``: no context
index cache hits (each verification indexes its context). ``--record`` (shadow): the
job's record is closed and built too, as a pool worker does for the audit
(``Outcome.finish``, ``Outcome.to_dict``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

from _verify_child import RUNTIME_SETUP

CHILD = r'''
import asyncio, sys, time
root, which, cold = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
record = len(sys.argv) > 4 and sys.argv[4] == "1"
''' + RUNTIME_SETUP + r'''        async def one(job):
            if which == "inline":
                await verifier.verify(job.with_policy(gref), policy=grounding, trace=trace)
            else:
                outcome = await verifier.run(job, trace, P.Outcome.for_job(job))
                if record:
                    outcome.finish()
                    outcome.to_dict()
        for job in work:
            await one(job)
        for _ in sys.stdin:
            spent = 0.0
            for job in work:
                t = time.process_time()
                await one(job)
                spent += time.process_time() - t
            print(spent * 1000 / len(work), flush=True)
asyncio.run(main())
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--passes", type=int, default=24)
    ap.add_argument("--policy", choices=("inline", "shadow"), default="inline")
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--record", action="store_true",
                    help="shadow: also close and build the job's audit record")
    args = ap.parse_args()
    roots = [str(args.old.resolve()), str(args.new.resolve())]
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, r, args.policy,
                               "1" if args.cold else "0", "1" if args.record else "0"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for r in roots]
    got: list[list[float]] = [[], []]
    try:
        for i in range(args.passes):
            for k in ((0, 1) if i % 2 == 0 else (1, 0)):
                p = procs[k]
                assert p.stdin is not None and p.stdout is not None
                p.stdin.write("go\n")
                p.stdin.flush()
                got[k].append(float(p.stdout.readline()))
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
            p.wait()
    old, new = got
    ratio = statistics.median(b / a for a, b in zip(old, new, strict=True))
    print(f"{args.policy}{' + record' if args.record else ''} "
          f"{'cold' if args.cold else 'warm'}, ms CPU per verification, "
          f"median (min) of {args.passes} passes: old {statistics.median(old):.3f} "
          f"({min(old):.3f}), new {statistics.median(new):.3f} ({min(new):.3f}); "
          f"new/old per pair {ratio:.3f}")


if __name__ == "__main__":
    main()
