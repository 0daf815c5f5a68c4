"""``citations`` layer: does each cited source actually back the claim citing it?

Model-free port of seed 003 (claim–citation pairs) with seed 001 source binding.

1. **Extract** claim–citation pairs from the answer (code blocks ignored):
   ``[Sundara 54.30]`` / ``[Smith 2020]`` (name + number), ``[1]``, ``[1, 3]``,
   ``[2-4]``, ``[Source: X]``, ``(Source: X)``, footnotes ``[^1]`` with
   ``[^1]: …`` definitions, ``[doc-id]`` when it names a known source, and a
   trailing ``Sources:`` / ``References:`` list. The claim is the text from the
   sentence start up to the marker, or from an earlier marker in the sentence when
   that clause has two content words (or one and a number); the sentence is kept
   with it (its subject). Numeric markers refer to the numbered Sources list when
   there is one, else to the n-th request document. A Sources list with no inline
   markers covers every answer sentence that has at least three content words
   (config ``sources_list_covers_answer``).
2. **Resolve** each citation: request documents first (``Document.id``, block
   ``id``/``title`` attributes, position), then the corpus
   (``inp.context.corpus``, else ``resources.corpus``), by exact id, then by a
   normalized form (case, spaces/``_``/``-``), title or URL. Author–year
   citations also try ids like ``smith2020`` / ``smith-et-al-2020`` and an
   (author, year) key taken from ids, ``author``/``year`` attributes, titles and
   first lines. A citation that resolves to nothing is ``unresolved`` — the
   classic fabricated reference — except an author–year one in parentheses or
   narrative, which ``unresolved_author_year`` decides (``auto``: flagged only when
   the request supplied author–year sources or a sibling resolved; docs/layers-citations.md).
3. **Check** the claim (for a clause, its own key terms only) against the cited
   text only: the share of its content words present (``min_overlap``), every
   number and date it states (rounding-aware, via :mod:`gateway.text.quantities`) and
   every named entity.
   Request documents reuse the per-request :mod:`gateway.text.index` index.
4. **Bind** (seed 001): per claim, ``confidence = min(1, Σ relevance·authority·
   recency / sqrt(N))`` over its resolved sources; request documents weigh
   ``document_authority`` (default 1.0) and recency 1.0 unless their attributes
   say otherwise; corpus sources use their ``authority``/``published`` metadata.

Score = supported claims / claims; ``passed`` iff score >= ``min_supported``.
``failed_claims`` lists unsupported and unresolved claims; ``details["pairs"]``
holds ``{claim, sentence, citation, source_id, source_text}`` for a later NLI layer
(``source_text`` is the best-matching passage when the source is longer than
``max_source_chars``). With no citations the layer is skipped (neutral) unless
``require_citations``.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Literal

from cachetools import LRUCache
from pydantic import Field

from gateway.layers._author_year import has_author_year_sources
from gateway.layers._citation_pairs import (
    Pair,
    candidates,
    checkable,
    corpus_keys,
    doc_keys,
    extract_pairs,
    norm,
)
from gateway.layers.base import Evidence, LayerConfig, LayerResources, LayerResult, VerifyInput
from gateway.scoring.binding import (
    BoundSource,
    SourceAuthority,
    aggregated_confidence,
    authority_weight,
    recency_weight,
    verification_status,
)
from gateway.sources.context import GroundingContext
from gateway.sources.corpus import Corpus
from gateway.text.index import IndexCache, RangeFacts, TextIndex, build_index, context_index
from gateway.text.quantities import date_matches, extract_quantities, number_matches
from gateway.text.tokens import content_words, entity_candidates, split_sentences, tokenize

__all__ = ["CitationsConfig", "CitationsLayer", "Pair", "extract_pairs"]

NEUTRAL_SCORE = 0.5
_VOTERS = 4
_INDEX_CACHE_CHARS = 1_000_000
"""Request-document indexes kept across requests (same cache as ``grounding``'s)."""

_DIGITS = re.compile(r"\d[\d,]*(?:\.\d+)?")


class CitationsConfig(LayerConfig):
    """Typed config of the ``citations`` layer (unknown keys are errors)."""

    require_citations: bool = False
    """Fail answers that cite nothing (default: skip them, neutral score)."""
    min_overlap: float = Field(0.6, ge=0.0, le=1.0)
    """Share of a claim's content words that must occur in the cited source."""
    min_supported: float = Field(1.0, ge=0.0, le=1.0)
    """``passed`` iff supported claims / claims >= this."""
    min_confidence: float = Field(0.0, ge=0.0, le=1.0)
    """Seed 001 binding confidence a supported claim also needs (0 = not checked)."""
    use_corpus: bool = True
    sources_list_covers_answer: bool = True
    document_authority: SourceAuthority | float = 1.0
    """Authority of request documents without an ``authority`` attribute."""
    default_authority: SourceAuthority | float = "unknown"
    """Authority of corpus sources without ``authority`` metadata."""
    max_source_chars: int = Field(2000, ge=100)
    max_claims: int = Field(200, ge=1)
    unresolved_author_year: Literal["auto", "flag", "ignore"] = "auto"
    """An author–year citation in parentheses or narrative (``(Smith, 2020)``,
    ``Smith (2020)``) that resolves to nothing: ``flag`` it as unresolved (like ``[1]``),
    ``ignore`` it, or ``auto``: flag it only when the request supplied author–year
    sources (a document id like ``smith2020`` or ``author``/``year`` attributes) or
    another author–year citation in the answer resolved; else ignore it (general
    literature the gateway has no copy of, or prose like ``(Paris, 1889)``)."""


@dataclass(slots=True)
class _Source:
    id: str
    text: str
    index: TextIndex
    lo: int
    hi: int
    authority: float
    recency: float
    kind: str

    def facts(self) -> RangeFacts:
        """Numbers and dates of the source (memoized on its index, across requests)."""
        return self.index.range_facts(self.lo, self.hi)


@dataclass(slots=True)
class _Check:
    status: str
    relevance: float
    reason: str
    passage: str | None = None


class CitationsLayer:
    """Check that cited sources exist and contain what the citing claim says."""

    name: ClassVar[str] = "citations"
    cpu_only: ClassVar[bool] = True
    Config: ClassVar[type[LayerConfig]] = CitationsConfig

    def __init__(self, config: CitationsConfig, resources: LayerResources | None = None) -> None:
        self.config = config
        self.resources = resources or LayerResources()
        self._corpus_index: LRUCache[tuple[str, str], TextIndex] = LRUCache(maxsize=256)
        self._aliases: dict[str, str] | None = None
        self._corpus_maps: LRUCache[int, tuple[Corpus, dict[str, str]]] = LRUCache(maxsize=8)
        self._indexes = IndexCache(_INDEX_CACHE_CHARS)
        # Per-request memo keys of results that depend on the config (resolution, source
        # weights, support checks) carry it: two ``citations`` entries of one policy share
        # the request's memo but not each other's verdicts. Text-only work is shared.
        digest = hashlib.blake2b(config.model_dump_json().encode(), digest_size=8).hexdigest()
        self._memo = f"citations.{digest}"

    def prepare(self, context: GroundingContext) -> None:
        """Index the request's documents before the answer arrives (shared with
        ``grounding`` through the request's memo)."""
        if context.documents:
            context_index(context, self._indexes)

    async def verify(self, inp: VerifyInput) -> LayerResult:
        cfg = self.config
        pairs = extract_pairs(inp.response_text, cfg.sources_list_covers_answer)
        resolved = [(p, self._resolve(p.ref, inp)) for p in pairs]
        if any(p.author_year and s is None for p, s in resolved):
            flag = self._flag_author_year(resolved, inp)
            resolved = [(p, s) for p, s in resolved
                        if p.explicit or s is not None or (p.author_year and flag)]
        else:
            resolved = [(p, s) for p, s in resolved if p.explicit or s is not None]
        if not resolved:
            return self._uncited(inp)
        self._prefetch(resolved, inp)
        claims: dict[str, list[tuple[Pair, _Source | None, _Check]]] = {}
        for pair, src in resolved:
            if pair.claim not in claims and len(claims) >= cfg.max_claims:
                continue
            check = _Check("unresolved", 0.0, f"citation {pair.citation} resolves to no "
                           "known source") if src is None else self._check(pair.claim, src, inp)
            claims.setdefault(pair.claim, []).append((pair, src, check))
        return self._result(claims)

    # -- resolution --------------------------------------------------------------------

    def _flag_author_year(self, resolved: list[tuple[Pair, _Source | None]],
                          inp: VerifyInput) -> bool:
        """Are unresolved author–year citations fabricated references (``auto``: the
        request supplied author–year sources, or a sibling citation resolved)?"""
        mode = self.config.unresolved_author_year
        if mode != "auto":
            return mode == "flag"
        docs = inp.context.documents
        return any(p.author_year and s is not None for p, s in resolved) or bool(
            inp.context.memo("citations.ay_sources", lambda: has_author_year_sources(docs)))

    def _resolve(self, ref: str, inp: VerifyInput) -> _Source | None:
        return inp.context.memo(f"{self._memo}.ref:{ref}",  # type: ignore[no-any-return]
                                lambda: self._lookup(ref, inp))

    def _lookup(self, ref: str, inp: VerifyInput) -> _Source | None:
        ctx, cfg = inp.context, self.config
        docs = ctx.documents
        if ref.startswith("#") and ref[1:].isdigit():
            n = int(ref[1:])
            if 1 <= n <= len(docs):
                return self._doc_source(n - 1, inp)
            ref = ref[1:]
        doc_map: dict[str, int] = ctx.memo("citations.docmap", lambda: doc_keys(docs))
        corpus: Mapping[str, str] = (ctx.corpus or self.resources.corpus) if cfg.use_corpus \
            else {}
        for cand in candidates(ref):
            i = doc_map.get(cand, doc_map.get(norm(cand)))
            if i is not None:
                return self._doc_source(i, inp)
            key = cand if cand in corpus else self._corpus_map(corpus, ctx).get(norm(cand))
            if key is not None and key in corpus:
                # partial binds this iteration's key, not the loop variable (B023)
                return ctx.memo(f"{self._memo}.corpus:{key}",  # type: ignore[no-any-return]
                                partial(self._corpus_source, key, corpus))
        return None

    def _corpus_map(self, corpus: Mapping[str, str], ctx: Any) -> dict[str, str]:
        """Normalized id / title / url / author–year key -> corpus id; built once for
        ``resources.corpus`` and per loaded (immutable, cached) :class:`Corpus`."""
        if corpus is self.resources.corpus:
            if self._aliases is None:
                self._aliases = corpus_keys(corpus)
            return self._aliases
        if isinstance(corpus, Corpus):
            held = self._corpus_maps.get(id(corpus))
            if held is None or held[0] is not corpus:
                held = self._corpus_maps[id(corpus)] = (corpus, corpus_keys(corpus))
            return held[1]
        return ctx.memo(f"{self._memo}.corpusmap",  # type: ignore[no-any-return]
                        lambda: corpus_keys(corpus))

    def _doc_source(self, i: int, inp: VerifyInput) -> _Source:
        return inp.context.memo(f"{self._memo}.doc:{i}",  # type: ignore[no-any-return]
                                lambda: self._new_doc_source(i, inp))

    def _new_doc_source(self, i: int, inp: VerifyInput) -> _Source:
        doc = inp.context.documents[i]
        index = context_index(inp.context, self._indexes)
        ranges: list[tuple[int, int]] = inp.context.memo(
            "citations.ranges", lambda: _doc_ranges(index, inp.context.documents))
        lo, hi = ranges[i]
        auth = doc.attrs.get("authority") or self.config.document_authority
        dated = doc.attrs.get("published") or doc.attrs.get("date")
        return _Source(doc.id, doc.text, index, lo, hi, authority_weight(auth),
                       recency_weight(dated) if dated else 1.0, "document")

    def _corpus_source(self, key: str, corpus: Mapping[str, str]) -> _Source:
        text = corpus[key]
        index = self._corpus_index.get((key, text))
        if index is None:
            index = self._corpus_index[(key, text)] = build_index([(key, text)])
        meta = getattr(corpus, "meta", None) or getattr(self.resources.corpus, "meta", {})
        m = meta.get(key)
        auth = getattr(m, "authority", None)
        return _Source(key, text, index, 0, len(index.sentences),
                       authority_weight(auth if auth is not None else
                                        self.config.default_authority),
                       recency_weight(getattr(m, "published", None)), "corpus")

    # -- checking ----------------------------------------------------------------------

    def _prefetch(self, resolved: list[tuple[Pair, _Source | None]], inp: VerifyInput) -> None:
        """Look up the postings of every claim's words in one pass per source index."""
        words: dict[int, tuple[TextIndex, set[str]]] = {}
        for pair, src in resolved:
            if src is not None:
                words.setdefault(id(src.index), (src.index, set()))[1].update(
                    self._claim_info(pair.claim, inp).words)
        for index, ws in words.values():
            index.prefetch(f for f in map(index.resolve, ws) if f is not None)

    @staticmethod
    def _claim_info(claim: str, inp: VerifyInput) -> _Claim:
        return inp.context.memo(  # type: ignore[no-any-return]
            f"citations.claim:{claim}", lambda: _analyze(claim))

    def _check(self, claim: str, src: _Source, inp: VerifyInput) -> _Check:
        memo = inp.context.memo
        info = self._claim_info(claim, inp)
        return memo(f"{self._memo}.check:{src.kind}:{src.id}:{claim}",  # type: ignore[no-any-return]
                    lambda: _support(claim, info, src, self.config))

    # -- results -----------------------------------------------------------------------

    def _uncited(self, inp: VerifyInput) -> LayerResult:
        if not self.config.require_citations:
            return LayerResult(score=NEUTRAL_SCORE, passed=True, skipped=True, label="uncited",
                               explanation="answer cites no sources; nothing to check")
        need = [s.text for s in split_sentences(inp.response_text) if checkable(s.text)][:10]
        return LayerResult(score=0.0, passed=False, label="uncited", failed_claims=need,
                           explanation="answer cites no sources but the policy requires them")

    def _result(self, claims: dict[str, list[tuple[Pair, _Source | None, _Check]]]) -> LayerResult:
        cfg = self.config
        evidence: list[Evidence] = []
        pairs: list[dict[str, Any]] = []
        summary: list[dict[str, Any]] = []
        failed: list[str] = []
        supported = unresolved = 0
        for claim, items in claims.items():
            bound = [BoundSource(s.id, c.relevance, s.authority, s.recency)
                     for _, s, c in items if s is not None]
            confidence = aggregated_confidence(bound)
            ok = any(c.status == "supported" for _, _, c in items)
            status = "supported" if ok else ("unresolved" if all(
                c.status == "unresolved" for _, _, c in items) else "unsupported")
            if ok and confidence < cfg.min_confidence:
                status = "low_confidence"
            supported += status == "supported"
            unresolved += status == "unresolved"
            if status != "supported":
                failed.append(claim)
            summary.append({"claim": claim, "status": status, "confidence": round(confidence, 4),
                            "verification_status": verification_status(confidence),
                            "citations": [p.citation for p, _, _ in items]})
            for pair, src, check in items:
                evidence.append(Evidence(text=claim, status=check.status,
                                         source_id=src.id if src else None,
                                         source_span=check.passage, score=check.relevance,
                                         reason=check.reason))
                pairs.append({"claim": claim, "sentence": pair.sentence or claim,
                              "citation": pair.citation,
                              "source_id": src.id if src else None,
                              "source_text": _passage_or_text(src, check, cfg)})
        score = supported / len(claims)
        label = "supported" if not failed else ("unresolved" if unresolved else "unsupported")
        return LayerResult(
            score=score, passed=score >= cfg.min_supported, label=label, evidence=evidence,
            failed_claims=failed,
            explanation=f"{supported}/{len(claims)} cited claims supported by their sources"
                        + (f"; {unresolved} cite sources that do not exist" if unresolved else ""),
            details={"pairs": pairs, "claims": summary, "supported": supported,
                     "unresolved": unresolved, "total": len(claims)})


def _doc_ranges(index: TextIndex, docs: Any) -> list[tuple[int, int]]:
    """Sentence range of each document in the shared index (documents are contiguous)."""
    out, cursor, sents = [], 0, index.sentences
    blocks = [(b.base, b.base + len(b.starts)) for b in index.docs]  # one per indexed text
    k = 0
    for d in docs:
        start = cursor
        # Jump a whole indexed text at a time (cursor is always at one's first sentence).
        while k < len(blocks) and sents[blocks[k][0]].doc_id == d.id:
            cursor = blocks[k][1]
            k += 1
        out.append((start, cursor))
    return out


@dataclass(frozen=True, slots=True)
class _Claim:
    words: frozenset[str]
    runs: tuple[float, ...]
    """Values of the digit runs in the claim (fast path for the number check)."""


def _analyze(claim: str) -> _Claim:
    return _Claim(frozenset(content_words(tokenize(claim))),
                  tuple(float(r.replace(",", "")) for r in _DIGITS.findall(claim)))


def _missing_quantities(claim: str, src: _Source) -> list[str]:
    """Numbers and dates stated in ``claim`` that ``src`` does not back (rounding-aware)."""
    facts = src.facts()
    values, vset, dates = facts.values, facts.value_set, facts.dates
    claim_dates, claim_numbers = extract_quantities(claim)
    out = [d.text for d in claim_dates if not date_matches(d, dates)]
    return out + [q.text for q in claim_numbers
                  if q.value not in vset and not number_matches(q, values)]


def _support(claim: str, info: _Claim, src: _Source, cfg: CitationsConfig) -> _Check:
    """Content-word coverage, numbers, dates and entities of ``claim`` within ``src``."""
    index, lo, hi = src.index, src.lo, src.hi
    found: set[str] = set()
    spans: list[tuple[int, str, int, int]] = []
    for w in info.words:
        form = index.resolve(w)
        posting = index.posting(form) if form else []
        a, b = bisect_left(posting, lo), bisect_left(posting, hi)
        if a < b:
            found.add(w)
            spans.append((b - a, w, a, b))
    votes: dict[int, int] = {}
    for _, w, a, b in sorted(spans)[:_VOTERS]:  # the rarest words locate the passage
        for sid in index.posting(index.resolve(w) or w)[a:b]:
            votes[sid] = votes.get(sid, 0) + 1
    words = info.words
    coverage = len(found) / len(words) if words else 0.0
    missing: list[str] = []
    if cfg.min_overlap <= coverage < 1.0:  # all words found => every entity's words found
        missing += [e.text for e in entity_candidates(claim)
                    if not content_words(tokenize(e.text)) <= found]
    if info.runs and not all(r in src.facts().parts for r in info.runs):
        missing += _missing_quantities(claim, src)
    relevance = coverage * 0.5 ** len(missing)
    best = max(votes, key=lambda sid: (votes[sid], -sid)) if votes else None
    passage = index.sentences[best].text if best is not None else None
    if coverage >= cfg.min_overlap and not missing:
        return _Check("supported", relevance, f"{len(found)}/{len(words)} content words "
                      f"found in {src.id}", passage)
    absent = sorted(words - found)
    reason = f"{len(found)}/{len(words)} content words found in {src.id}" + (
        f" (absent: {', '.join(absent[:8])})" if absent else "")
    if missing:
        reason = f"not in {src.id}: {', '.join(missing)}; {reason}"
    return _Check("unsupported", relevance, reason, passage)


def _passage_or_text(src: _Source | None, check: _Check, cfg: CitationsConfig) -> str | None:
    if src is None:
        return None
    if len(src.text) <= cfg.max_source_chars or check.passage is None:
        return src.text[: cfg.max_source_chars]
    return check.passage
