"""Seed 000: risk levels and risk profiles (data a policy's ``risk`` section reads).

Risk levels, lowest to highest: ``low``, ``medium``, ``high``, ``critical``.

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

The assessor that picks a level for ``risk.level: assess`` is
:func:`gateway.verify.risk.assess_risk`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = ["MODEL_FREE_LAYERS", "RISK_LEVELS", "RISK_PROFILES", "RiskLevel", "RiskProfile"]

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
        """The profile's layers that ``known`` (e.g. ``LayerRegistry.known()``) contains."""
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
