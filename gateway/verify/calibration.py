"""Seed 000: Platt scaling of raw layer scores into calibrated probabilities.

``calibrated = 1 / (1 + exp(a·f + b))`` clipped to ``[0, 1]``, where ``f`` is
the raw score. A negative ``a`` keeps the mapping increasing (higher raw score
→ higher calibrated trust).

Per-layer parameters: the seed's defaults apply to layers whose names match
the seed's (``semantic-entropy``, ``fact-decomposition``, ``multi-source``,
``self-consistency``, ``nli``); any layer without parameters — including our
model-free ``claims``, ``grounding``, ``citations`` until someone fits them —
is passed through unchanged (identity). Fit your own with :func:`fit_platt` on
eval output (raw scores + 0/1 "answer was correct" labels).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["SEED_DEFAULTS", "Calibrator", "PlattParams", "fit_platt", "platt"]


@dataclass(frozen=True, slots=True)
class PlattParams:
    a: float
    b: float


SEED_DEFAULTS: Mapping[str, PlattParams] = MappingProxyType({
    "semantic-entropy": PlattParams(-2.5, 0.5),
    "fact-decomposition": PlattParams(-3.0, 0.3),
    "multi-source": PlattParams(-2.0, 0.4),
    "self-consistency": PlattParams(-2.8, 0.35),
    "nli": PlattParams(-2.2, 0.45),
})


def _sigmoid_neg(z: float) -> float:
    """``1 / (1 + exp(z))`` without overflow."""
    if z >= 0:
        e = math.exp(-z)
        return e / (1.0 + e)
    return 1.0 / (1.0 + math.exp(z))


def platt(score: float, params: PlattParams) -> float:
    """``1 / (1 + exp(a·score + b))``, clipped to [0, 1]."""
    return min(1.0, max(0.0, _sigmoid_neg(params.a * score + params.b)))


class Calibrator:
    """Maps ``(layer name, raw score)`` to a calibrated score.

    ``params`` override or extend the seed defaults (``seed_defaults=False``
    drops them). Layers with no parameters are returned unchanged (clipped).
    """

    def __init__(self, params: Mapping[str, PlattParams] | None = None, *,
                 seed_defaults: bool = True) -> None:
        merged = dict(SEED_DEFAULTS) if seed_defaults else {}
        merged.update(params or {})
        self._params: Mapping[str, PlattParams] = MappingProxyType(merged)

    def params_for(self, layer: str) -> PlattParams | None:
        return self._params.get(layer)

    def calibrate(self, layer: str, score: float) -> float:
        params = self._params.get(layer)
        if params is None:
            return min(1.0, max(0.0, score))
        return platt(score, params)


def _nll(scores: Sequence[float], targets: Sequence[float], a: float, b: float) -> float:
    total = 0.0
    for f, t in zip(scores, targets, strict=True):
        z = f * a + b
        if z >= 0:
            total += t * z + math.log1p(math.exp(-z))
        else:
            total += (t - 1.0) * z + math.log1p(math.exp(z))
    return total


def fit_platt(scores: Sequence[float], labels: Sequence[bool | int],
              max_iter: int = 100) -> PlattParams:
    """Fit ``a, b`` by Newton's method with backtracking (Lin, Lin & Weng, 2007).

    ``labels[i]`` is 1/True when the answer with raw score ``scores[i]`` was
    actually correct. Uses Platt's smoothed targets, so it is well-defined even
    when every label is the same. Pure Python; O(n) per iteration.
    """
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores but {len(labels)} labels")
    if not scores:
        raise ValueError("fit_platt needs at least one (score, label) pair")
    n_pos = sum(1 for y in labels if y)
    n_neg = len(labels) - n_pos
    hi, lo = (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0)
    targets = [hi if y else lo for y in labels]
    a, b = 0.0, math.log((n_neg + 1.0) / (n_pos + 1.0))
    fval = _nll(scores, targets, a, b)
    sigma, min_step = 1e-12, 1e-10
    for _ in range(max_iter):
        h11 = h22 = sigma
        h21 = g1 = g2 = 0.0
        for f, t in zip(scores, targets, strict=True):
            p = _sigmoid_neg(f * a + b)           # P(correct | f)
            d2 = p * (1.0 - p)
            h11 += f * f * d2
            h22 += d2
            h21 += f * d2
            d1 = t - p
            g1 += f * d1
            g2 += d1
        if abs(g1) < 1e-5 and abs(g2) < 1e-5:
            break
        det = h11 * h22 - h21 * h21
        da = -(h22 * g1 - h21 * g2) / det
        db = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * da + g2 * db
        step = 1.0
        while step >= min_step:
            na, nb = a + step * da, b + step * db
            nf = _nll(scores, targets, na, nb)
            if nf < fval + 1e-4 * step * gd:
                a, b, fval = na, nb, nf
                break
            step /= 2.0
        else:
            break  # line search failed: keep the best so far
    return PlattParams(a, b)
