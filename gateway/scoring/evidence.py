"""Seed 004: evidence quality, supporting/contradicting weights, verdict rules.

Quality of one piece of evidence (seed 004, "Evidence Quality Factors")::

    quality = 0.30·authority + 0.25·recency + 0.25·relevance + 0.20·specificity

each factor in ``[0, 1]``. Weights (seed 004, ORIENT step 2)::

    support = Σ quality·relevance   over supporting evidence
    contra  = Σ quality·relevance   over contradicting evidence
    total   = support + contra      (contextual evidence carries no weight)

Initial verdict (ORIENT step 3) and confidence:

- ``total == 0``              → UNVERIFIABLE, confidence 0
- ``contra > 1.5·support``    → CONTRADICTED, confidence ``contra/total``
- ``support > 1.5·contra``    → VERIFIED,     confidence ``support/total``
- otherwise                   → PARTIAL,      confidence ``|support−contra|/total``

OUTDATED (ORIENT step 4): a CONTRADICTED claim with supporting evidence dated
before the claim date *and* contradicting evidence dated after it.

Finalize (DECIDE step 1): below ``confidence_threshold`` (default 0.85)
VERIFIED and CONTRADICTED are downgraded to PARTIAL; other verdicts stand.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from typing import Literal

__all__ = [
    "DEFAULT_CONFIDENCE_THRESHOLD",
    "EvidenceItem",
    "Verdict",
    "VerdictResult",
    "assess",
    "finalize",
    "initial_verdict",
    "quality_score",
    "weights",
]

DEFAULT_CONFIDENCE_THRESHOLD = 0.85
_DOMINANCE = 1.5


class Verdict(StrEnum):
    VERIFIED = "VERIFIED"
    CONTRADICTED = "CONTRADICTED"
    OUTDATED = "OUTDATED"
    UNVERIFIABLE = "UNVERIFIABLE"
    PARTIAL = "PARTIAL"


def _unit(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return value


def quality_score(authority: float, recency: float, relevance: float,
                  specificity: float) -> float:
    """Seed 004 evidence quality: weighted sum of four factors, each in [0, 1]."""
    return (0.30 * _unit("authority", authority) + 0.25 * _unit("recency", recency)
            + 0.25 * _unit("relevance", relevance) + 0.20 * _unit("specificity", specificity))


@dataclass(frozen=True, slots=True)
class EvidenceItem:
    """One piece of evidence about one claim, with its quality factors."""

    kind: Literal["supporting", "contradicting", "contextual"]
    relevance: float
    authority: float = 0.5
    recency: float = 0.5
    specificity: float = 0.5
    dated: date | None = None
    """When the evidence was published/observed (used by the OUTDATED check)."""

    @property
    def quality(self) -> float:
        return quality_score(self.authority, self.recency, self.relevance, self.specificity)

    @property
    def weight(self) -> float:
        """``quality × relevance``: this item's contribution to its side."""
        return self.quality * self.relevance


def weights(items: Iterable[EvidenceItem]) -> tuple[float, float]:
    """``(support, contra)`` weights; contextual items count for neither."""
    support = contra = 0.0
    for item in items:
        if item.kind == "supporting":
            support += item.weight
        elif item.kind == "contradicting":
            contra += item.weight
    return support, contra


def initial_verdict(support: float, contra: float) -> tuple[Verdict, float]:
    """Seed 004 ORIENT step 3: verdict and confidence from the two weights."""
    total = support + contra
    if total <= 0.0:
        return Verdict.UNVERIFIABLE, 0.0
    if contra > support * _DOMINANCE:
        return Verdict.CONTRADICTED, contra / total
    if support > contra * _DOMINANCE:
        return Verdict.VERIFIED, support / total
    return Verdict.PARTIAL, abs(support - contra) / total


def _is_outdated(items: Iterable[EvidenceItem], claim_date: date) -> bool:
    old_support = new_contra = False
    for item in items:
        if item.dated is None:
            continue
        old_support |= item.kind == "supporting" and item.dated < claim_date
        new_contra |= item.kind == "contradicting" and item.dated > claim_date
    return old_support and new_contra


def finalize(verdict: Verdict, confidence: float,
             threshold: float = DEFAULT_CONFIDENCE_THRESHOLD) -> Verdict:
    """Seed 004 DECIDE step 1: downgrade unsure VERIFIED/CONTRADICTED to PARTIAL."""
    if confidence >= threshold:
        return verdict
    if verdict in (Verdict.VERIFIED, Verdict.CONTRADICTED):
        return Verdict.PARTIAL
    return verdict


@dataclass(frozen=True, slots=True)
class VerdictResult:
    verdict: Verdict
    """Final verdict (after the OUTDATED check and the confidence threshold)."""
    initial: Verdict
    """Verdict before finalisation."""
    confidence: float
    support: float
    contra: float


def assess(items: Iterable[EvidenceItem], *, claim_date: date | None = None,
           threshold: float = DEFAULT_CONFIDENCE_THRESHOLD) -> VerdictResult:
    """Weigh ``items`` and apply seed 004's verdict rules end to end.

    OUTDATED is checked only when ``claim_date`` is given. An OUTDATED verdict
    is kept through finalisation (the threshold only downgrades VERIFIED and
    CONTRADICTED).
    """
    items = list(items)
    support, contra = weights(items)
    verdict, confidence = initial_verdict(support, contra)
    if verdict is Verdict.CONTRADICTED and claim_date is not None \
            and _is_outdated(items, claim_date):
        verdict = Verdict.OUTDATED
    return VerdictResult(verdict=finalize(verdict, confidence, threshold), initial=verdict,
                         confidence=confidence, support=support, contra=contra)
