"""Seed 001: source binding — authority weights, recency decay, confidence, repair.

Authority weights (seed 001 ``AUTHORITY_WEIGHTS``, "gov > academic > news > blog"):
government 1.0, regulatory 1.0, academic 0.95, news_major 0.8, corporate 0.75,
news_trade 0.7, wiki 0.6, blog 0.3, unknown 0.2.

Recency: ``exp(-ln 2 · age_days / 365)`` (half-life one year); an unknown or
unparseable date weighs 0.5; a date in the future weighs 1.0.

Aggregated confidence of one claim bound to ``N`` sources, with diminishing
returns for additional sources::

    confidence = min(1, Σ relevance_i · authority_i · recency_i / sqrt(N))

Verification status: ``verified`` at ``confidence >= 0.7``, ``partially_verified``
at ``>= 0.3``, else ``unverified`` (the seed names the three statuses but not the
cut-offs; these are ours and are parameters).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from types import MappingProxyType
from typing import Literal

__all__ = [
    "AUTHORITY_WEIGHTS",
    "HALF_LIFE_DAYS",
    "UNKNOWN_DATE_WEIGHT",
    "BoundSource",
    "SourceAuthority",
    "VerificationStatus",
    "aggregated_confidence",
    "authority_weight",
    "parse_date",
    "recency_weight",
    "repair_feedback",
    "verification_status",
]

SourceAuthority = Literal["government", "regulatory", "academic", "news_major", "corporate",
                          "news_trade", "wiki", "blog", "unknown"]
VerificationStatus = Literal["verified", "partially_verified", "unverified"]

AUTHORITY_WEIGHTS: Mapping[str, float] = MappingProxyType({
    "government": 1.0,
    "regulatory": 1.0,
    "academic": 0.95,
    "news_major": 0.8,
    "corporate": 0.75,
    "news_trade": 0.7,
    "wiki": 0.6,
    "blog": 0.3,
    "unknown": 0.2,
})
HALF_LIFE_DAYS = 365.0
UNKNOWN_DATE_WEIGHT = 0.5


def authority_weight(authority: str | float | None) -> float:
    """Weight for an authority name (unknown names → ``unknown``) or a number in [0, 1]
    (also as text, e.g. ``"0.8"``); out-of-range numbers are clipped."""
    if isinstance(authority, int | float):
        return min(1.0, max(0.0, float(authority)))
    if authority is None:
        return AUTHORITY_WEIGHTS["unknown"]
    name = authority.strip().lower()
    if name in AUTHORITY_WEIGHTS:
        return AUTHORITY_WEIGHTS[name]
    try:  # a number written as text, e.g. a block attribute authority="0.8"
        return min(1.0, max(0.0, float(name)))
    except ValueError:
        return AUTHORITY_WEIGHTS["unknown"]


def parse_date(value: str | date | None) -> date | None:
    """An ISO date / datetime (``2024``, ``2024-05``, ``2024-05-01``, ``…T12:00Z``) or None."""
    if value is None or isinstance(value, date):
        return value.date() if isinstance(value, datetime) else value
    text = value.strip()
    if not text:
        return None
    try:
        if len(text) == 4 and text.isdigit():
            return date(int(text), 1, 1)
        if len(text) == 7 and text[4] == "-":
            return date(int(text[:4]), int(text[5:]), 1)
        return datetime.fromisoformat(text.replace("Z", "+00:00")).date()
    except ValueError:
        return None


def recency_weight(published: str | date | None, now: date | None = None,
                   half_life_days: float = HALF_LIFE_DAYS) -> float:
    """``exp(-ln2 · age_days / half_life)``; unknown date → 0.5; future → 1.0."""
    when = parse_date(published)
    if when is None:
        return UNKNOWN_DATE_WEIGHT
    today = now or datetime.now(UTC).date()
    age_days = (today - when).days
    if age_days <= 0:
        return 1.0
    return math.exp(-math.log(2) * age_days / half_life_days)


@dataclass(frozen=True, slots=True)
class BoundSource:
    """One source bound to a claim (seed 001 ``CitedSource``, trimmed)."""

    id: str
    relevance: float
    """0–1: how well the source text matches the claim."""
    authority: float = AUTHORITY_WEIGHTS["unknown"]
    """0–1 weight (see :func:`authority_weight`)."""
    recency: float = UNKNOWN_DATE_WEIGHT
    """0–1 weight (see :func:`recency_weight`)."""


def aggregated_confidence(sources: Iterable[BoundSource]) -> float:
    """``min(1, Σ relevance·authority·recency / sqrt(N))``; 0 with no sources."""
    items = list(sources)
    if not items:
        return 0.0
    total = sum(s.relevance * s.authority * s.recency for s in items)
    return min(1.0, total / math.sqrt(len(items)))


def verification_status(confidence: float, verified_at: float = 0.7,
                        partial_at: float = 0.3) -> VerificationStatus:
    """Map a confidence to seed 001's three statuses."""
    if confidence >= verified_at:
        return "verified"
    if confidence >= partial_at:
        return "partially_verified"
    return "unverified"


def repair_feedback(failed_claims: Sequence[str], max_claims: int = 10,
                    max_chars: int = 300) -> str:
    """Seed 001's repair prompt for claims that could not be verified.

    Returns a message for the policy engine's ``regenerate`` action: it lists
    the failed claims (at most ``max_claims``, each cut to ``max_chars``) and
    asks the model to cite a supporting source, correct the claim, or rephrase
    it as opinion. Returns ``""`` when there is nothing to repair.
    """
    claims = [" ".join(c.split()) for c in failed_claims if c.strip()]
    if not claims:
        return ""
    lines = []
    for i, claim in enumerate(claims[:max_claims], 1):
        if len(claim) > max_chars:
            claim = claim[: max_chars - 1].rstrip() + "…"
        lines.append(f'{i}. "{claim}"')
    if len(claims) > max_claims:
        lines.append(f"(and {len(claims) - max_claims} more)")
    return (
        "Your previous answer contains claims that could not be verified against the "
        "provided sources:\n" + "\n".join(lines) + "\n\n"
        "Rewrite the answer. For each claim listed above, do one of the following:\n"
        "- cite a provided source that supports it, using the citation format of the sources;\n"
        "- correct it so that it matches the sources; or\n"
        "- if no source supports it, remove it or rephrase it clearly as opinion or "
        "uncertainty (for example \"I believe…\" or \"it may be that…\").\n"
        "Do not add new unsourced facts. Keep the parts of the answer that were supported."
    )
