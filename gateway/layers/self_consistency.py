"""``self-consistency`` layer: does a judge agree with the answer's claims however it is
asked? (seed 000 layer 4)

The answer's main claims — its first ``max_claims`` checkable sentences (three
content words, or a number) — are put to the judge under ``variations`` differently
worded prompts ("Verify each of these claims…", "Is each of the following statements
accurate given the context?", "Evaluate the truthfulness of…", "Would you agree
with…", "Rate the accuracy of…"), each with the grounding context when there is one
(else the judge's own knowledge) and the user's question. One call per variation
classifies every claim: ``{"results": [{"id", "agrees", "confidence"}]}``, asked by
schema (:func:`reply_schema`).

**Score** (seed 000): ``consistency rate × average confidence`` over every
(claim, variation) vote, where the rate is the share of votes that agree.
``passed`` iff *every* claim's own agreement rate is ``≥ min_consistency`` (seed:
0.8) — the seed's single-text rule applied per claim, so one claim the judge
rejects throughout is not averaged away by four good ones. ``failed_claims`` are
the claims below it. No checkable sentence: skipped, 0.5 (before the judge is
needed, so with no judge too).

Judge calls per request: ``variations`` (default 3; the seed uses 5), concurrent, at
``temperature`` (default 0: the same exchange again is served from the judge cache).
An unusable reply raises :class:`~gateway.layers.base.JudgeError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from pydantic import Field

from gateway.layers._judged import (
    CONFIDENCE,
    JudgeTally,
    ReplySchema,
    answer_claims,
    confidence,
    excerpt,
    numbered_items,
    numbered_schema,
    require_judge,
    settle,
    yes_no,
)
from gateway.layers.base import (
    Evidence,
    LayerConfig,
    LayerResources,
    LayerResult,
    VerifyInput,
)

__all__ = ["VARIATIONS", "SelfConsistencyConfig", "SelfConsistencyLayer", "reply_schema",
           "variation_prompt"]

NEUTRAL_SCORE = 0.5

VARIATIONS: tuple[tuple[str, str, str], ...] = (
    # (lead, with context, without context)
    ("Verify each of these claims", " against the context.", "."),
    ("Is each of the following statements accurate", " given the context?",
     " given what you know?"),
    ("Evaluate the truthfulness of each statement below", ", using the context.", "."),
    ("Would you agree with each of these assertions", ", given the context?", "?"),
    ("Rate the accuracy of each statement below", " in light of the context.", "."),
)
"""The seed's five prompt variations, reworded for numbered claims and a context."""

SYSTEM = "You check statements for accuracy and answer with strict JSON only."

_YES = {"true", "yes", "agree", "agrees", "accurate", "correct", "supported"}
_NO = {"false", "no", "disagree", "disagrees", "inaccurate", "incorrect", "unsupported"}


class SelfConsistencyConfig(LayerConfig):
    """Typed config of the ``self-consistency`` layer (unknown keys are errors)."""

    variations: int = Field(3, ge=1, le=len(VARIATIONS))
    """Prompt variations asked (judge calls per request)."""
    max_claims: int = Field(5, ge=1, le=50)
    """Answer sentences checked per request; the rest are not."""
    min_consistency: float = Field(0.8, ge=0.0, le=1.0)
    """Each claim's share of agreeing variations must reach this."""
    use_context: bool = True
    """Show the judge the grounding context (else: its own knowledge only)."""
    max_context_chars: int = Field(6000, ge=200)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    """Judge temperature (0: cacheable). An Anthropic judge (``judge.kind: anthropic``)
    is sent at most 1.0, the Messages API's limit: above 1 means 1 there."""
    max_tokens: int = Field(768, ge=64)


def variation_prompt(k: int, claims: Sequence[str], question: str,
                     context: str | None) -> list[dict[str, str]]:
    """Prompt variation ``k`` (0-based) over numbered ``claims``."""
    lead, with_ctx, without = VARIATIONS[k]
    parts = []
    if context:
        parts.append(f'Context:\n"""\n{context}\n"""')
    if question:
        parts.append(f"The question was: {question}")
    listed = "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))
    parts.append(f"{lead}{with_ctx if context else without}\n{listed}")
    parts.append("Answer with strict JSON only, one result per numbered statement:\n"
                 '{"results": [{"id": 1, "agrees": true | false, '
                 '"confidence": "high" | "medium" | "low"}]}')
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": "\n\n".join(parts)}]


def reply_schema(count: int) -> ReplySchema:
    """The reply :func:`variation_prompt` asks for, over ``count`` claims."""
    return numbered_schema("claim_checks", count, {"agrees": {"type": "boolean"},
                                                   "confidence": CONFIDENCE})


class SelfConsistencyLayer:
    """Ask the judge about the answer's claims several ways; measure its agreement."""

    name: ClassVar[str] = "self-consistency"
    Config: ClassVar[type[LayerConfig]] = SelfConsistencyConfig

    def __init__(self, config: SelfConsistencyConfig,
                 resources: LayerResources | None = None) -> None:
        self.config = config
        self.resources = resources or LayerResources()

    async def verify(self, inp: VerifyInput) -> LayerResult:
        cfg = self.config
        claims = answer_claims(inp.response_text, cfg.max_claims)
        if not claims:
            return LayerResult(score=NEUTRAL_SCORE, passed=True, skipped=True, label="skipped",
                               explanation="nothing to check: no checkable answer sentence")
        # Only now is the judge needed: nothing to check is skipped with or without one.
        tally = JudgeTally(require_judge(self.resources), inp.model)
        context, cut = (excerpt(inp.context.text, claims, cfg.max_context_chars)
                        if cfg.use_context and inp.context else ("", False))
        question = inp.question[:2000]
        prompts = [variation_prompt(k, claims, question, context or None)
                   for k in range(cfg.variations)]
        schema = reply_schema(len(claims))
        votes = await settle([
            tally.ask_parsed(p, lambda data: _votes(data, len(claims)), schema=schema,
                             temperature=cfg.temperature, max_tokens=cfg.max_tokens)
            for p in prompts])
        result = self._result(claims, votes, bool(context))
        result.details["truncated"] = cut
        return tally.account(result)

    def _result(self, claims: list[str], votes: list[list[tuple[bool, float, str]]],
                with_context: bool) -> LayerResult:
        cfg = self.config
        k = len(votes)
        evidence: list[Evidence] = []
        failed: list[str] = []
        per_claim: list[dict[str, object]] = []
        agreements = 0
        for i, claim in enumerate(claims):
            mine = [v[i] for v in votes]
            agree = sum(a for a, _, _ in mine)
            agreements += agree
            rate = agree / k
            conf = sum(c for _, c, _ in mine) / k
            ok = rate >= cfg.min_consistency
            if not ok:
                failed.append(claim)
            against = next((r for a, _, r in mine if not a and r), "")
            evidence.append(Evidence(
                text=claim, status="consistent" if ok else "inconsistent",
                score=round(rate * conf, 4),
                reason=f"{agree}/{k} variations agree" + (f"; {against}" if against else "")))
            per_claim.append({"claim": claim, "agreements": agree, "rate": round(rate, 4),
                              "confidence": round(conf, 4),
                              "reasons": [r for _, _, r in mine]})
        total = k * len(claims)
        rate = agreements / total
        avg_conf = sum(c for v in votes for _, c, _ in v) / total
        score = rate * avg_conf
        basis = "the context" if with_context else "the judge's own knowledge"
        return LayerResult(
            score=min(1.0, max(0.0, score)), passed=not failed,
            label="consistent" if not failed else "inconsistent",
            explanation=(f"{len(claims)} claims × {k} variations against {basis}: "
                         f"{agreements}/{total} agree (rate {rate:.2f}, confidence "
                         f"{avg_conf:.2f})" + (f"; {len(failed)} below {cfg.min_consistency}"
                                               if failed else "")),
            evidence=evidence, failed_claims=failed,
            details={"variations": k, "agreements": agreements, "consistency_rate": rate,
                     "avg_confidence": avg_conf, "claims": per_claim})


def _agrees(item: Mapping[str, object], n: int) -> bool:
    return yes_no(item.get("agrees", item.get("accurate", item.get("verdict"))), _YES, _NO,
                  f"'agrees' for statement {n}")


def _votes(data: object, count: int) -> list[tuple[bool, float, str]]:
    items = numbered_items(data, count)
    return [(_agrees(items[n], n), confidence(items[n]),
             str(items[n].get("reason", items[n].get("reasoning", "")))[:300])
            for n in range(1, count + 1)]
