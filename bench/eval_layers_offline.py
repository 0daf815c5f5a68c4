"""Offline quality evaluation of the model-free layers on a labeled JSONL set.

Runs a layer in-process over every case, building the ``VerifyInput`` as
``docs/evaluation.md`` says (context as the system message, question as the user
message, answer = ``model_output``; the context goes through the gateway's own
``extract_context``), and prints per source: AUROC, recall at FPR <= 5%, the
same for a **length-only baseline** (longer answer = more suspicious), and a
length-matched AUROC (only hallucinated/faithful pairs within 1.5x of each
other's word count) so a detector that merely tracks length is visible.

``--cv`` runs 2-fold cross-validation by data row (fold = row number mod 2, both
answers of a row in the same fold): the grounding weights (a small grid) and the
5%-FPR threshold are tuned on one fold and reported on the other.

    .venv/bin/python bench/eval_layers_offline.py data/halueval/halueval-dev.jsonl
    .venv/bin/python bench/eval_layers_offline.py DATA --cv
    .venv/bin/python bench/eval_layers_offline.py DATA --layer claims
    .venv/bin/python bench/eval_layers_offline.py DATA --set word_weight=0.5
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.sources.context import ContextSpec, extract_context  # noqa: E402
from gateway.eval.cases import Case, group_key, load_cases, to_messages  # noqa: E402
from gateway.eval.metrics import auroc, confusion_at, matched_auroc  # noqa: E402
from gateway.eval.metrics import recall_at_fpr, threshold_at_fpr  # noqa: E402
from gateway.layers.grounding import GroundingConfig, GroundingLayer, check_answer  # noqa: E402
from gateway.text.index import TextIndex, build_index, context_index  # noqa: E402
from gateway.layers.base import LayerResources, VerifyInput  # noqa: E402

GRID: dict[str, tuple[float, ...]] = {
    "count_scale": (2.0, 4.0),
    "length_allowance": (1.0, 1.5, 2.0),
    "sentence_allowance": (0.5, 1.0),
    "opinion_weight": (0.25, 1.0),
    "within_allowance_weight": (0.05, 0.15),
}
"""The only tuned constants of the grounding layer (plus the threshold); the other
weights stay at their shipped defaults (share_weight 0.25, rare_weight 0.5,
contradiction_boost 2)."""


def verify_input(case: Case) -> VerifyInput:
    messages = to_messages(case)
    return VerifyInput(messages=messages, response_text=case.answer,
                       context=extract_context(messages, ContextSpec()))


def n_words(case: Case) -> float:
    return float(len(case.answer.split()))


def fold_of(case: Case) -> int:
    m = re.search(r"(\d+)$", group_key(case))
    return int(m.group(1)) % 2 if m else hash(group_key(case)) % 2


def run_layer(cases: Sequence[Case], layer_name: str, overrides: dict[str, Any]) -> list[float]:
    """Suspicion scores (1 - layer score) for every case."""
    if layer_name == "grounding":
        layer: Any = GroundingLayer(GroundingConfig(**overrides), LayerResources())
    else:
        from gateway.layers.claims import ClaimsConfig, ClaimsLayer

        layer = ClaimsLayer(ClaimsConfig(**overrides), LayerResources())

    async def go() -> list[float]:
        return [1.0 - (await layer.verify(verify_input(c))).score for c in cases]

    return asyncio.run(go())


@dataclass(slots=True)
class Prepared:
    """Per-case indexes, built once so a config grid only re-scores."""

    ctx: TextIndex
    question: TextIndex | None
    answer: str


def prepare(cases: Sequence[Case]) -> list[Prepared]:
    out = []
    for c in cases:
        inp = verify_input(c)
        q = build_index([("question", inp.question)]) if inp.question else None
        out.append(Prepared(context_index(inp.context), q, c.answer))
    return out


def scorer(prepared: Sequence[Prepared], cfg: GroundingConfig) -> list[float]:
    return [1.0 - check_answer(p.answer, p.ctx, p.question, cfg)[0] for p in prepared]


def report(title: str, cases: Sequence[Case], susp: Sequence[float],
           threshold: float | None = None, fpr: float = 0.05) -> None:
    print(f"\n== {title} ==")
    print(f"{'source':26} {'n':>4} {'AUROC':>6} {'R@5%':>6} {'lenAUROC':>8} {'lenR@5%':>7}"
          f" {'matchedAUROC':>12} {'pairs':>6}" + ("   heldout-thr FPR / recall" if threshold else ""))
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(cases):
        groups.setdefault(c.source, []).append(i)
    groups["ALL"] = list(range(len(cases)))
    for src, idx in groups.items():
        s = [susp[i] for i in idx]
        y = [cases[i].hallucinated for i in idx]
        ln = [n_words(cases[i]) for i in idx]
        m_auc, pairs = matched_auroc(s, y, ln) if src != "ALL" else (float("nan"), 0)
        line = (f"{src:26} {len(idx):4d} {auroc(s, y):6.3f} {recall_at_fpr(s, y, fpr):6.3f} "
                f"{auroc(ln, y):8.3f} {recall_at_fpr(ln, y, fpr):7.3f} {m_auc:12.3f} {pairs:6d}")
        if threshold is not None:
            conf = confusion_at(s, y, threshold)
            line += f"   {conf.fpr:6.3f} / {conf.recall:6.3f}"
        print(line)


def objective(cases: Sequence[Case], susp: Sequence[float]) -> float:
    """Mean per-source AUROC + overall recall at 5% FPR (what the targets ask for)."""
    by: dict[str, list[int]] = {}
    for i, c in enumerate(cases):
        by.setdefault(c.source, []).append(i)
    aucs = [auroc([susp[i] for i in idx], [cases[i].hallucinated for i in idx])
            for idx in by.values()]
    y = [c.hallucinated for c in cases]
    return sum(aucs) / len(aucs) + 0.5 * recall_at_fpr(susp, y, 0.05)


def tune(cases: Sequence[Case], prepared: Sequence[Prepared],
         base: dict[str, Any]) -> tuple[dict[str, float], float]:
    """Best grid point on these cases, and its 5%-FPR suspicion threshold."""
    best: tuple[float, dict[str, float]] | None = None
    keys = list(GRID)
    for values in itertools.product(*(GRID[k] for k in keys)):
        params = dict(zip(keys, values))
        susp = scorer(prepared, GroundingConfig(**{**base, **params}))
        obj = objective(cases, susp)
        if best is None or obj > best[0]:
            best = (obj, params)
    assert best is not None
    params = best[1]
    susp = scorer(prepared, GroundingConfig(**{**base, **params}))
    return params, threshold_at_fpr(susp, [c.hallucinated for c in cases], 0.05)


def cross_validate(cases: Sequence[Case], base: dict[str, Any]) -> None:
    prepared = prepare(cases)
    held_cases: list[Case] = []
    held_susp: list[float] = []
    thresholds: list[float] = []
    for tune_fold in (0, 1):
        t_idx = [i for i, c in enumerate(cases) if fold_of(c) == tune_fold]
        h_idx = [i for i, c in enumerate(cases) if fold_of(c) != tune_fold]
        params, thr = tune([cases[i] for i in t_idx], [prepared[i] for i in t_idx], base)
        print(f"fold tuned on {tune_fold}: {params} suspicion threshold {thr:.4f}"
              f" (= layer threshold {1 - thr:.4f})")
        cfg = GroundingConfig(**{**base, **params})
        h_cases = [cases[i] for i in h_idx]
        h_susp = scorer([prepared[i] for i in h_idx], cfg)
        report(f"held-out fold {1 - tune_fold} (tuned on fold {tune_fold})", h_cases, h_susp, thr)
        thresholds.append(thr)
        held_cases += h_cases
        held_susp += h_susp
    print("\n(pooled held-out predictions; AUROC pools two differently tuned models)")
    report("cross-validated, both held-out folds pooled", held_cases, held_susp)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--layer", choices=("grounding", "claims"), default="grounding")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config override, e.g. --set word_weight=0.5")
    ap.add_argument("--cv", action="store_true", help="2-fold CV by row (grounding only)")
    args = ap.parse_args(argv)
    overrides: dict[str, Any] = {}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key] = value if value in ("true", "false") else float(value)
    cases = load_cases(args.data)
    if args.cv:
        if args.layer != "grounding":
            ap.error("--cv tunes the grounding layer only")
        cross_validate(cases, overrides)
        return 0
    susp = run_layer(cases, args.layer, overrides)
    name = args.layer
    if name == "grounding":
        thr = 1.0 - GroundingConfig(**overrides).threshold
    else:
        from gateway.layers.claims import ClaimsConfig

        thr = 1.0 - ClaimsConfig(**overrides).threshold
    print(f"layer {name} overrides {overrides or '{}'}; flagged = layer score < threshold")
    report(f"{name} on {args.data.name} (full set, shipped config)", cases,
           susp, thr + 1e-12)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
