"""Verdict quality of a policy, per kind and per source, in one table.

Every case goes through a served gateway exactly as ``gateway eval`` sends it
(``gateway.eval.harness.run_cases``: a scripted upstream answers with the case's
``model_output``; the policy runs inline, its actions turned into ``flag``):

- the hand-written RAG development suite (``tests/data/rag-dev.jsonl``), per kind:
  share of wrong answers caught (verdict marginal or fail) and of right answers
  flagged;
- HaluEval dev and tuning (``data/halueval/``; a held-out sample only when named with
  ``--halueval``), per source: false-flag rate and
  recall at the policy's own threshold (verdict != pass), AUROC of the verdict
  score, the length-matched AUROC (pooled over all sources, and within source
  only) and what answer length alone scores.

Definitions: docs/evaluation.md. Run from the repository root:

    .venv/bin/python bench/eval_verdicts.py                      # shipped grounding policy
    .venv/bin/python bench/eval_verdicts.py --halueval data/halueval/halueval-heldout-3.jsonl
    .venv/bin/python bench/eval_verdicts.py --policy my.yaml --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gateway.eval.cases import load_cases  # noqa: E402
from gateway.eval.harness import CaseResult, run_cases  # noqa: E402
from gateway.eval.metrics import auroc, matched_auroc  # noqa: E402
from gateway.eval.report import summarize  # noqa: E402

RAG = REPO / "tests" / "data" / "rag-dev.jsonl"
HALUEVAL = {"dev": REPO / "data" / "halueval" / "halueval-dev.jsonl",
            "tuning": REPO / "data" / "halueval" / "halueval-tuning.jsonl"}
"""The default HaluEval files: the development ones. A held-out sample is run only when
named with ``--halueval`` (it is measured once, after tuning; data/halueval/README.md)."""


def _rate(hits: int, n: int) -> float | None:
    return hits / n if n else None


def _num(x: float) -> float | None:
    return None if x != x else x  # nan (no qualifying pair) -> None


def source_row(results: Sequence[CaseResult]) -> dict[str, Any]:
    """One row of the HaluEval table (``results`` of one source, or of all)."""
    scored = [r for r in results if r.score is not None and r.verdict is not None]
    y = [r.case.hallucinated for r in scored]
    det = [1.0 - float(r.score) for r in scored]  # type: ignore[arg-type]
    chars = [float(len(r.case.answer)) for r in scored]
    both = len(set(y)) == 2
    right = [r for r in scored if not r.case.hallucinated]
    wrong = [r for r in scored if r.case.hallucinated]
    matched, pairs = matched_auroc(det, y, chars) if both else (float("nan"), 0)
    within, wpairs = (matched_auroc(det, y, chars, groups=[r.case.source for r in scored])
                      if both else (float("nan"), 0))
    return {
        "n": len(scored),
        "false_flag_rate": _rate(sum(r.verdict != "pass" for r in right), len(right)),
        "recall": _rate(sum(r.verdict != "pass" for r in wrong), len(wrong)),
        "auroc": auroc(det, y) if both else None,
        "length_matched_auroc": _num(matched), "length_matched_pairs": pairs,
        "length_matched_auroc_within_source": _num(within), "within_source_pairs": wpairs,
        "length_only_auroc": auroc(chars, y) if both else None,
    }


def halueval_rows(results: Sequence[CaseResult]) -> dict[str, dict[str, Any]]:
    rows = {"overall": source_row(results)}
    for source in sorted({r.case.source for r in results}):
        rows[source] = source_row([r for r in results if r.case.source == source])
    return rows


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def render(policy: str, rag: dict[str, Any] | None,
           halueval: dict[str, dict[str, dict[str, Any]]]) -> str:
    lines = [f"policy: {policy} (inline, through a served gateway)"]
    if rag is not None:
        head = f"{'RAG dev kind':<16}{'wrong':>6}{'caught':>8}{'blocked':>9}{'right':>7}{'flagged':>9}{'blocked':>9}"
        lines += ["", head, "-" * len(head)]
        for name, k in [*rag["per_kind"].items(), ("all kinds", rag["per_kind_all"])]:
            lines.append(f"{name:<16}{k['hallucinated']:>6}{_pct(k['caught']):>8}"
                         f"{_pct(k['caught_blocked']):>9}{k['faithful']:>7}"
                         f"{_pct(k['false_flags']):>9}{_pct(k['false_blocks']):>9}")
    if halueval:
        head = (f"{'HaluEval':<9}{'source':<24}{'n':>5}{'false-flag':>11}{'recall':>8}"
                f"{'AUROC':>7}{'len-matched':>12}{'(within src)':>13}{'len-only':>9}")
        lines += ["", head, "-" * len(head)]
        for split, rows in halueval.items():
            for source, row in rows.items():
                within = (_f(row["length_matched_auroc_within_source"])
                          if source == "overall" else "")
                lines.append(
                    f"{split:<9}{source:<24}{row['n']:>5}{_pct(row['false_flag_rate']):>11}"
                    f"{_f(row['recall']):>8}{_f(row['auroc']):>7}"
                    f"{_f(row['length_matched_auroc']):>12}{within:>13}"
                    f"{_f(row['length_only_auroc']):>9}")
    lines += ["", "caught/flagged: verdict marginal or fail; blocked: fail; false-flag/recall: "
                  "verdict != pass at the policy's threshold; AUROC: 1 - verdict score as "
                  "detector; len-matched: AUROC over hallucinated/faithful pairs whose answers "
                  "are within 1.5x in characters (overall: pairs across sources too; within "
                  "src: same-source pairs only); len-only: answer length alone as detector."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", type=Path, default=REPO / "policies" / "grounding.yaml")
    ap.add_argument("--rag", type=Path, default=RAG, help="RAG cases with kinds")
    ap.add_argument("--halueval", type=Path, nargs="*", metavar="FILE",
                    help="HaluEval case files (default: dev and tuning; name a held-out "
                         "sample here to report on it)")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the numbers here")
    args = ap.parse_args(argv)
    files = ({p.stem: p for p in args.halueval} if args.halueval is not None else HALUEVAL)
    name, rag_results = run_cases(load_cases(args.rag), args.policy,
                                  concurrency=args.concurrency)
    rag = summarize(name, rag_results)
    halueval: dict[str, dict[str, dict[str, Any]]] = {}
    errors = [r for r in rag_results if r.error]
    for split, path in files.items():
        _, results = run_cases(load_cases(path), args.policy, concurrency=args.concurrency)
        errors += [r for r in results if r.error]
        halueval[split] = halueval_rows(results)
    print(render(name, rag if rag.get("per_kind") else None, halueval))
    if args.json:
        args.json.write_text(json.dumps({"policy": name, "rag": {
            "per_kind": rag.get("per_kind"), "all_kinds": rag.get("per_kind_all"),
            "per_source": {s: b["at_policy_threshold"] for s, b in rag["per_source"].items()},
        }, "halueval": halueval}, indent=2) + "\n")
    if errors:
        print(f"{len(errors)} case(s) failed, e.g. {errors[0].case.id}: {errors[0].error}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
