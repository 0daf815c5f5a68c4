"""Seed 000: the model-free risk assessor.

The levels and their profiles are policy data: :mod:`gateway.policy.profiles`.

Assessor
--------
:func:`assess_heuristic` ports the seed's regexes (critical: medical / legal /
financial; high: code execution / credentials; low: under 100 characters and no
digit) and returns ``None`` when undecided. The seed then asks an LLM;
:func:`assess_risk` never calls a model. Precedence: critical and high words
first; then a regulatory reference found by the claims detector
(:func:`gateway.text.claims.detect_claims`) gives ``high``;
only then the short-answer shortcut gives ``low``; undecided text is ``medium``,
raised to ``high`` at ``many_quantitative`` or more quantitative claims.

Deviation from the seed: the seed returns ``low`` for a short digit-free answer
before anything else is considered (its LLM never sees it). The regulatory
check is our stand-in for that LLM, and a short regulatory claim ("Under ITAR,
exporting defense articles requires a State Department license.") must not be
``low``, or a policy such as ``compliance.yaml`` never requires its citation.
So the regulatory reference is checked before the shortcut; the quantitative
count still comes after it, as before.

Deviation from the seed: its patterns end every alternative with ``\\b``, so
``medic`` never matched "medical" and ``diagnos`` never matched "diagnosis". We
match the stems as intended (``medic\\w*``, ``diagnos\\w*``, ``prescri\\w*``,
``invest(ing|ment|or…)``, ``exec(ute|ution…)``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gateway.policy.profiles import RiskLevel
from gateway.text.claims import detect_claims

__all__ = ["assess_heuristic", "assess_risk", "claim_types"]

_CRITICAL = re.compile(
    r"\b(?:diagnos\w*|prescri\w*|medic\w*|dosages?|treatments?)\b"
    r"|\b(?:legal advice|lawsuits?|liabilit(?:y|ies)|statutes?)\b"
    r"|\b(?:invest(?:s|ed|ing|ment|ments|or|ors)?|financial advice|stocks?|portfolios?)\b",
    re.IGNORECASE,
)
_HIGH = re.compile(
    r"\b(?:sudo|rm -rf|chmod|exec(?:ute|utes|uting|ution)?|eval)\b"
    r"|\b(?:passwords?|secrets?|api.?keys?|credentials?)\b",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")


def assess_heuristic(text: str) -> RiskLevel | None:
    """The seed's fast regex pre-check: a level, or ``None`` when undecided."""
    if _CRITICAL.search(text):
        return "critical"
    if _HIGH.search(text):
        return "high"
    if len(text) < 100 and not _DIGIT.search(text):
        return "low"
    return None


def claim_types(text: str) -> list[str]:
    """Claim types per claim found by :func:`gateway.text.claims.detect_claims`.

    One entry per claim and kind (a claim with a regulation and a number gives
    both).
    """
    out: list[str] = []
    for claim in detect_claims(text):
        out += [str(t) for t in claim.types]
    return out


def assess_risk(text: str, *, many_quantitative: int = 3,
                detector: Callable[[str], list[str] | None] = claim_types) -> RiskLevel:
    """A risk level for ``text`` with no model call (see the module docstring).

    ``detector`` returns the claim types in ``text`` (``None``: no detector, as if
    it found none); it defaults to :func:`claim_types`.
    """
    level = assess_heuristic(text)
    if level is not None and level != "low":
        return level  # critical / high domain words
    # A regulatory reference outranks the short-answer shortcut: "Under ITAR, …
    # requires a … license." is short and digit-free but must not be ``low``.
    types = detector(text)
    if types and "regulatory" in types:
        return "high"
    if level == "low":
        return level
    if types and types.count("quantitative") >= many_quantitative:
        return "high"
    return "medium"
