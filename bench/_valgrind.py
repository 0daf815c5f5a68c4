"""Instructions a child Python run executes, counted by valgrind, and the A/B of two
checkouts built on it (``verify_instructions.py``, ``clause_polarity_instructions.py``).

Each checkout's child runs twice, in parallel: with one warm-up pass and with ``passes``
more; the difference divided by the units those passes add (verifications, calls) is
the count per unit — start-up and warm-up cancel out. ``PYTHONHASHSEED=0`` so that both
runs hash alike. Needs ``valgrind`` (``apt-get install valgrind``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = ["cachegrind", "per_unit"]


def cachegrind(child: str, *args: str) -> tuple[int, str]:
    """Instructions ``python -c child *args`` executes, and what it printed."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, "-c", child, *args],
        capture_output=True, text=True, env=env, check=True)
    m = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if m is None:
        raise RuntimeError(out.stderr[-2000:])
    return int(m.group(1).replace(",", "")), out.stdout


def per_unit(old: Path, new: Path, passes: int,
             run: Callable[[str, int], tuple[int, int]]) -> tuple[float, float]:
    """Instructions per unit in ``old`` and ``new``: ``run(root, passes)`` gives one
    child's instructions and the units one pass holds."""
    per: list[float] = []
    for root in (str(old.resolve()), str(new.resolve())):
        with ThreadPoolExecutor(2) as pool:
            runs = [pool.submit(run, root, k) for k in (0, passes)]
            (base, units), (more, _) = (r.result() for r in runs)
        per.append((more - base) / (passes * units))
    return per[0], per[1]
