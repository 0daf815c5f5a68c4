"""Per-task calibration of a model-free layer's evidence into a score.

A layer that pools evidence ``e >= 0`` against a context (``grounding``) does not
mean the same thing by the same ``e`` in every task: a dialogue reply or a summary
brings in words and names of its own, a short answer to a passage should not. Two
numbers per task (request shape) make one policy threshold ``t`` and one score scale
fit them all::

    x     = scale[shape] * e / -ln(t)        # x = 1 exactly at the threshold
    score = t ** x                            # when x >= 1 (flagged): as before
    score = t ** (x ** power[shape])          # when x <  1 (passed)

- ``scale`` places the threshold: fitted so ``t`` flags the same small share of the
  faithful answers of every shape (the flag decision depends on ``scale`` only);
- ``power`` shapes the pass band only: it makes scores of *passed* answers comparable
  across shapes (a conversation's weak evidence well below its flag point is worth
  less than a passage's), so that a ranking by score — an audit's triage, AUROC over
  answers of several tasks — does not sort by task. It changes no verdict (pass,
  marginal or fail): ``x < 1`` stays ``< 1`` and the flagged band is untouched.

Both are fitted with cross-validation by data row (``bench/fit_shape_scales.py``,
``bench/fit_shape_powers.py``; docs/layers.md has the numbers).
"""

from __future__ import annotations

from collections.abc import Mapping
from math import exp, log

__all__ = ["calibrated_score"]


def calibrated_score(evidence: float, shape: str, threshold: float,
                     scale: Mapping[str, float], power: Mapping[str, float]) -> float:
    """``score`` for ``evidence`` in ``shape`` (module docstring); missing shapes use 1.
    With power 1 (or a flagged answer) this is exactly ``exp(-scale * evidence)``."""
    e = evidence * scale.get(shape, 1.0)
    p = power.get(shape, 1.0)
    if p == 1.0 or not 0.0 < threshold < 1.0:
        return exp(-e)
    star = -log(threshold)
    x = e / star
    if x >= 1.0 or x <= 0.0:
        return exp(-e)
    return exp(-star * x ** p)
