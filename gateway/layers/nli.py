"""``nli`` layer: natural language inference by a judge model (seed 000 layer 5, seed 003).

**Premise and hypotheses.** ``premise: context`` — the request's grounding context
against each checkable answer sentence (three content words, or a number).
``premise: citations`` — seed 003: the answer's claim–citation pairs (extracted by
the ``citations`` layer's own functions, :func:`gateway.layers.citations.extract_pairs`,
and resolved the same way: request documents by id/title/position, then the corpus),
each claim against the text of the source it cites. ``auto`` (default) uses the
citations when any resolves, else the context. Claims whose citation resolves to
nothing are left to the ``citations`` layer (counted in ``details["unresolved"]``).

**Judge calls.** Hypotheses sharing a premise are batched: one call classifies up to
``batch_size`` numbered hypotheses as ``entailment`` / ``contradiction`` / ``neutral``
with a confidence each. Context premise: ``ceil(n / batch_size)`` calls (one by
default); citations: one per cited source (and batch). Calls run concurrently at
temperature 0, so a repeated exchange is served from the judge's cache. A premise
longer than ``max_premise_chars`` is cut to its sentences that share most words
with the hypotheses.

**Score** per hypothesis (seed 000): entailment → ``c``, neutral → ``0.5·c``,
contradiction → ``1 − c``; aggregated by ``mean`` (default) or ``min``. ``passed``
iff no hypothesis is a contradiction with ``c ≥ contradiction_threshold`` (and, with
``strict: true``, none is neutral at that confidence unless another cited source
entails it). ``failed_claims`` are those hypotheses. No context (or no resolvable
citation with ``premise: citations``), or no checkable sentence: skipped, 0.5 —
decided before the judge is needed, so with no judge too.

``prefilter: grounding`` (context premise only) sends the judge just the sentences
the model-free grounding check does not find supported (see docs/layers.md,
"Cascade" — cheaper, blind to what grounding wrongly supports).

The reply is asked by schema (:func:`reply_schema`, see ``gateway.layers._judged``).
An unusable judge reply (not JSON, a label outside the three, a hypothesis left out)
gets one repair call, then raises :class:`~gateway.layers.base.JudgeError`; the
policy's ``on_error`` decides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import Field

from gateway.layers._citation_pairs import candidates, doc_keys, norm
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
)
from gateway.layers.base import (
    Evidence,
    JudgeError,
    LayerConfig,
    LayerResources,
    LayerResult,
    VerifyInput,
)
from gateway.layers.citations import extract_pairs
from gateway.layers.grounding import GroundingConfig, check_answer
from gateway.redact import shape
from gateway.sources.context import Document
from gateway.text.answer import answer_sentences
from gateway.text.index import build_index, context_index

__all__ = ["NliConfig", "NliLayer", "classify_prompt", "reply_schema"]

NEUTRAL_SCORE = 0.5
Label = Literal["entailment", "contradiction", "neutral"]
_LABELS: dict[str, Label] = {
    "entailment": "entailment", "entails": "entailment", "entailed": "entailment",
    "supported": "entailment", "supports": "entailment",
    "contradiction": "contradiction", "contradicts": "contradiction",
    "contradicted": "contradiction", "refuted": "contradiction",
    "neutral": "neutral", "unknown": "neutral", "not enough info": "neutral",
    "insufficient": "neutral", "unverifiable": "neutral",
}

SYSTEM = ("You are a careful natural language inference (NLI) judge. You compare "
          "hypotheses with a premise and answer with JSON only.")


class NliConfig(LayerConfig):
    """Typed config of the ``nli`` layer (unknown keys are errors)."""

    premise: Literal["auto", "context", "citations"] = "auto"
    """Where the premise comes from (see the module docstring)."""
    aggregate: Literal["mean", "min"] = "mean"
    contradiction_threshold: float = Field(0.5, ge=0.0, le=1.0)
    """A contradiction at or above this confidence fails the answer."""
    strict: bool = False
    """Neutral (not entailed) hypotheses fail too, at the same confidence."""
    max_hypotheses: int = Field(16, ge=1, le=200)
    """Answer sentences (or claim–source pairs) checked per request; the rest are not."""
    batch_size: int = Field(16, ge=1, le=50)
    """Hypotheses per judge call."""
    max_premise_chars: int = Field(6000, ge=200)
    max_tokens: int = Field(1024, ge=64)
    """Reply budget of one judge call."""
    use_corpus: bool = True
    """Resolve citations against the corpus too (``premise: citations`` / ``auto``)."""
    prefilter: Literal["none", "grounding"] = "none"
    """``grounding``: with the context premise, send the judge only the sentences the
    model-free grounding check (default settings) does not find supported — fewer
    judge tokens, but the sentences it does support (e.g. swapped roles built from
    context words) are then never put to the judge."""


@dataclass(slots=True)
class _Group:
    """One premise and the hypotheses checked against it."""

    source_id: str | None
    premise: str
    hypotheses: list[str] = field(default_factory=list)
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class _Verdict:
    hypothesis: str
    source_id: str | None
    label: Label
    confidence: float
    reason: str

    @property
    def score(self) -> float:
        if self.label == "entailment":
            return self.confidence
        if self.label == "neutral":
            return 0.5 * self.confidence
        return 1.0 - self.confidence


def classify_prompt(premise: str, hypotheses: Sequence[str]) -> list[dict[str, str]]:
    """The batched NLI prompt: a premise, numbered hypotheses, a strict JSON answer."""
    listed = "\n".join(f"{i}. {h}" for i, h in enumerate(hypotheses, 1))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": (
        f'Premise:\n"""\n{premise}\n"""\n\nHypotheses:\n{listed}\n\n'
        "For each numbered hypothesis, decide its relationship to the premise alone "
        "(not to your own knowledge):\n"
        '- "entailment": the premise states or clearly implies it;\n'
        '- "contradiction": the premise states something incompatible with it;\n'
        '- "neutral": the premise neither supports nor contradicts it.\n'
        "Answer with JSON only, one result per hypothesis:\n"
        '{"results": [{"id": 1, "label": "entailment" | "contradiction" | "neutral", '
        '"confidence": "high" | "medium" | "low"}]}')}]


def reply_schema(count: int) -> ReplySchema:
    """The reply :func:`classify_prompt` asks for, over ``count`` hypotheses."""
    return numbered_schema("nli_verdicts", count, {
        "label": {"enum": ["entailment", "contradiction", "neutral"]},
        "confidence": CONFIDENCE})


class NliLayer:
    """Classify answer sentences (or cited claims) against their premise with a judge."""

    name: ClassVar[str] = "nli"
    Config: ClassVar[type[LayerConfig]] = NliConfig

    def __init__(self, config: NliConfig, resources: LayerResources | None = None) -> None:
        self.config = config
        self.resources = resources or LayerResources()

    async def verify(self, inp: VerifyInput) -> LayerResult:
        groups, mode, unresolved = self._groups(inp)
        if not any(g.hypotheses for g in groups):
            why = ("no grounding context" if mode == "context" and not inp.context
                   else "no cited source resolves" if mode == "citations"
                   else "grounding supports every checkable sentence"
                   if self.config.prefilter == "grounding"
                   else "no checkable answer sentence")
            return LayerResult(score=NEUTRAL_SCORE, passed=True, skipped=True, label="skipped",
                               explanation=f"nothing to check: {why}",
                               details={"premise": mode, "unresolved": unresolved,
                                        **self._prefiltered(inp, groups, mode)})
        # Only now is the judge needed: nothing to check is skipped with or without one.
        tally = JudgeTally(require_judge(self.resources), inp.model)
        size = self.config.batch_size
        batches = [(g, g.hypotheses[i:i + size]) for g in groups
                   for i in range(0, len(g.hypotheses), size)]
        parsed = await tally.ask_all(
            [(classify_prompt(g.premise, hyps), _reader(hyps, g.source_id),
              reply_schema(len(hyps))) for g, hyps in batches],
            max_tokens=self.config.max_tokens)
        verdicts = [v for batch in parsed for v in batch]
        result = self._result(verdicts, mode)
        result.details.update(unresolved=unresolved,
                              truncated=any(g.truncated for g in groups),
                              **self._prefiltered(inp, groups, mode))
        return tally.account(result)

    def _prefiltered(self, inp: VerifyInput, groups: list[_Group],
                     mode: str) -> dict[str, int]:
        """``{"prefiltered": n}``: checkable sentences grounding supported, not sent."""
        if self.config.prefilter != "grounding" or mode != "context" or not inp.context:
            return {}
        checkable = answer_claims(inp.response_text, len(inp.response_text))
        doubtful = _doubtful(inp)
        return {"prefiltered": sum(1 for h in checkable if h not in doubtful)}

    # -- premises ----------------------------------------------------------------------

    def _groups(self, inp: VerifyInput) -> tuple[list[_Group], str, int]:
        cfg = self.config
        if cfg.premise != "context":
            groups, unresolved = self._cited(inp)
            if groups or cfg.premise == "citations":
                return groups, "citations", unresolved
        else:
            unresolved = 0
        if not inp.context:
            return [], "context", unresolved
        if cfg.prefilter == "grounding":
            doubtful = _doubtful(inp)
            hyps = [h for h in answer_claims(inp.response_text, len(inp.response_text))
                    if h in doubtful][:cfg.max_hypotheses]
        else:
            hyps = answer_claims(inp.response_text, cfg.max_hypotheses)
        premise, cut = excerpt(inp.context.text, hyps, cfg.max_premise_chars)
        return [_Group(None, premise, hyps, cut)], "context", unresolved

    def _cited(self, inp: VerifyInput) -> tuple[list[_Group], int]:
        """Claims grouped by the source they cite (seed 003), bounded by ``max_hypotheses``."""
        docs = inp.context.documents
        corpus: Mapping[str, str] = ((inp.context.corpus or self.resources.corpus)
                                     if self.config.use_corpus else {})
        keys = doc_keys(docs)
        corpus_keys = {norm(k): k for k in corpus}
        groups: dict[str, _Group] = {}
        seen: set[tuple[str, str]] = set()
        unresolved = 0
        for pair in extract_pairs(inp.response_text):
            found = _resolve(pair.ref, docs, corpus, keys, corpus_keys)
            if found is None:
                unresolved += pair.explicit
                continue
            sid, text = found
            if (sid, pair.claim) in seen or len(seen) >= self.config.max_hypotheses:
                continue
            seen.add((sid, pair.claim))
            groups.setdefault(sid, _Group(sid, text)).hypotheses.append(pair.claim)
        for g in groups.values():
            g.premise, g.truncated = excerpt(g.premise, g.hypotheses,
                                             self.config.max_premise_chars)
        return list(groups.values()), unresolved

    # -- results -----------------------------------------------------------------------

    def _result(self, verdicts: list[_Verdict], mode: str) -> LayerResult:
        cfg = self.config
        bar = cfg.contradiction_threshold
        entailed = {v.hypothesis for v in verdicts if v.label == "entailment"}
        failed: dict[str, str] = {}
        for v in verdicts:
            if v.label == "contradiction" and v.confidence >= bar:
                failed[v.hypothesis] = "contradiction"
            elif (cfg.strict and v.label == "neutral" and v.confidence >= bar
                  and v.hypothesis not in entailed):
                failed.setdefault(v.hypothesis, "neutral")
        scores = [v.score for v in verdicts]
        score = min(scores) if cfg.aggregate == "min" else sum(scores) / len(scores)
        counts = {lab: sum(v.label == lab for v in verdicts)
                  for lab in ("entailment", "neutral", "contradiction")}
        label = ("contradiction" if "contradiction" in failed.values() else
                 "neutral" if failed else
                 "entailment" if counts["entailment"] == len(verdicts) else "consistent")
        evidence = [Evidence(text=v.hypothesis, status=v.label, source_id=v.source_id,
                             score=round(v.score, 4), reason=v.reason) for v in verdicts]
        explanation = (f"{len(verdicts)} hypotheses against the {mode}: "
                       f"{counts['entailment']} entailed, {counts['neutral']} neutral, "
                       f"{counts['contradiction']} contradicted")
        if failed:
            explanation += f"; failing: {len(failed)} (threshold {bar})"
        return LayerResult(
            score=min(1.0, max(0.0, score)), passed=not failed, label=label,
            explanation=explanation, evidence=evidence, failed_claims=list(failed),
            details={"premise": mode, "counts": counts, "items": [
                {"hypothesis": v.hypothesis, "source_id": v.source_id, "label": v.label,
                 "confidence": v.confidence, "score": round(v.score, 4), "reason": v.reason}
                for v in verdicts]})


def _doubtful(inp: VerifyInput) -> set[str]:
    """Answer sentences the grounding check (default settings) does not support, on
    the request's shared context index and answer analysis (memoized per request)."""

    def check() -> set[str]:
        question = build_index([("question", inp.question)]) if inp.question else None
        _, checks = check_answer(inp.response_text, context_index(inp.context), question,
                                 GroundingConfig(),
                                 answer_sentences(inp.context, inp.response_text))
        return {c.text for c in checks if c.status != "supported"}

    return inp.context.memo(  # type: ignore[no-any-return]
        f"nli.doubtful:{inp.response_text}", check)


def _reader(hypotheses: list[str], source_id: str | None) -> Callable[[Any], list[_Verdict]]:
    return lambda data: _parse(data, hypotheses, source_id)


def _parse(data: Any, hypotheses: list[str], source_id: str | None) -> list[_Verdict]:
    items = numbered_items(data, len(hypotheses))
    out = []
    for n, hyp in enumerate(hypotheses, 1):
        item = items[n]
        raw = str(item.get("label", item.get("relationship", ""))).strip().lower()
        label = _LABELS.get(raw)
        if label is None:
            raise JudgeError(f"judge gave an unknown NLI label ({shape(raw)}) "
                             f"for hypothesis {n}")
        out.append(_Verdict(hyp, source_id, label, confidence(item),
                            str(item.get("reason", item.get("explanation", "")))[:300]))
    return out


def _resolve(ref: str, docs: Sequence[Document], corpus: Mapping[str, str],
             keys: Mapping[str, int], corpus_keys: Mapping[str, str]
             ) -> tuple[str, str] | None:
    """``(source id, text)`` a citation names, as the ``citations`` layer resolves it
    (without its title/url aliases of corpus entries)."""
    if ref.startswith("#") and ref[1:].isdigit():
        n = int(ref[1:])
        if 1 <= n <= len(docs):
            return docs[n - 1].id, docs[n - 1].text
        ref = ref[1:]
    for cand in candidates(ref):
        i = keys.get(cand, keys.get(norm(cand)))
        if i is not None:
            return docs[i].id, docs[i].text
        key = cand if cand in corpus else corpus_keys.get(norm(cand))
        if key is not None:
            return key, corpus[key]
    return None
