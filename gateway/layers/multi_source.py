"""``multi-source`` layer: each claim checked against every source (seed 000 layer 3).

Per request:

1. **Claims** — the answer's checkable sentences (three content words, or a number),
   the first ``max_claims``.
2. **Sources** — every request document (grounding context), the corpus entries
   most relevant to the claims (at most ``max_corpus_sources``), and, with
   ``second_model``, a second judge model answering from its own knowledge. A text
   source is *about* a claim when one of its sentences covers at least
   ``min_overlap`` of the claim's (IDF-weighted) words; a source about no claim is
   not a source for this answer. At most ``max_sources`` text sources (the most
   relevant). A claim with fewer than ``min_supporting`` sources about it cannot meet
   the seed's rule: it is **insufficient**, not failed; when no claim has enough, the
   layer is skipped with the seed's "insufficient sources" — decided before any judge
   call.
3. **Checks** — one judge call per text source (its text cut to the sentences most
   relevant to its claims, and the claims it is about, numbered) and one knowledge
   call to ``second_model``; each answers per claim ``supports`` true/false, a
   confidence and the evidence (prompts and reply schema:
   :mod:`gateway.layers._multi_source_prompts`). Calls run concurrently.
4. **Rule** (seed 000) per claim, over the sources about it: ``agreement`` = share of
   sources supporting it, ``confidence`` = mean confidence; it passes iff at least
   ``min_supporting`` sources support it and ``agreement ≥ min_agreement`` (0.6); its
   score is ``agreement × confidence``. **Weights** (seed 001, ``gateway.scoring.
   binding``): a source that carries an ``authority`` (document attribute, corpus
   metadata) weighs its authority weight, one that carries a ``published`` date its
   recency weight too; a source carrying neither weighs 1 (the seed's unweighted
   rule), the second model ``model_weight``. Agreement and confidence are then
   weighted means; ``min_supporting`` still counts sources.

Score: mean of the evaluated claims' scores; ``passed`` iff every evaluated claim
passes (the others are ``failed_claims``). ``details`` has per-source ids, origins
and weights and per-claim counts — no claim or source text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import Field

from gateway.layers._corpus_index import CorpusIndex
from gateway.layers._judged import (
    JudgeTally,
    answer_claims,
    confidence,
    excerpt,
    numbered_items,
    require_judge,
    settle,
    yes_no,
)
from gateway.layers._multi_source_prompts import (
    SYSTEM,
    knowledge_prompt,
    reply_schema,
    source_prompt,
)
from gateway.layers.base import Evidence, LayerConfig, LayerResources, LayerResult, VerifyInput
from gateway.scoring.binding import authority_weight, recency_weight
from gateway.text.index import TextIndex, context_index
from gateway.text.tokens import content_words, tokenize

__all__ = ["MultiSourceConfig", "MultiSourceLayer"]

NEUTRAL_SCORE = 0.5
MATCHES = 64
"""Best sentences looked at per claim when finding which sources are about it."""
Origin = Literal["document", "corpus", "model"]
_YES = ("true", "yes", "supports", "supported", "support", "accurate")
_NO = ("false", "no", "contradicts", "contradicted", "unsupported", "neutral", "unknown",
       "does not support")


class MultiSourceConfig(LayerConfig):
    """Typed config of the ``multi-source`` layer (unknown keys are errors)."""

    max_claims: int = Field(5, ge=1, le=30)
    """Answer sentences checked (the first ones)."""
    min_supporting: int = Field(2, ge=1, le=10)
    """Sources that must support a claim (seed 000: 2); fewer sources about it:
    insufficient."""
    min_agreement: float = Field(0.6, ge=0.0, le=1.0)
    """(Weighted) share of its sources that must support a claim (seed 000: 0.6)."""
    min_overlap: float = Field(0.3, ge=0.0, le=1.0)
    """A source is about a claim when one of its sentences covers this share of it."""
    use_documents: bool = True
    use_corpus: bool = True
    max_corpus_sources: int = Field(3, ge=0, le=20)
    max_sources: int = Field(6, ge=1, le=20)
    """Text sources checked (documents and corpus entries, most relevant first)."""
    second_model: str | None = None
    """A second judge model asked from its own knowledge, as one more source."""
    model_weight: float = Field(1.0, gt=0.0, le=1.0)
    weigh_sources: bool = True
    """Use the authority and recency a source carries (seed 001)."""
    max_source_chars: int = Field(3000, ge=200, le=50_000)
    """A source's text in its prompt: its sentences most relevant to the claims."""
    max_tokens: int = Field(1024, ge=64, le=16_384)


@dataclass(slots=True)
class _Source:
    id: str
    origin: Origin
    text: str
    weight: float
    relevance: float = 0.0
    claims: list[int] = field(default_factory=list)
    """Indexes of the claims it is about."""


@dataclass(slots=True)
class _Vote:
    source: _Source
    supports: bool
    confidence: float


def _weight(authority: object, published: object, use: bool) -> float:
    if not use:
        return 1.0
    w = 1.0
    if isinstance(authority, str | int | float) and not isinstance(authority, bool) \
            and str(authority).strip():
        w *= authority_weight(authority)
    if isinstance(published, str) and published.strip():
        w *= recency_weight(published)
    return w


def _coverage(index: TextIndex, claims: Sequence[str]) -> dict[str, dict[int, float]]:
    """Source id -> claim index -> best coverage of that claim by one of its sentences."""
    out: dict[str, dict[int, float]] = {}
    for i, claim in enumerate(claims):
        words = content_words(tokenize(claim))
        if not words:
            continue
        for m in index.best_matches(words, MATCHES):
            per = out.setdefault(index.sentences[m.sentence].doc_id, {})
            per[i] = max(per.get(i, 0.0), m.coverage)
    return out


class MultiSourceLayer:
    """Seed 000 multi-source verification (see the module docstring)."""

    name: ClassVar[str] = "multi-source"
    Config: ClassVar[type[LayerConfig]] = MultiSourceConfig

    def __init__(self, config: MultiSourceConfig,
                 resources: LayerResources | None = None) -> None:
        self.config = config
        self.resources = resources or LayerResources()
        self._corpus = CorpusIndex()

    async def _corpus_index(self, corpus: Mapping[str, str]) -> TextIndex | None:
        if not corpus or not self.config.use_corpus or not self.config.max_corpus_sources:
            return None
        return await self._corpus.of(corpus)

    async def _sources(self, inp: VerifyInput, claims: list[str]) -> list[_Source]:
        cfg = self.config
        found: list[_Source] = []
        if inp.context and cfg.use_documents:
            cover = _coverage(context_index(inp.context), claims)
            for doc in inp.context.documents:
                per = cover.get(doc.id, {})
                about = [i for i, c in sorted(per.items()) if c >= cfg.min_overlap]
                if about:
                    found.append(_Source(doc.id, "document", doc.text, _weight(
                        doc.attrs.get("authority"),
                        doc.attrs.get("published") or doc.attrs.get("date"),
                        cfg.weigh_sources), max(per.values()), about))
        corpus = inp.context.corpus or self.resources.corpus
        index = await self._corpus_index(corpus)
        if index is not None:
            meta = getattr(corpus, "meta", None) or {}
            ranked: list[_Source] = []
            for sid, per in _coverage(index, claims).items():
                about = [i for i, c in sorted(per.items()) if c >= cfg.min_overlap]
                if about and sid in corpus:
                    info = meta.get(sid)
                    ranked.append(_Source(sid, "corpus", corpus[sid], _weight(
                        getattr(info, "authority", None), getattr(info, "published", None),
                        cfg.weigh_sources), max(per.values()), about))
            ranked.sort(key=lambda s: (-s.relevance, s.id))
            found += ranked[: cfg.max_corpus_sources]
        found.sort(key=lambda s: -s.relevance)  # stable: documents first on ties
        found = found[: cfg.max_sources]
        if cfg.second_model:
            found.append(_Source(f"model:{cfg.second_model}", "model", "", cfg.model_weight,
                                 1.0, list(range(len(claims)))))
        return found

    async def verify(self, inp: VerifyInput) -> LayerResult:
        cfg = self.config
        claims = answer_claims(inp.response_text, cfg.max_claims)
        if not claims:
            return LayerResult(score=NEUTRAL_SCORE, passed=True, skipped=True, label="skipped",
                               explanation="nothing to check: no checkable answer sentence")
        sources = await self._sources(inp, claims)
        counts = [sum(1 for s in sources if i in s.claims) for i in range(len(claims))]
        checked = [i for i, n in enumerate(counts) if n >= cfg.min_supporting]
        details: dict[str, Any] = {
            "required": cfg.min_supporting, "available": len(sources),
            "sources": [{"id": s.id, "origin": s.origin, "weight": round(s.weight, 4),
                         "claims": len(s.claims)} for s in sources]}
        if not checked:
            return LayerResult(
                score=NEUTRAL_SCORE, passed=True, skipped=True, label="insufficient_sources",
                explanation=(f"insufficient sources: {len(sources)} available, no claim has "
                             f"the {cfg.min_supporting} sources needed"),
                details=details)
        tally = JudgeTally(require_judge(self.resources), inp.model)
        votes = await self._ask(tally, sources, claims, set(checked))
        return tally.account(self._result(claims, checked, counts, votes, details))

    async def _ask(self, tally: JudgeTally, sources: list[_Source], claims: list[str],
                   checked: set[int]) -> dict[int, list[_Vote]]:
        cfg = self.config
        asks: list[tuple[_Source, list[int]]] = [
            (s, [i for i in s.claims if i in checked]) for s in sources]
        asks = [(s, ids) for s, ids in asks if ids]

        async def one(source: _Source, ids: list[int]) -> list[_Vote]:
            texts = [claims[i] for i in ids]
            if source.origin == "model":
                user, override = knowledge_prompt(texts), cfg.second_model
            else:
                text, _ = excerpt(source.text, texts, cfg.max_source_chars)
                user, override = source_prompt(source.id, text, texts), None
            items = await tally.ask_parsed(
                [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
                lambda data: numbered_items(data, len(ids)), schema=reply_schema(len(ids)),
                max_tokens=cfg.max_tokens, override=override)
            return [_Vote(source, yes_no(items[n].get("supports"), _YES, _NO, "supports"),
                          confidence(items[n])) for n in range(1, len(ids) + 1)]

        answers = await settle([one(s, ids) for s, ids in asks])
        votes: dict[int, list[_Vote]] = {}
        for (_, ids), got in zip(asks, answers, strict=True):
            for i, vote in zip(ids, got, strict=True):
                votes.setdefault(i, []).append(vote)
        return votes

    def _result(self, claims: list[str], checked: list[int], counts: list[int],
                votes: Mapping[int, list[_Vote]], details: dict[str, Any]) -> LayerResult:
        cfg = self.config
        per_claim: list[dict[str, Any]] = []
        evidence: list[Evidence] = []
        failed: list[str] = []
        scores: list[float] = []
        for i, claim in enumerate(claims):
            if i not in checked:
                per_claim.append({"n": i + 1, "sources": counts[i], "status": "insufficient"})
                evidence.append(Evidence(text=claim, status="insufficient",
                                         reason=f"{counts[i]} source(s) about it"))
                continue
            vs = votes.get(i, [])
            total = sum(v.source.weight for v in vs) or 1.0
            supporting = [v for v in vs if v.supports]
            agreement = sum(v.source.weight for v in supporting) / total
            mean_conf = sum(v.source.weight * v.confidence for v in vs) / total
            ok = len(supporting) >= cfg.min_supporting and agreement >= cfg.min_agreement
            score = agreement * mean_conf
            scores.append(score)
            if not ok:
                failed.append(claim)
            per_claim.append({"n": i + 1, "sources": len(vs), "supporting": len(supporting),
                              "agreement": round(agreement, 4),
                              "mean_confidence": round(mean_conf, 4),
                              "score": round(score, 4), "status": "agreed" if ok
                              else "disputed"})
            best = max(supporting, key=lambda v: v.confidence, default=None)
            evidence.append(Evidence(
                text=claim, status="agreed" if ok else "disputed", score=round(score, 4),
                source_id=best.source.id if best else None,
                reason=f"{len(supporting)} of {len(vs)} source(s) support it "
                       f"(agreement {agreement:.2f}, confidence {mean_conf:.2f})"))
        details["claims"] = per_claim
        details["insufficient"] = len(claims) - len(checked)
        layer_score = sum(scores) / len(scores)
        return LayerResult(
            score=min(1.0, max(0.0, layer_score)), passed=not failed,
            label="disputed" if failed else "agreed",
            explanation=(f"{len(checked) - len(failed)} of {len(checked)} claim(s) agreed by "
                         f"≥{cfg.min_supporting} of {len(details['sources'])} source(s)"
                         + (f"; {details['insufficient']} with insufficient sources"
                            if details["insufficient"] else "")),
            evidence=evidence, failed_claims=failed, details=details)
