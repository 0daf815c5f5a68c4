"""Fit the grounding layer's per-shape pass-band exponents (``shape_power``), with 2-fold CV.

``gateway/scoring/task_calibration.py``: below its shape's flag point an answer's
score is ``t ** (x ** power[shape])`` (``x`` = scaled evidence / -ln t, ``x < 1``).
The exponents change no verdict; they make the scores of passed answers comparable
across request shapes, so a ranking by score over answers of several tasks (the
length-matched AUROC pooled over sources, docs/layers.md) does not sort by task.

This script runs the layer in-process with the policy's other settings (every power
at 1), then picks the grid point that maximizes the pooled length-matched AUROC
(pairs within 1.5x in answer characters) on HaluEval dev and the tuning sample. Cross-validation: 2 folds
by data row (``eval_layers_offline.fold_of``); powers fitted on one fold are scored
on the other and compared with all powers at 1. The shipped value is the fit on all
of dev + tuning. Never pass a held-out HaluEval sample here.

    .venv/bin/python bench/fit_shape_powers.py
    .venv/bin/python bench/fit_shape_powers.py --set summary_context_sentences=6
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_layers_offline import fold_of, verify_input  # noqa: E402

from gateway.eval.cases import Case, load_cases  # noqa: E402
from gateway.eval.metrics import auroc, matched_auroc  # noqa: E402
from gateway.layers._grounding_shape import SHAPES  # noqa: E402
from gateway.layers.base import LayerResources  # noqa: E402
from gateway.layers.grounding import GroundingConfig, GroundingLayer  # noqa: E402
from gateway.policy.loader import load_policy_file  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEV = REPO / "data" / "halueval" / "halueval-dev.jsonl"
TUNING = REPO / "data" / "halueval" / "halueval-tuning.jsonl"
POLICY = REPO / "policies" / "grounding.yaml"
GRID: dict[str, tuple[float, ...]] = {
    "passage": (0.5, 0.75, 1.0),
    "conversation": (1.0, 1.5, 2.0, 3.0),
    "document": (1.0, 1.5, 2.0, 3.0),
}


def policy_config(path: Path) -> dict[str, object]:
    """The ``grounding`` layer's config in a policy file."""
    policy = load_policy_file(path)
    for layer in policy.layers:
        if layer.name == "grounding":
            return dict(layer.spec.config)
    return {}


def run(cases: Sequence[Case], overrides: Mapping[str, object]) -> list[tuple[str, float]]:
    """(shape, x) per case: scaled evidence over -ln(threshold), every power at 1."""
    cfg = GroundingConfig.model_validate({**overrides, "shape_power": {}})
    layer = GroundingLayer(cfg, LayerResources())
    star = -math.log(cfg.threshold)

    async def go() -> list[tuple[str, float]]:
        out = []
        for c in cases:
            r = await layer.verify(verify_input(c))
            out.append((str(r.details.get("shape", "passage")),
                        -math.log(max(r.score, 1e-300)) / star))
        return out

    return asyncio.run(go())


def scores(xs: Sequence[tuple[str, float]], power: Mapping[str, float]) -> list[float]:
    """Suspicion (higher = worse) under ``power``: ``x ** p`` below 1, ``x`` above."""
    return [x if x >= 1.0 else x ** power.get(s, 1.0) for s, x in xs]


def pooled(cases: Sequence[Case], xs: Sequence[tuple[str, float]],
           power: Mapping[str, float]) -> float:
    return matched_auroc(scores(xs, power), [c.hallucinated for c in cases],
                         [float(len(c.answer)) for c in cases])[0]


def best(cases: Sequence[Case], xs: Sequence[tuple[str, float]]) -> dict[str, float]:
    keys = [s for s in SHAPES if s in GRID]
    grid = [dict(zip(keys, v, strict=True)) for v in itertools.product(*(GRID[k] for k in keys))]
    # Ties (flat regions) go to the grid point closest to the plain form.
    return max(grid, key=lambda p: (round(pooled(cases, xs, p), 4),
                                    -sum(abs(math.log(v)) for v in p.values())))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, default=[DEV, TUNING])
    ap.add_argument("--policy", type=Path, default=POLICY,
                    help="take the grounding config from this policy (default: shipped)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    overrides = policy_config(args.policy)
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key] = value if value in ("true", "false") else float(value)
    cases = [c for f in args.files for c in load_cases(f)]
    xs = run(cases, overrides)
    one = dict.fromkeys(SHAPES, 1.0)
    y = [c.hallucinated for c in cases]
    print("fold  powers fitted on the other fold                     "
          "pooled len-matched AUROC (powers 1 -> fitted)   AUROC (1 -> fitted)")
    for tune in (0, 1):
        tr = [i for i, c in enumerate(cases) if fold_of(c) == tune]
        te = [i for i, c in enumerate(cases) if fold_of(c) != tune]
        p = best([cases[i] for i in tr], [xs[i] for i in tr])
        tc, tx, ty = [cases[i] for i in te], [xs[i] for i in te], [y[i] for i in te]
        print(f"{1 - tune:4}  {str(p):52} {pooled(tc, tx, one):.3f} -> {pooled(tc, tx, p):.3f}"
              f"{'':26}{auroc(scores(tx, one), ty):.3f} -> {auroc(scores(tx, p), ty):.3f}")
    p = best(cases, xs)
    print(f" all  {str(p):52} {pooled(cases, xs, one):.3f} -> {pooled(cases, xs, p):.3f}"
          f"{'':26}{auroc(scores(xs, one), y):.3f} -> {auroc(scores(xs, p), y):.3f}")
    print(f"\nshape_power: {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
