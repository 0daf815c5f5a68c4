"""Seed 000: risk levels and risk profiles (data a policy's ``risk`` section reads).

Risk levels, lowest to highest: ``low``, ``medium``, ``high``, ``critical``.

The seed's profiles name its five model-based layers, all registered
(``gateway.layers.registry``), behind our model-free layers, which run first
because they cost about a millisecond and need no judge. A profile never drops a
layer silently: :meth:`RiskProfile.runnable` raises :class:`ProfileLayerError`,
naming the profile and the layers, when a registry lacks one of its layers (and
a policy's own ``risk.profiles`` may only name layers of that policy, a load-time
error naming the profile: ``gateway.policy.models``):

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

__all__ = ["MODEL_FREE_LAYERS", "RISK_LEVELS", "RISK_PROFILES", "ProfileLayerError", "RiskLevel",
           "RiskProfile"]

RiskLevel = Literal["low", "medium", "high", "critical"]
RISK_LEVELS: tuple[RiskLevel, ...] = ("low", "medium", "high", "critical")
MODEL_FREE_LAYERS: tuple[str, ...] = ("claims", "grounding", "citations")


class ProfileLayerError(ValueError):
    """A risk profile names a layer the registry does not know (the message names
    the profile and every such layer)."""


@dataclass(frozen=True, slots=True)
class RiskProfile:
    layers: tuple[str, ...]
    """Layer names to run, model-free first."""
    min_confidence: float
    max_latency_ms: int
    max_cost: float
    """USD."""
    level: str = ""
    """The level it is the profile of (named in errors)."""

    def missing(self, known: Iterable[str]) -> tuple[str, ...]:
        """The profile's layers that ``known`` (e.g. ``LayerRegistry.known()``) lacks."""
        names = set(known)
        return tuple(n for n in self.layers if n not in names)

    def runnable(self, known: Iterable[str]) -> tuple[str, ...]:
        """The profile's layers, in order, when ``known`` has every one of them; else
        :class:`ProfileLayerError` naming the profile and the missing layers (never a
        shorter profile: a "high" request would silently run less than "high")."""
        missing = self.missing(known)
        if missing:
            raise ProfileLayerError(
                f"risk profile {self.level or '?'!r} names layers that are not registered: "
                f"{', '.join(missing)}")
        return self.layers


RISK_PROFILES = MappingProxyType({
    "low": RiskProfile(MODEL_FREE_LAYERS + ("semantic-entropy",), 0.7, 2_000, 0.001, "low"),
    "medium": RiskProfile(MODEL_FREE_LAYERS + ("semantic-entropy", "fact-decomposition"),
                          0.8, 5_000, 0.01, "medium"),
    "high": RiskProfile(MODEL_FREE_LAYERS + ("semantic-entropy", "fact-decomposition",
                                             "multi-source", "self-consistency"),
                        0.9, 10_000, 0.05, "high"),
    "critical": RiskProfile(MODEL_FREE_LAYERS + ("semantic-entropy", "fact-decomposition",
                                                 "multi-source", "self-consistency", "nli"),
                            0.95, 30_000, 0.1, "critical"),
})
