"""Summarise the per-case lines of ``bench/eval_judge_layers.py --out FILE``.

Per layer and source, then per layer overall: cases, parsed share (no layer error),
skipped share, AUROC and recall at 5 % false flags of the flag score (an error or a
skip counts as the neutral 0.5, as ``fail_open`` would), p50 latency, judge calls
per parsed case, and the cases whose decomposition was salvaged or repaired. A run
stopped early still counts: every finished case is a line.

    .venv/bin/python bench/judge_runs_table.py runs.jsonl
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.eval.metrics import auroc, recall_at_fpr  # noqa: E402


def row(name: str, rows: list[dict[str, Any]]) -> str:
    scores = [r["flag_score"] for r in rows]
    labels = [r["label"] == "hallucinated" for r in rows]
    parsed = [r for r in rows if "error" not in r]
    calls = [r["judge_calls"] for r in parsed]
    both = len(set(labels)) == 2  # AUROC needs both labels
    cells = [name, str(len(rows)), f"{len(parsed) / len(rows):.1%}",
             f"{sum(bool(r.get('skipped')) for r in rows) / len(rows):.0%}",
             f"{auroc(scores, labels):.2f}" if both else "—",
             f"{recall_at_fpr(scores, labels, 0.05):.2f}" if both else "—",
             f"{statistics.median(r['ms'] for r in rows) / 1000:.1f} s",
             f"{statistics.mean(calls) if calls else 0:.2f}",
             f"{sum(bool(r.get('salvaged')) for r in rows)} / "
             f"{sum(bool(r.get('repairs')) for r in rows)}"]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    by: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for path in sys.argv[1:]:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            by[r["layer"]][r["source"]].append(r)
    print("| layer / source | cases | parsed | skipped | AUROC | recall @ 5 % | p50 "
          "| judge calls | salvaged / repaired |")
    print("|---|---|---|---|---|---|---|---|---|")
    for layer, sources in by.items():
        for source, rows in sorted(sources.items()):
            print(row(f"{layer} / {source.removeprefix('halueval-')}", rows))
        print(row(f"**{layer}**", [r for rows in sources.values() for r in rows]))
        errors = [r["error"] for rows in sources.values() for r in rows if "error" in r]
        for e in sorted(set(errors)):
            print(f"<!-- {errors.count(e)}x {e} -->")


if __name__ == "__main__":
    main()
