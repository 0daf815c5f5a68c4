"""``fact-decomposition`` layer: atomic claims, each verified (seed 000 layer 2).

Per request:

1. **Decompose** (one judge call) — the judge splits the answer into atomic claims,
   each typed ``factual`` / ``opinion`` / ``inference`` / ``uncertain`` (prompt and
   reply schema: :mod:`gateway.layers._fact_decomposition_prompts`). Only the
   ``factual`` ones are verified, at most ``max_claims``.
2. **Factual memory** (model-free) — the seed checks each claim against its fact
   store first; ours is the request's grounding context and the policy's corpus,
   through the grounding layer's own sentence check
   (:func:`gateway.layers.grounding.check_sentence` on the request's shared
   :func:`~gateway.text.index.context_index`, and on an index of the corpus built
   once per layer). A claim that check calls ``supported`` *and* whose best source
   sentence covers at least ``support_coverage`` of its (IDF-weighted) words is
   **verified with no judge call** (source ``context`` or ``corpus``).
3. **Check** (one judge call, only when some factual claim is left) — the remaining
   claims, numbered, with the context cut to its sentences most relevant to them;
   the judge answers ``verified`` true / false with a confidence (source ``judge``).

**Score** = verified share of the factual claims (seed 000: ``passRate``);
``passed`` iff it is at least ``min_verified`` (seed: 0.9). The unverified claims are
``failed_claims`` (what ``regenerate`` / ``decompose-and-retry`` feed back).
``details`` holds counts and one entry per factual claim (its number, type, source,
source id, confidence), never claim text: the claims are answer content, which only
``failed_claims`` and ``evidence`` carry (the outcome records failed claims only when
the policy records content). Nothing checkable in the answer: skipped before any
judge call; the judge finds no factual claim: skipped (the call is accounted).
Judge calls per request: 1 (everything supported by context or corpus) or 2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field

from gateway.layers._corpus_index import CorpusIndex
from gateway.layers._fact_decomposition_prompts import (
    CHECK_SYSTEM,
    CLAIM_TYPES,
    DECOMPOSE_SCHEMA,
    DECOMPOSE_SYSTEM,
    check_prompt,
    check_schema,
    decompose_prompt,
)
from gateway.layers._judged import (
    JudgeTally,
    answer_claims,
    confidence,
    excerpt,
    numbered_items,
    parse_json_reply,
    require_judge,
    yes_no,
)
from gateway.layers.base import (
    Evidence,
    JudgeError,
    LayerConfig,
    LayerResources,
    LayerResult,
    VerifyInput,
)
from gateway.layers.grounding import GroundingConfig, check_sentence
from gateway.redact import shape
from gateway.text.index import TextIndex, context_index
from gateway.text.tokens import content_words, tokenize

__all__ = ["FactDecompositionConfig", "FactDecompositionLayer", "parse_claims", "read_claims"]

NEUTRAL_SCORE = 0.5
MAX_CLAIM_CHARS = 400
"""A longer "claim" from the judge is cut (it is not atomic anyway)."""
MAX_ITEMS = 100
"""Items read from a decompose reply, whatever it holds."""
ClaimType = Literal["factual", "opinion", "inference", "uncertain"]
Source = Literal["context", "corpus", "judge"]
_TYPES: dict[str, ClaimType] = {
    "factual": "factual", "opinion": "opinion", "inference": "inference",
    "uncertain": "uncertain",
    "fact": "factual", "facts": "factual", "factual claim": "factual",
    "subjective": "opinion", "judgement": "opinion", "judgment": "opinion",
    "inferred": "inference", "conclusion": "inference",
    "hedged": "uncertain", "speculative": "uncertain", "speculation": "uncertain",
    "unsure": "uncertain",
}
_YES = ("true", "yes", "verified", "accurate", "correct", "supported")
_NO = ("false", "no", "unverified", "inaccurate", "incorrect", "wrong", "unsupported",
       "unknown")


class FactDecompositionConfig(LayerConfig):
    """Typed config of the ``fact-decomposition`` layer (unknown keys are errors)."""

    max_claims: int = Field(12, ge=1, le=50)
    """Factual claims verified per answer (the first ones)."""
    min_verified: float = Field(0.9, ge=0.0, le=1.0)
    """``passed`` iff the verified share is at least this (seed 000: 0.9)."""
    use_context: bool = True
    """Verify claims against the request's grounding context before asking the judge
    (and show the judge the relevant context)."""
    use_corpus: bool = True
    """Verify claims against the policy's corpus (``context.corpus_dir``) too."""
    support_coverage: float = Field(0.8, ge=0.0, le=1.0)
    """A claim the grounding check supports is verified without the judge when its best
    source sentence covers this IDF-weighted share of its words."""
    max_answer_chars: int = Field(4000, ge=200, le=50_000)
    """The answer is cut to this in the decompose prompt."""
    max_context_chars: int = Field(4000, ge=200, le=50_000)
    """Context shown to the checking judge: its sentences most relevant to the claims."""
    max_tokens: int = Field(1024, ge=64, le=16_384)
    """Reply budget per judge call."""


@dataclass(slots=True)
class _Claim:
    n: int
    text: str
    kind: ClaimType
    verified: bool = False
    source: Source | None = None
    source_id: str | None = None
    source_span: str | None = None
    confidence: float = 0.0
    reason: str = ""


def parse_claims(text: str) -> list[tuple[str, ClaimType]]:
    """:func:`read_claims` of a reply text."""
    return read_claims(parse_json_reply(text))


def read_claims(data: Any) -> list[tuple[str, ClaimType]]:
    """``(claim, type)`` from a decompose reply's JSON: ``{"claims": [...]}`` (the
    seed's ``{"facts": [...]}`` and a bare list too). A type outside the four (and their
    synonyms) is a :class:`JudgeError`; an item without claim text is left out."""
    items = data if isinstance(data, list) else (
        data.get("claims", data.get("facts")) if isinstance(data, Mapping) else None)
    if not isinstance(items, list):
        raise JudgeError(f"decompose reply has no 'claims' list (got {shape(data)})")
    out: list[tuple[str, ClaimType]] = []
    for item in items[:MAX_ITEMS]:
        if not isinstance(item, Mapping):
            continue
        raw = item.get("claim", item.get("text", item.get("statement")))
        if not isinstance(raw, str) or not raw.strip():
            continue
        label = str(item.get("type", item.get("label", ""))).strip().lower()
        kind = _TYPES.get(label)
        if kind is None:
            raise JudgeError(f"decompose reply has an unknown claim type ({shape(label)})")
        out.append((" ".join(raw.split())[:MAX_CLAIM_CHARS], kind))
    return out


class FactDecompositionLayer:
    """Seed 000 fact decomposition (see the module docstring)."""

    name: ClassVar[str] = "fact-decomposition"
    Config: ClassVar[type[LayerConfig]] = FactDecompositionConfig

    def __init__(self, config: FactDecompositionConfig,
                 resources: LayerResources | None = None) -> None:
        self.config = config
        self.resources = resources or LayerResources()
        self._corpus = CorpusIndex()

    async def _corpus_index(self, corpus: Mapping[str, str]) -> TextIndex | None:
        if not corpus or not self.config.use_corpus:
            return None
        return await self._corpus.of(corpus)

    async def verify(self, inp: VerifyInput) -> LayerResult:
        cfg = self.config
        if not answer_claims(inp.response_text, 1):
            return LayerResult(score=NEUTRAL_SCORE, passed=True, skipped=True,
                               label="skipped",
                               explanation="nothing to check: no checkable answer sentence")
        tally = JudgeTally(require_judge(self.resources), inp.model)
        answer = inp.response_text[: cfg.max_answer_chars]
        typed = await tally.ask_parsed(
            [{"role": "system", "content": DECOMPOSE_SYSTEM},
             {"role": "user", "content": decompose_prompt(
                 answer, inp.question[: cfg.max_answer_chars])}],
            read_claims, schema=DECOMPOSE_SCHEMA, max_tokens=cfg.max_tokens)
        kinds = {k: sum(1 for _, t in typed if t == k) for k in CLAIM_TYPES}
        claims = [_Claim(i, c, t) for i, (c, t) in
                  enumerate([x for x in typed if x[1] == "factual"][: cfg.max_claims], 1)]
        if not claims:
            return tally.account(LayerResult(
                score=NEUTRAL_SCORE, passed=True, skipped=True, label="no_factual_claims",
                explanation=f"no factual claim among {len(typed)} claim(s)",
                details={"claims_total": len(typed), "types": kinds}))
        corpus = inp.context.corpus or self.resources.corpus
        corpus_index = await self._corpus_index(corpus)
        for c in claims:
            self._from_memory(c, inp, corpus_index)
        rest = [c for c in claims if c.source is None]
        if rest:
            await self._check(tally, rest, inp)
        return tally.account(self._result(claims, typed, kinds))

    # -- factual memory: the context and the corpus ----------------------------------

    def _from_memory(self, claim: _Claim, inp: VerifyInput,
                     corpus_index: TextIndex | None) -> None:
        words = content_words(tokenize(claim.text))
        if not words:
            return
        places: list[tuple[Source, TextIndex]] = []
        if inp.context and self.config.use_context:
            places.append(("context", context_index(inp.context)))
        if corpus_index is not None:
            places.append(("corpus", corpus_index))
        for source, index in places:
            best = index.best_matches(words, 1)
            if not best or best[0].coverage < self.config.support_coverage:
                continue
            check = check_sentence(claim.text, index, None, GroundingConfig())
            if check.status != "supported":
                continue
            sentence = index.sentences[best[0].sentence]
            claim.verified, claim.source = True, source
            claim.source_id, claim.source_span = sentence.doc_id, sentence.text
            claim.confidence = round(best[0].coverage, 4)
            claim.reason = f"supported by the {source} (coverage {best[0].coverage:.2f})"
            return

    # -- the judge for the rest ----------------------------------------------------

    async def _check(self, tally: JudgeTally, claims: Sequence[_Claim],
                     inp: VerifyInput) -> None:
        cfg = self.config
        texts = [c.text for c in claims]
        context = ""
        if inp.context and cfg.use_context:
            context, _ = excerpt(inp.context.text, texts, cfg.max_context_chars)
        items = await tally.ask_parsed(
            [{"role": "system", "content": CHECK_SYSTEM},
             {"role": "user", "content": check_prompt(texts, context)}],
            lambda data: numbered_items(data, len(claims)),
            schema=check_schema(len(claims)), max_tokens=cfg.max_tokens)
        for n, c in enumerate(claims, 1):
            item = items[n]
            c.verified = yes_no(item.get("verified", item.get("accurate")), _YES, _NO,
                                "verified verdict")
            c.source, c.confidence = "judge", confidence(item)
            c.reason = str(item.get("reason", ""))[:300]  # prompt-only replies may give one

    # -- the result --------------------------------------------------------------------

    def _result(self, claims: list[_Claim], typed: Sequence[tuple[str, ClaimType]],
                kinds: Mapping[str, int]) -> LayerResult:
        verified = [c for c in claims if c.verified]
        share = len(verified) / len(claims)
        passed = share >= self.config.min_verified
        by_source = {s: sum(1 for c in claims if c.source == s)
                     for s in ("context", "corpus", "judge")}
        failed = [c.text for c in claims if not c.verified]
        details: dict[str, Any] = {
            "claims_total": len(typed), "types": dict(kinds), "factual": len(claims),
            "verified": len(verified), "pass_rate": round(share, 4),
            "by_source": by_source,
            "claims": [{"n": c.n, "type": c.kind, "verified": c.verified,
                        "source": c.source, "source_id": c.source_id,
                        "confidence": c.confidence} for c in claims]}
        label = ("verified" if len(verified) == len(claims)
                 else "unverified" if not verified else "partial")
        return LayerResult(
            score=share, passed=passed, label=label,
            explanation=(f"{len(verified)} of {len(claims)} factual claim(s) verified "
                         f"({by_source['context']} by the context, {by_source['corpus']} "
                         f"by the corpus, {by_source['judge']} by the judge)"
                         + ("" if passed else
                            f"; below {self.config.min_verified:g}")),
            evidence=[Evidence(text=c.text, status="verified" if c.verified else "unverified",
                               source_id=c.source_id, source_span=c.source_span,
                               score=c.confidence, reason=c.reason) for c in claims],
            failed_claims=failed, details=details)
