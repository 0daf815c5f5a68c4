"""Fit the grounding layer's per-shape evidence scales (``shape_scale``), with 2-fold CV.

The layer scales its evidence by a factor per request shape (``passage``,
``conversation``, ``document``; gateway/layers/_grounding_shape.py), so one policy
threshold flags about the same share of faithful answers in each shape. This script
runs the layer in-process with every scale at 1, reads each case's evidence
(``-ln score``) and shape, and for each shape finds the scale that puts the target
false-flag rate at the layer's threshold:

    scale = -ln(threshold) / t,   t = the evidence above which ``--target`` of that
                                      shape's faithful answers lie

Cross-validation: 2 folds by data row (both answers of a row in one fold, as
``eval_layers_offline.py --cv``); the scale fitted on one fold is applied to the
other, both directions, and the held-out false-flag rate and recall are printed.
The shipped value is the fit on all the given files. Never pass the held-out
HaluEval samples (``halueval-heldout*.jsonl``) here.

The other grounding settings (``summary_context_sentences`` …) come from the shipped
policy; ``--folds`` adds a K-fold CV by row, pooled per source.

    .venv/bin/python bench/fit_shape_scales.py      # HaluEval dev, tuning, diagnosis(-2) + RAG dev
    .venv/bin/python bench/fit_shape_scales.py --target 0.03 FILE...
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_layers_offline import fold_of, verify_input  # noqa: E402
from fit_shape_powers import policy_config  # noqa: E402

from gateway.eval.cases import Case, group_key, load_cases  # noqa: E402
from gateway.layers._grounding_shape import SHAPES  # noqa: E402
from gateway.layers.base import LayerResources  # noqa: E402
from gateway.layers.grounding import GroundingConfig, GroundingLayer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT = [REPO / "data" / "halueval" / "halueval-dev.jsonl",
           REPO / "data" / "halueval" / "halueval-tuning.jsonl",
           REPO / "data" / "halueval" / "halueval-diagnosis.jsonl",
           REPO / "data" / "halueval" / "halueval-diagnosis-2.jsonl",
           REPO / "tests" / "data" / "rag-dev.jsonl"]
MIN_SCALE, MAX_SCALE = 0.1, 4.0
MARGIN = 1.5


def evidence(cases: Sequence[Case], overrides: dict[str, object] | None = None
             ) -> list[tuple[str, float]]:
    """(shape, raw evidence) per case, every shape scale at 1."""
    cfg = GroundingConfig.model_validate({**(overrides or {}),
                                          "shape_scale": {s: 1.0 for s in SHAPES}})
    layer = GroundingLayer(cfg, LayerResources())

    async def go() -> list[tuple[str, float]]:
        out = []
        for c in cases:
            r = await layer.verify(verify_input(c))
            out.append((str(r.details.get("shape", "passage")), -math.log(max(r.score, 1e-300))))
        return out

    return asyncio.run(go())


def fit(ev: Sequence[float], y: Sequence[bool], target: float, ev_star: float,
        sources: Sequence[str] | None = None, midpoint: bool = True) -> float:
    """The largest scale that flags at most ``target`` of the faithful answers among
    ``ev`` — of each source's, when ``sources`` are given (a shape may hold several).

    ``midpoint``: the threshold goes above the faithful answer at the target quantile
    by a margin — halfway to the next one above it, at most ``MARGIN`` times its
    evidence — not right on top of it. Faithful evidence comes in clusters (answers
    with the same small weak evidence); a threshold on a cluster's edge flags a good
    part of the next sample's cluster (5-fold CV by row, HaluEval dev summaries: 6.7%
    flagged at a 4% fit on the edge, 2.7% with the margin; docs/layers.md)."""
    groups: dict[str, list[float]] = {}
    for i, (e, h) in enumerate(zip(ev, y, strict=True)):
        if not h:
            groups.setdefault(sources[i] if sources else "", []).append(e)
    if not groups:
        return 1.0
    t = 0.0
    for faithful in groups.values():
        faithful.sort(reverse=True)
        k = int(math.floor(target * len(faithful)))
        if k >= len(faithful):
            continue
        tk = faithful[k]
        if midpoint and k >= 1:
            tk = min((faithful[k] + faithful[k - 1]) / 2, MARGIN * faithful[k])
        t = max(t, tk)
    if t <= 0:
        return MAX_SCALE
    return min(MAX_SCALE, max(MIN_SCALE, ev_star / t))


def rates(ev: Sequence[float], y: Sequence[bool], scale: float,
          ev_star: float) -> tuple[float, float]:
    flagged = [scale * e > ev_star for e in ev]
    f = [fl for fl, h in zip(flagged, y, strict=True) if not h]
    h = [fl for fl, hh in zip(flagged, y, strict=True) if hh]
    return (sum(f) / len(f) if f else 0.0), (sum(h) / len(h) if h else 0.0)


def _row(case: Case) -> int:
    m = re.search(r"(\d+)$", group_key(case))
    return int(m.group(1)) if m else sum(map(ord, group_key(case)))


def kfold(cases: Sequence[Case], got: Sequence[tuple[str, float]], k: int,
          targets: dict[str, float], ev_star: float, midpoint: bool) -> None:
    """K folds by data row (row number mod K): each shape's scale fitted on K-1 folds,
    applied to the last; out-of-fold false flags and recall pooled per source."""
    if k < 2:
        return
    counts: dict[str, list[int]] = {}
    for shape in SHAPES:
        idx = [i for i, (s, _) in enumerate(got) if s == shape]
        for fold in range(k):
            tr = [i for i in idx if _row(cases[i]) % k != fold]
            scale = fit([got[i][1] for i in tr], [cases[i].hallucinated for i in tr],
                        targets[shape], ev_star, [cases[i].source.split("-")[0] for i in tr], midpoint)
            for i in idx:
                if _row(cases[i]) % k != fold:
                    continue
                src = cases[i].source if cases[i].source.startswith("halueval") else "rag"
                c = counts.setdefault(src, [0, 0, 0, 0])
                flagged = scale * got[i][1] > ev_star
                c[2 * cases[i].hallucinated] += 1
                c[2 * cases[i].hallucinated + 1] += flagged
    print(f"\n{k}-fold CV by row, out-of-fold false-flag / recall:")
    for src, (nf, ff, nh, fh) in sorted(counts.items()):
        print(f"  {src:28} {100 * ff / max(nf, 1):5.1f}% / {fh / max(nh, 1):.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, default=DEFAULT)
    ap.add_argument("--target", type=float, default=0.04,
                    help="false-flag rate to put at the threshold (default 0.04)")
    ap.add_argument("--shape-target", action="append", default=[], metavar="SHAPE=RATE",
                    help="another target for one shape, e.g. conversation=0.03 (the shipped "
                         "fit: dialogue false flags ran ~3 points above CV on two held-out "
                         "samples, so its target is lower)")
    ap.add_argument("--policy", type=Path, default=REPO / "policies" / "grounding.yaml",
                    help="the other grounding settings come from this policy (default: shipped)")
    ap.add_argument("--folds", type=int, default=5,
                    help="also K-fold CV by row, out-of-fold rates pooled per source (default 5)")
    ap.add_argument("--no-midpoint", dest="midpoint", action="store_false",
                    help="threshold right on the target quantile (the first fit's rule)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="another grounding config value, e.g. --set name_rarity=2")
    args = ap.parse_args(argv)
    overrides = {k: v for k, v in policy_config(args.policy).items()
                 if k not in ("shape_scale", "shape_power")}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key] = value if value in ("true", "false") else float(value)
    targets = {s: args.target for s in SHAPES}
    for item in args.shape_target:
        key, _, value = item.partition("=")
        if key not in targets:
            ap.error(f"--shape-target: unknown shape {key!r} (one of {', '.join(SHAPES)})")
        targets[key] = float(value)
    cases = [c for f in args.files for c in load_cases(f)]
    ev_star = -math.log(GroundingConfig().threshold)
    got = evidence(cases, overrides)
    print(f"{'shape':13}{'n':>5}  {'scale (all)':>11}  CV: scale fitted on one fold -> "
          "other fold false-flag / recall")
    shipped = {}
    for shape in SHAPES:
        idx = [i for i, (s, _) in enumerate(got) if s == shape]
        if not idx:
            continue
        ev = [got[i][1] for i in idx]
        y = [cases[i].hallucinated for i in idx]
        folds = [fold_of(cases[i]) for i in idx]
        src = [cases[i].source.split("-")[0] for i in idx]  # "rag" / "halueval"
        scale = fit(ev, y, targets[shape], ev_star, src, args.midpoint)
        shipped[shape] = round(scale, 3)
        cv = []
        for tune in (0, 1):
            tr = [j for j, f in enumerate(folds) if f == tune]
            te = [j for j, f in enumerate(folds) if f != tune]
            k = fit([ev[j] for j in tr], [y[j] for j in tr], targets[shape], ev_star,
                    [src[j] for j in tr], args.midpoint)
            ff, rec = rates([ev[j] for j in te], [y[j] for j in te], k, ev_star)
            cv.append(f"{k:.3f} -> {100 * ff:.1f}% / {rec:.3f}")
        parts = []
        for name in sorted(set(src)):
            sel = [j for j in range(len(idx)) if src[j] == name]
            ff, rec = rates([ev[j] for j in sel], [y[j] for j in sel], scale, ev_star)
            parts.append(f"{name} {100 * ff:.1f}% / {rec:.3f}")
        print(f"{shape:13}{len(idx):>5}  {scale:>11.3f}  " + "; ".join(cv)
              + "   (all: " + ", ".join(parts) + ")")
    print(f"\nshape_scale: {shipped}")
    kfold(cases, got, args.folds, targets, ev_star, args.midpoint)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
