"""Instructions per ``polarity.clause_polarity`` call of two checkouts, counted by
valgrind (a loaded box cannot move them much; repeated runs agree within ≈ 3 %).

    .venv/bin/python bench/clause_polarity_instructions.py OLD_CHECKOUT . [--passes 3]

The sentences: HaluEval dev's summaries (the RAG traffic's answers), split as the
grounding layer splits them, those :func:`polarity.polar` lets through to the clause
analysis (185), each with its contrast spans. Each checkout runs twice under
``valgrind --tool=cachegrind`` (``PYTHONHASHSEED=0``): one warm-up pass, and ``--passes``
more; the difference divided by the calls it adds is the count per call. Needs
``valgrind``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _valgrind import cachegrind, per_unit

CHILD = r'''
import json, sys
root, passes = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, root)
from gateway.text.polarity import clause_polarity, contrast_spans, polar
from gateway.text.tokens import split_sentences
texts = []
for line in open(root + "/data/halueval/halueval-dev.jsonl", encoding="utf-8"):
    case = json.loads(line)
    if case["source"] == "halueval-summarization":
        texts += [s.text for s in split_sentences(case["model_output"])]
work = [(t, contrast_spans(t)) for t in texts if polar(t)]
print(len(work))
for _ in range(1 + passes):
    for t, skip in work:
        clause_polarity(t, skip)
'''


def instructions(root: str, passes: int) -> tuple[int, int]:
    """Instructions valgrind counts for one child run, and the sentences a pass holds."""
    count, printed = cachegrind(CHILD, root, str(passes))
    return count, int(printed.split()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args()
    old, new = per_unit(args.old, args.new, args.passes, instructions)
    print(f"clause_polarity: instructions per call (polar summary sentences): old "
          f"{old:,.0f}, new {new:,.0f}; new/old {new / old:.3f}")


if __name__ == "__main__":
    main()
