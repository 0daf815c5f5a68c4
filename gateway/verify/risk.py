"""Seed 000: risk levels, risk profiles, and the model-free risk assessor.

Risk levels, lowest to highest: ``low``, ``medium``, ``high``, ``critical``.

Risk profiles
-------------
The seed's profiles name its five model-based layers. We keep those names as
strings (they are not registered layers yet; :meth:`RiskProfile.runnable`
keeps only the names a registry knows) and put our model-free layers in front
of every profile, because they cost about a millisecond and need no judge:

=====================  ===========================================================
seed layer             our model-free counterpart (runs first, always)
=====================  ===========================================================
``semantic-entropy``   ``claims`` — finds the checkable claims entropy would probe
``fact-decomposition`` ``grounding`` — each answer claim against the request context
``multi-source``       ``citations`` — cited claims against their sources (+ corpus)
``self-consistency``   — (model only)
``nli``                — (model only; may consume ``citations`` ``details["pairs"]``)
=====================  ===========================================================

=========  ==============================================================  ====  ======  =====
level      layers                                                          min   ms      cost
=========  ==============================================================  ====  ======  =====
low        claims, grounding, citations, semantic-entropy                  0.70  2000    0.001
medium     … + fact-decomposition                                          0.80  5000    0.01
high       … + multi-source, self-consistency                              0.90  10000   0.05
critical   … + nli                                                         0.95  30000   0.1
=========  ==============================================================  ====  ======  =====

Assessor
--------
:func:`assess_heuristic` ports the seed's regexes (critical: medical / legal /
financial; high: code execution / credentials; low: under 100 characters and no
digit) and returns ``None`` when undecided. The seed then asks an LLM;
:func:`assess_risk` never calls a model. Precedence: critical and high words
first; then a regulatory reference found by the claims detector
(``gateway.layers.claims``, imported lazily; skipped if absent) gives ``high``;
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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = [
    "MODEL_FREE_LAYERS",
    "RISK_LEVELS",
    "RISK_PROFILES",
    "RiskLevel",
    "RiskProfile",
    "assess_heuristic",
    "assess_risk",
    "claim_types",
]

RiskLevel = Literal["low", "medium", "high", "critical"]
RISK_LEVELS: tuple[RiskLevel, ...] = ("low", "medium", "high", "critical")
MODEL_FREE_LAYERS: tuple[str, ...] = ("claims", "grounding", "citations")


@dataclass(frozen=True, slots=True)
class RiskProfile:
    layers: tuple[str, ...]
    """Layer names to run, model-free first."""
    min_confidence: float
    max_latency_ms: int
    max_cost: float
    """USD."""

    def runnable(self, known: Iterable[str]) -> tuple[str, ...]:
        """The profile's layers that ``known`` (e.g. ``registry.known()``) contains."""
        names = set(known)
        return tuple(n for n in self.layers if n in names)


RISK_PROFILES = MappingProxyType({
    "low": RiskProfile(MODEL_FREE_LAYERS + ("semantic-entropy",), 0.7, 2_000, 0.001),
    "medium": RiskProfile(MODEL_FREE_LAYERS + ("semantic-entropy", "fact-decomposition"),
                          0.8, 5_000, 0.01),
    "high": RiskProfile(MODEL_FREE_LAYERS + ("semantic-entropy", "fact-decomposition",
                                             "multi-source", "self-consistency"),
                        0.9, 10_000, 0.05),
    "critical": RiskProfile(MODEL_FREE_LAYERS + ("semantic-entropy", "fact-decomposition",
                                                 "multi-source", "self-consistency", "nli"),
                            0.95, 30_000, 0.1),
})

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


def claim_types(text: str) -> list[str] | None:
    """Claim types per claim found by ``gateway.layers.claims.detect_claims``.

    One entry per claim and kind (a claim with a regulation and a number gives
    both). ``None`` when the claims module is not importable.
    """
    try:
        from gateway.layers.claims import detect_claims
    except ImportError:
        return None
    out: list[str] = []
    for claim in detect_claims(text):
        out += [str(t) for t in claim.types]
    return out


def assess_risk(text: str, *, many_quantitative: int = 3,
                detector: Callable[[str], list[str] | None] = claim_types) -> RiskLevel:
    """A risk level for ``text`` with no model call (see the module docstring).

    ``detector`` returns the claim types in ``text`` (or ``None`` when no claims
    detector is available); it defaults to :func:`claim_types`.
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
