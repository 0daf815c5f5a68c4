"""Instructions per verification of two checkouts, counted by valgrind: a loaded box
cannot move them (CPU time on a shared 2-core box scatters by ±20 % between passes).

    .venv/bin/python bench/verify_instructions.py OLD_CHECKOUT . [--policy inline|shadow]
        [--cold] [--passes 2]

The traffic of ``bench/verify_cpu_ab.py`` (40 HaluEval news cases, ``inline``: the
``grounding`` policy alone, ``shadow``: ``default`` with its candidate; ``--cold``: no
context index cache hits). Each checkout runs twice under ``valgrind --tool=cachegrind``
(``PYTHONHASHSEED=0``): once with one warm-up pass over the cases and once with
``--passes`` more; the difference in instructions executed, divided by the
verifications it adds, is the count per verification (start-up and warm-up cancel
out). Needs ``valgrind`` (``apt-get install valgrind``); about a minute per run, the
two runs of a checkout in parallel. Instructions are not time (a cache miss costs more
than an add), but a change that removes work shows up here whatever else the box does.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _valgrind import cachegrind, per_unit
from _verify_child import RUNTIME_SETUP

CHILD = r'''
import asyncio, sys
root, which, cold, k = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
''' + RUNTIME_SETUP + r'''        async def one(job):
            if which == "inline":
                await verifier.verify(job.with_policy(gref), policy=grounding, trace=trace)
            else:
                await verifier.run(job, trace, P.Outcome.for_job(job))
        for _ in range(1 + k):
            for job in work:
                await one(job)
asyncio.run(main())
'''
CASES = 40


def instructions(root: str, policy: str, cold: bool, passes: int) -> tuple[int, int]:
    """Instructions valgrind counts for one child run, and the verifications a pass holds."""
    count, _ = cachegrind(CHILD, root, policy, "1" if cold else "0", str(passes))
    return count, CASES


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--policy", choices=("inline", "shadow"), default="inline")
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--passes", type=int, default=2)
    args = ap.parse_args()
    old, new = per_unit(args.old, args.new, args.passes,
                        lambda root, k: instructions(root, args.policy, args.cold, k))
    print(f"{args.policy} {'cold' if args.cold else 'warm'}: million instructions per "
          f"verification: old {old / 1e6:.2f}, new {new / 1e6:.2f}; new/old {new / old:.3f}")


if __name__ == "__main__":
    main()
