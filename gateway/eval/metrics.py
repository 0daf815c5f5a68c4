"""Pure metric functions for detector evaluation.

Convention: a *detector score* is higher for **more suspicious** cases and a
*label* is ``True`` for the positive class (hallucinated). Layer scores are
"higher = more trustworthy", so pass ``1 - layer_score`` (or negate) as the
detector score.

- :func:`auroc` — area under the ROC curve via the Mann–Whitney rank statistic,
  ties counted as one half.
- :func:`threshold_at_fpr` / :func:`recall_at_fpr` — the lowest threshold whose
  false-positive rate is at most ``max_fpr`` and the recall it gives (a case is
  flagged when ``score >= threshold``).
- :func:`confusion_at` / :func:`precision_recall_at` — counts and rates at a
  given threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "Confusion",
    "auroc",
    "confusion_at",
    "matched_auroc",
    "precision_recall_at",
    "recall_at_fpr",
    "threshold_at_fpr",
]


@dataclass(frozen=True, slots=True)
class Confusion:
    tp: int
    fp: int
    tn: int
    fn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def fpr(self) -> float:
        return self.fp / (self.fp + self.tn) if self.fp + self.tn else 0.0


def _check(scores: Sequence[float], labels: Sequence[bool]) -> None:
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores but {len(labels)} labels")


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """P(score of a random positive > score of a random negative), ties = 1/2.

    Computed from average ranks in O(n log n). Raises ``ValueError`` when either
    class is empty (the AUROC is undefined then).
    """
    _check(scores, labels)
    n_pos = sum(1 for y in labels if y)
    n_neg = len(labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUROC needs at least one positive and one negative case")
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    rank_sum_pos = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        avg_rank = (i + j) / 2 + 1  # ranks are 1-based
        rank_sum_pos += avg_rank * sum(1 for k in order[i:j + 1] if labels[k])
        i = j + 1
    return (rank_sum_pos - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def confusion_at(scores: Sequence[float], labels: Sequence[bool], threshold: float) -> Confusion:
    """Counts when every case with ``score >= threshold`` is flagged positive."""
    _check(scores, labels)
    tp = fp = tn = fn = 0
    for s, y in zip(scores, labels, strict=True):
        flagged = s >= threshold
        if flagged and y:
            tp += 1
        elif flagged:
            fp += 1
        elif y:
            fn += 1
        else:
            tn += 1
    return Confusion(tp, fp, tn, fn)


def precision_recall_at(
    scores: Sequence[float], labels: Sequence[bool], threshold: float
) -> tuple[float, float]:
    """``(precision, recall)`` at ``threshold`` (precision is 0 when nothing is flagged)."""
    c = confusion_at(scores, labels, threshold)
    return c.precision, c.recall


def threshold_at_fpr(scores: Sequence[float], labels: Sequence[bool], max_fpr: float) -> float:
    """The lowest threshold (among the scores, or +inf) with FPR <= ``max_fpr``.

    Lower thresholds flag more, so this maximizes recall under the FPR cap. Returns
    ``float("inf")`` when even flagging only the top score exceeds the cap.
    """
    _check(scores, labels)
    n_neg = sum(1 for y in labels if not y)
    allowed = int(max_fpr * n_neg + 1e-9)
    negatives_at: dict[float, int] = {}
    for s, y in zip(scores, labels, strict=True):
        negatives_at[s] = negatives_at.get(s, 0) + (0 if y else 1)
    best = float("inf")
    negatives_above = 0
    for s in sorted(negatives_at, reverse=True):
        negatives_above += negatives_at[s]
        if negatives_above > allowed:
            break
        best = s
    return best


def recall_at_fpr(scores: Sequence[float], labels: Sequence[bool], max_fpr: float) -> float:
    """Recall at :func:`threshold_at_fpr` (0 when no threshold meets the cap)."""
    t = threshold_at_fpr(scores, labels, max_fpr)
    if t == float("inf"):
        return 0.0
    return confusion_at(scores, labels, t).recall


def matched_auroc(
    scores: Sequence[float], labels: Sequence[bool], covariate: Sequence[float],
    max_ratio: float = 1.5, groups: Sequence[str] | None = None,
) -> tuple[float, int]:
    """AUROC over positive/negative pairs whose ``covariate`` is within ``max_ratio``.

    A confound check: with ``covariate`` = answer length, it says how well the
    scores separate the classes among answers of about the same length (a
    length-only detector scores near 0.5 here). With ``groups`` (e.g. each case's
    source), only pairs from the same group count: ranking *within* a task, not
    across tasks. Returns ``(auroc, pairs)``; the AUROC is ``nan`` when no pair
    qualifies. O(P·N): meant for evaluation sets.
    """
    _check(scores, labels)
    for name, other in (("covariates", covariate), ("groups", groups)):
        if other is not None and len(other) != len(scores):
            raise ValueError(f"{len(scores)} scores but {len(other)} {name}")
    group = groups if groups is not None else [""] * len(labels)
    pos = [(scores[i], covariate[i], group[i]) for i in range(len(labels)) if labels[i]]
    neg = [(scores[i], covariate[i], group[i]) for i in range(len(labels)) if not labels[i]]
    wins = 0.0
    pairs = 0
    for sp, cp, gp in pos:
        for sn, cn, gn in neg:
            if gp != gn:
                continue
            lo, hi = (cp, cn) if cp <= cn else (cn, cp)
            if hi > max_ratio * max(lo, 1e-12):
                continue
            pairs += 1
            wins += 1.0 if sp > sn else 0.5 if sp == sn else 0.0
    return (wins / pairs if pairs else float("nan")), pairs
