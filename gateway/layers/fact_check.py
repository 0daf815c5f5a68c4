"""``fact-check`` layer: seed 004's fact-checking loop, one batched judge call.

Per request:

1. **Claims** (model-free) — :func:`gateway.text.claims.detect_claims` on the
   answer; the assertive ``verifiable`` ones (optionally also ``hedged``), at most
   ``max_claims``, in answer order.
2. **Evidence** (model-free, seed 004 OBSERVE) — for each claim the
   ``evidence_per_claim`` best-matching sentences (IDF-weighted word coverage of
   the claim, at least ``min_overlap``) from the grounding context (the
   per-request :func:`~gateway.text.index.context_index`) and, with
   ``use_corpus``, from the configured corpus (indexed once per layer). Source
   authority and recency come from document attributes / corpus metadata
   (``authority``, ``published``), else ``document_authority`` (request
   documents, recency 1.0) and ``default_authority`` (corpus, recency 0.5).
3. **Labels** — **one** judge call labels every (claim, passage) pair
   ``supporting`` / ``contradicting`` / ``contextual`` with a relevance in [0, 1]
   (a pair the reply leaves out stays ``contextual``: no weight either way).
4. **Verdict** (deterministic, :mod:`gateway.scoring.evidence`) — quality
   ``0.30·authority + 0.25·recency + 0.25·relevance + 0.20·specificity``
   (specificity = the passage's word coverage of the claim), weights
   ``Σ quality·relevance`` per side, seed 004's verdict rules, OUTDATED when
   the newest dated evidence contradicts what older dated evidence supported,
   and VERIFIED / CONTRADICTED below ``confidence_threshold`` (0.85) become
   PARTIAL. A claim with no passage is UNVERIFIABLE without asking the judge.
5. **Corrections** (``auto_correct``) — one more judge call rewrites the
   CONTRADICTED (``replace``) and OUTDATED (``update``) claims from their
   contradicting evidence; they go to ``details["corrections"]``.

Score: mean over checked claims of VERIFIED 1, PARTIAL 0.5, UNVERIFIABLE
``unverifiable_score`` (neutral 0.5 by default), CONTRADICTED / OUTDATED 0;
``passed`` iff no claim is CONTRADICTED or OUTDATED (those are the
``failed_claims``). No verifiable claim: skipped. Judge calls per request: 1
(0 when no claim has evidence; 2 with ``auto_correct`` and something to correct).
The prompt texts are in :mod:`gateway.layers._fact_check_prompts` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, ClassVar, Literal, cast

from pydantic import Field

from gateway.layers._corpus_index import CorpusIndex
from gateway.layers._fact_check_prompts import (
    CORRECT_PROMPT,
    LABEL_PROMPT,
    MARK_CORRECT,
    MARK_LABEL,
    correct_schema,
    label_schema,
)
from gateway.layers._judged import JudgeTally, require_judge
from gateway.layers.base import (
    Evidence,
    JudgeError,
    LayerConfig,
    LayerResources,
    LayerResult,
    VerifyInput,
)
from gateway.redact import shape
from gateway.scoring.binding import SourceAuthority, authority_weight, parse_date, recency_weight
from gateway.scoring.evidence import EvidenceItem, Verdict, VerdictResult, assess
from gateway.text.claims import FactualClaim, detect_claims
from gateway.text.index import TextIndex, context_index
from gateway.text.tokens import content_words, tokenize

__all__ = ["CORRECT_PROMPT", "LABEL_PROMPT", "FactCheckConfig", "FactCheckLayer", "Passage"]

Kind = Literal["supporting", "contradicting", "contextual"]

NEUTRAL_SCORE = 0.5
KEY_EVIDENCE = 3
"""Seed 004: key supporting / contradicting evidence kept per claim."""

_SCORES = {Verdict.VERIFIED: 1.0, Verdict.PARTIAL: 0.5, Verdict.CONTRADICTED: 0.0,
           Verdict.OUTDATED: 0.0}
_FAILED = (Verdict.CONTRADICTED, Verdict.OUTDATED)


class FactCheckConfig(LayerConfig):
    """Typed config of the ``fact-check`` layer (unknown keys are errors)."""

    max_claims: int = Field(5, ge=1, le=50)
    """At most this many claims are checked per answer (the first ones)."""
    include_hedged: bool = False
    """Also check hedged claims ("approximately 40%"); opinions never."""
    evidence_per_claim: int = Field(3, ge=1, le=10)
    """Passages gathered per claim (best word coverage across context and corpus)."""
    min_overlap: float = Field(0.3, ge=0.0, le=1.0)
    """A passage must cover at least this IDF-weighted share of the claim's words."""
    use_corpus: bool = True
    """Search the policy's corpus (``context.corpus_dir``) as well as the context."""
    document_authority: SourceAuthority | float = 1.0
    """Authority of request documents without an ``authority`` attribute."""
    default_authority: SourceAuthority | float = "unknown"
    """Authority of corpus sources without ``authority`` metadata."""
    confidence_threshold: float = Field(0.85, ge=0.0, le=1.0)
    """Seed 004: below it VERIFIED and CONTRADICTED become PARTIAL."""
    unverifiable_score: float = Field(NEUTRAL_SCORE, ge=0.0, le=1.0)
    """Score contribution of an UNVERIFIABLE claim (0.5: neutral)."""
    auto_correct: bool = False
    """Ask for corrected CONTRADICTED / OUTDATED claims (one more judge call)."""
    max_passage_chars: int = Field(500, ge=50)
    """Passages are cut to this length, in the prompt and in the output (seed 004: 500)."""
    max_tokens: int = Field(1024, ge=64, le=16_384)
    """Per judge call."""


@dataclass(frozen=True, slots=True)
class Passage:
    """One retrieved evidence passage for one claim."""

    source_id: str
    text: str
    coverage: float
    """IDF-weighted share of the claim's words it contains (the specificity factor)."""
    authority: float
    recency: float
    dated: date | None
    origin: Literal["document", "corpus"]


@dataclass(slots=True)
class _Labeled:
    passage: Passage
    kind: Kind = "contextual"
    relevance: float = 0.0

    def item(self) -> EvidenceItem:
        p = self.passage
        return EvidenceItem(kind=self.kind, relevance=self.relevance, authority=p.authority,
                            recency=p.recency, specificity=p.coverage, dated=p.dated)

    def to_dict(self, max_chars: int) -> dict[str, Any]:
        p = self.passage
        return {"type": self.kind, "source": p.source_id, "origin": p.origin,
                "content": p.text[:max_chars], "relevance": round(self.relevance, 4),
                "recency": p.dated.isoformat() if p.dated else None,
                "quality": round(self.item().quality, 4)}


@dataclass(slots=True)
class _Checked:
    claim: FactualClaim
    evidence: list[_Labeled] = field(default_factory=list)
    result: VerdictResult | None = None

    @property
    def verdict(self) -> Verdict:
        return self.result.verdict if self.result is not None else Verdict.UNVERIFIABLE

    def key(self, kind: Kind) -> list[_Labeled]:
        """Seed 004 key evidence: the best ``KEY_EVIDENCE`` of one kind, by quality."""
        of_kind = [e for e in self.evidence if e.kind == kind]
        return sorted(of_kind, key=lambda e: -e.item().quality)[:KEY_EVIDENCE]


def _claim_date(evidence: Sequence[_Labeled]) -> date | None:
    """The day after the newest dated supporting passage (for seed 004's OUTDATED check).

    With it, :func:`gateway.scoring.evidence.assess` calls a CONTRADICTED claim
    OUTDATED when dated support exists and some contradicting passage is newer
    than all of it: the claim was true, newer sources say otherwise.
    """
    dates = [e.passage.dated for e in evidence if e.kind == "supporting" and e.passage.dated]
    return max(dates) + timedelta(days=1) if dates else None


def _relevance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise JudgeError(f"pair relevance is not a number ({shape(value)})")
    try:
        return min(1.0, max(0.0, float(value)))
    except ValueError as exc:
        raise JudgeError(f"pair relevance is not a number ({shape(value)})") from exc


class FactCheckLayer:
    """Seed 004 fact-checking loop (see the module docstring)."""

    name: ClassVar[str] = "fact-check"
    Config: ClassVar[type[LayerConfig]] = FactCheckConfig

    def __init__(self, config: FactCheckConfig, resources: LayerResources) -> None:
        self.config = config
        self.resources = resources
        self._corpus = CorpusIndex()

    # -- evidence ----------------------------------------------------------------------

    async def _corpus_index(self, corpus: Mapping[str, str]) -> TextIndex | None:
        if not corpus or not self.config.use_corpus:
            return None
        return await self._corpus.of(corpus)

    def _passages(self, claim: str, inp: VerifyInput, corpus: Mapping[str, str],
                  corpus_index: TextIndex | None) -> list[Passage]:
        cfg = self.config
        words = content_words(tokenize(claim))
        if not words:
            return []
        found: list[Passage] = []
        if inp.context:
            index = context_index(inp.context)
            docs = {d.id: d for d in inp.context.documents}
            for m in index.best_matches(words, cfg.evidence_per_claim):
                if m.coverage < cfg.min_overlap:
                    continue
                s = index.sentences[m.sentence]
                doc = docs.get(s.doc_id)
                attrs = doc.attrs if doc is not None else {}
                published = attrs.get("published") or attrs.get("date")
                found.append(Passage(
                    s.doc_id, s.text, m.coverage,
                    authority_weight(attrs.get("authority") or cfg.document_authority),
                    recency_weight(published) if published else 1.0,
                    parse_date(published), "document"))
        if corpus_index is not None:
            meta = getattr(corpus, "meta", None) or {}
            for m in corpus_index.best_matches(words, cfg.evidence_per_claim):
                if m.coverage < cfg.min_overlap:
                    continue
                s = corpus_index.sentences[m.sentence]
                info = meta.get(s.doc_id)
                auth = getattr(info, "authority", None)
                published = getattr(info, "published", None)
                found.append(Passage(
                    s.doc_id, s.text, m.coverage,
                    authority_weight(auth if auth is not None else cfg.default_authority),
                    recency_weight(published), parse_date(published), "corpus"))
        seen: set[tuple[str, str]] = set()
        out: list[Passage] = []
        for p in sorted(found, key=lambda p: -p.coverage):  # stable: context first on ties
            if (p.source_id, p.text) not in seen:
                seen.add((p.source_id, p.text))
                out.append(p)
        return out[: cfg.evidence_per_claim]

    # -- judge calls -------------------------------------------------------------------

    async def _label(self, calls: JudgeTally, checked: list[_Checked]) -> None:
        pairs: list[_Labeled] = []
        lines: list[str] = []
        cut = self.config.max_passage_chars
        for c in checked:
            for e in c.evidence:
                pairs.append(e)
                lines.append(f"P{len(pairs)}\nCLAIM: {c.claim.text}\n"
                             f"EVIDENCE (source {e.passage.source_id}): {e.passage.text[:cut]}")
        if not pairs:
            return

        def read(data: Any) -> dict[int, tuple[Kind, float]]:
            rows = data.get("pairs") if isinstance(data, Mapping) else data
            if not isinstance(rows, list):
                raise JudgeError('label reply is not {"pairs": [...]}')
            out: dict[int, tuple[Kind, float]] = {}
            for row in rows:
                if not isinstance(row, Mapping):
                    raise JudgeError("label reply: a pair entry is not an object")
                pid = str(row.get("id", "")).strip().upper().lstrip("P")
                if not pid.isdigit() or not 1 <= int(pid) <= len(pairs):
                    continue  # a pair we did not ask about: ignore it
                label = str(row.get("label", "")).strip().lower()
                if label not in ("supporting", "contradicting", "contextual"):
                    raise JudgeError(f"label reply: unknown label ({shape(row.get('label'))})")
                out[int(pid)] = (cast(Kind, label), _relevance(row.get("relevance", 1.0)))
            return out

        labels = await calls.ask_json(LABEL_PROMPT, MARK_LABEL + "\n\n" + "\n\n".join(lines),
                                      max_tokens=self.config.max_tokens, parse=read,
                                      schema=label_schema(len(pairs)))
        for pid, (kind, relevance) in labels.items():
            target = pairs[pid - 1]
            target.kind, target.relevance = kind, relevance

    async def _correct(self, calls: JudgeTally,
                       checked: list[_Checked]) -> list[dict[str, Any]]:
        wrong = [c for c in checked if c.verdict in _FAILED]
        if not wrong:
            return []
        cut = self.config.max_passage_chars
        blocks = []
        for i, c in enumerate(wrong, 1):
            ev = "\n".join(f"- ({e.passage.source_id}) {e.passage.text[:cut]}"
                           for e in c.key("contradicting"))
            blocks.append(f"c{i}\nCLAIM: {c.claim.text}\nEVIDENCE:\n{ev}")

        def read(data: Any) -> dict[int, str]:
            rows = data.get("corrections") if isinstance(data, Mapping) else data
            if not isinstance(rows, list):
                raise JudgeError('correction reply is not {"corrections": [...]}')
            texts: dict[int, str] = {}
            for row in rows:
                if not isinstance(row, Mapping):
                    raise JudgeError("correction reply: an entry is not an object")
                cid = str(row.get("id", "")).strip().lower().lstrip("c")
                corrected = row.get("corrected")
                if cid.isdigit() and isinstance(corrected, str) and corrected.strip():
                    texts[int(cid)] = " ".join(corrected.split())
            return texts

        texts = await calls.ask_json(CORRECT_PROMPT,
                                     MARK_CORRECT + "\n\n" + "\n\n".join(blocks),
                                     max_tokens=self.config.max_tokens, parse=read,
                                     schema=correct_schema(len(wrong)))
        out = []
        for i, c in enumerate(wrong, 1):
            if i not in texts or c.result is None:
                continue
            key = c.key("contradicting")
            quality = sum(e.item().quality for e in key) / len(key) if key else 0.0
            outdated = c.verdict is Verdict.OUTDATED
            entry: dict[str, Any] = {
                "type": "update" if outdated else "replace", "original": c.claim.text,
                "corrected": texts[i],
                "confidence": round(min(c.result.confidence, quality), 4),
                "sources": [e.passage.source_id for e in key]}
            if outdated:
                entry["note"] = "Information has changed since original writing"
            out.append(entry)
        return out

    # -- the layer ---------------------------------------------------------------------

    async def verify(self, inp: VerifyInput) -> LayerResult:
        cfg = self.config
        wanted = ("verifiable", "hedged") if cfg.include_hedged else ("verifiable",)
        claims = [c for c in detect_claims(inp.response_text)
                  if c.types and c.classification in wanted][: cfg.max_claims]
        if not claims:
            return LayerResult(score=NEUTRAL_SCORE, passed=True, skipped=True, label="no_claims",
                               explanation="no verifiable factual claim to check")
        calls = JudgeTally(require_judge(self.resources), inp.model)
        corpus = inp.context.corpus or self.resources.corpus
        corpus_index = await self._corpus_index(corpus)
        checked = [_Checked(c, [_Labeled(p) for p in
                                self._passages(c.text, inp, corpus, corpus_index)])
                   for c in claims]
        await self._label(calls, checked)
        for c in checked:
            items = [e.item() for e in c.evidence]
            c.result = assess(items, claim_date=_claim_date(c.evidence),
                              threshold=cfg.confidence_threshold)
        corrections = await self._correct(calls, checked) if cfg.auto_correct else []
        return self._result(checked, corrections, calls)

    def _result(self, checked: list[_Checked], corrections: list[dict[str, Any]],
                calls: JudgeTally) -> LayerResult:
        cfg = self.config
        counts = {v.value: 0 for v in Verdict}
        evidence: list[Evidence] = []
        summary: list[dict[str, Any]] = []
        total = 0.0
        for c in checked:
            v = c.verdict
            counts[v.value] += 1
            total += _SCORES.get(v, cfg.unverifiable_score)
            r = c.result
            conf = r.confidence if r is not None else 0.0
            key = c.key("contradicting") if v in _FAILED else c.key("supporting")
            best = key[0].passage if key else None
            evidence.append(Evidence(
                text=c.claim.text, status=v.value, score=round(conf, 4),
                source_id=best.source_id if best else None,
                source_span=best.text[: cfg.max_passage_chars] if best else None,
                reason=(f"{len(c.evidence)} passage(s): support {r.support:.2f}, "
                        f"contra {r.contra:.2f}, confidence {conf:.2f}"
                        + (f" (initially {r.initial.value})" if r.initial != v else "")
                        if r is not None else "no passage found")))
            summary.append({
                "claim": c.claim.text, "verdict": v.value, "confidence": round(conf, 4),
                "evidence": [e.to_dict(cfg.max_passage_chars)
                             for e in c.key("supporting") + c.key("contradicting")],
                "sources": sorted({e.passage.source_id for e in c.evidence})})
        failed = [c.claim.text for c in checked if c.verdict in _FAILED]
        bad = counts["CONTRADICTED"] + counts["OUTDATED"]
        label = ("contradicted" if counts["CONTRADICTED"] else "outdated" if bad
                 else "verified" if counts["VERIFIED"] == len(checked)
                 else "unverifiable" if counts["UNVERIFIABLE"] == len(checked) else "partial")
        details: dict[str, Any] = {"verdicts": counts, "claims": summary}
        if cfg.auto_correct:
            details["corrections"] = corrections
        return calls.account(LayerResult(
            score=total / len(checked), passed=not bad, label=label,
            explanation=", ".join(f"{n} {k}" for k, n in counts.items() if n)
                        + f" of {len(checked)} claim(s)",
            evidence=evidence, failed_claims=failed, details=details))
