"""``claims`` layer: seed 001's factual claim detector as a verification layer.

The detector itself (:func:`~gateway.text.claims.detect_claims`, shared with the
``fact-check`` layer and the risk assessor) is in :mod:`gateway.text.claims`.

The :class:`ClaimsLayer` needs no context: its score is the share of claims that
are *not* assertive-verifiable (1.0 when there are none) — a measure of how much
unsourced factual assertion an answer carries, not of whether it is true.
``passed`` is ``score >= threshold``; the default threshold 0.0 makes the layer
informational until a policy sets one.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from gateway.layers.base import Evidence, LayerConfig, LayerResources, LayerResult, VerifyInput
from gateway.text.answer import answer_sentences
from gateway.text.claims import CLAIM_TYPES, detect_claims
from gateway.text.claims_brief import brief_claims

__all__ = ["ClaimsConfig", "ClaimsLayer"]


_EXPLANATION = ("{} claim(s): {} verifiable, {} hedged, {} opinion; types "
                + ", ".join(f"{t}={{}}" for t in CLAIM_TYPES))
"""The result's explanation: the claims, per classification, per type (in CLAIM_TYPES
order; one format call, not a join of a generator)."""


class ClaimsConfig(LayerConfig):
    """Typed config of the ``claims`` layer (unknown keys are errors)."""

    threshold: float = Field(0.0, ge=0.0, le=1.0)
    """``passed`` iff score >= threshold; 0.0 = informational."""
    min_claims: int = Field(1, ge=0)
    """Fewer factual claims than this: score 1.0 (nothing worth judging)."""
    max_evidence: int = Field(20, ge=0)


class ClaimsLayer:
    """Detects and classifies factual claims (see module doc); no context needed."""

    name: ClassVar[str] = "claims"
    cpu_only: ClassVar[bool] = True
    Config: ClassVar[type[LayerConfig]] = ClaimsConfig

    def __init__(self, config: ClaimsConfig, resources: LayerResources) -> None:
        self.config = config
        self.resources = resources

    async def verify(self, inp: VerifyInput) -> LayerResult:
        cfg = self.config
        text = inp.response_text
        analyzed = answer_sentences(inp.context, text)
        if inp.brief:  # no evidence: neither the entities nor their types are read
            claims = []
            rows = brief_claims(text, analyzed)
        else:
            claims = detect_claims(text, analyzed)
            rows = [(c.text, c.types, c.classification) for c in claims]
        by_class = {"verifiable": 0, "hedged": 0, "opinion": 0}
        by_type = dict.fromkeys(CLAIM_TYPES, 0)
        factual = 0
        assertive: list[str] = []  # factual and verifiable: what needs verification
        for claim, types, classification in rows:
            by_class[classification] += 1
            if types:
                factual += 1
                for t in types:
                    by_type[t] += 1
                if classification == "verifiable":
                    assertive.append(claim)
        score = 1.0 if factual < max(1, cfg.min_claims) else 1.0 - len(assertive) / factual
        passed = score >= cfg.threshold
        evidence = [] if inp.brief else [
            Evidence(text=c.text, status=c.classification, score=None,
                     reason=f"{', '.join(c.types) or 'opinion'}: "
                            + "; ".join(f"{e.type} {e.text}" for e in c.entities))
            for c in claims[: cfg.max_evidence]
        ]
        return LayerResult(
            score=score, passed=passed,
            label="no_claims" if not rows else "assertive" if assertive else "qualified",
            explanation=_EXPLANATION.format(len(rows), by_class["verifiable"],
                                            by_class["hedged"], by_class["opinion"],
                                            *by_type.values()),
            evidence=evidence,
            failed_claims=list(assertive) if not passed else [],
            details={} if inp.brief else {
                "claims": len(claims), "by_classification": by_class, "by_type": by_type,
                "needs_verification": assertive},
        )
