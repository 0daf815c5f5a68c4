"""``grounding`` layer: is each answer sentence backed by the request's own context?

Model-free. For every answer sentence it checks, against the grounding context
(and the user question, whose words the assistant may legitimately repeat):

- **numbers** (units, percentages, currency, spelled-out, rounding-aware) and
  **dates** (normalized; ``"1981"`` is backed by ``"July 11, 1981"``),
- **named entities** (capitalized spans) — every content word of the entity must
  occur in the context or question,
- **content words** — the share that occurs neither in the question nor in the
  ``local_window`` context sentences that best match this sentence (a long article
  contains most words somewhere; a fabricated detail rarely sits next to the
  sentence it embellishes),
- **negation flips** — the best-matching context sentence (found through the
  context index's inverted index) covers most of the sentence but one side is
  negated and the other is not.

Each sentence gets a status: ``contradicted`` (negation flip, or a number/date
that differs from one of the same kind in the best-matching context sentence),
``unsupported`` (an entity, number or date not found, or at least
``sentence_threshold`` of its content words unsupported) or ``supported``; those
not supported are the ``failed_claims``. The answer's risk pools the sentences::

    pooled = word_weight   * unsupported content words / content words
           + entity_weight * unsupported entities / entities
           + number_weight * unsupported numbers and dates / numbers and dates
           + contradiction_weight * [any sentence contradicted]
    share    = max_weight * worst_sentence_risk + (1 - max_weight) * min(1, pooled)
    evidence = contradiction_boost * [any sentence contradicted]
             + share_weight * share
             + (1 - exp(-U / count_scale))
             + rare_weight * (1 - exp(-R / count_scale))
    score    = exp(-evidence)

where U counts the content words found neither in the context nor the question,
and R those of them with at least ``rare_min_length`` letters plus the unsupported
numbers and dates (specific tokens). A sentence's own risk (for ranking evidence)
is the share formula over that sentence alone. Counts rather than shares make one
threshold work across short QA spans, dialogue turns and multi-sentence summaries.

``passed`` means *no evidence of error* at ``threshold``; it never means
"verified" — this layer only sees surface overlap (see ``docs/layers.md`` for what
it is blind to). With no context the layer is skipped (neutral score, passed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import exp, log
from typing import ClassVar

from pydantic import Field

from gateway.answer import AnswerSentence, analyze_answer, answer_sentences
from gateway.context import GroundingContext
from gateway.layers._citation_pairs import marker_spans, norm
from gateway.quantities import extract_dates, extract_numbers
from gateway.textindex import IndexCache, TextIndex, build_index, context_index
from gateway.textutil import (
    Span,
    content_words,
    entity_candidates,
    negation_cues,
    tokenize,
    variants,
)
from gateway.verify.base import Evidence, LayerConfig, LayerResources, LayerResult, VerifyInput

__all__ = ["GroundingConfig", "GroundingLayer", "SentenceCheck", "check_answer"]

NEUTRAL_SCORE = 0.5


class GroundingConfig(LayerConfig):
    """Typed config of the ``grounding`` layer (unknown keys are errors)."""

    threshold: float = Field(0.925, ge=0.0, le=1.0)
    """``passed`` iff score >= threshold. The default flags <= 5% of faithful HaluEval
    dev answers (see docs/layers.md); raise it to catch more at more false alarms."""
    sentence_threshold: float = Field(0.5, ge=0.0, le=1.0)
    """A sentence is ``unsupported`` when this share of its content words is unsupported
    (or when any of its entities, numbers or dates is)."""
    word_weight: float = Field(0.6, ge=0.0)
    entity_weight: float = Field(0.2, ge=0.0)
    number_weight: float = Field(0.6, ge=0.0)
    contradiction_weight: float = Field(1.0, ge=0.0)
    max_weight: float = Field(0.0, ge=0.0, le=1.0)
    """Blend between the worst sentence (1.0) and the weighted mean sentence (0.0)."""
    share_weight: float = Field(0.25, ge=0.0)
    """Weight of the pooled share risk (the formula above) in the answer's evidence."""
    count_scale: float = Field(4.0, gt=0.0)
    """Unsupported-word counts saturate on this scale: ``1 - exp(-count / count_scale)``."""
    rare_weight: float = Field(0.5, ge=0.0)
    """Extra weight of unsupported *long* words (rare-looking: names, terms)."""
    rare_min_length: int = Field(7, ge=1)
    """Letters from which an unsupported word counts as rare-looking."""
    contradiction_boost: float = Field(2.0, ge=0.0)
    """Evidence added when any sentence is contradicted (on top of the share risk).
    Strong evidence: never absorbed by the allowance below."""
    opinion_weight: float = Field(0.25, ge=0.0, le=1.0)
    """Weight of unsupported words in first/second-person sentences without entities,
    numbers or dates ("I hope you enjoy it"): chit-chat, weak evidence."""
    length_allowance: float = Field(1.5, ge=0.0)
    """Evidence a faithful answer may carry by chance, per unit of answer/context length
    ratio (characters, capped at 1): an answer as long as its context must add words."""
    sentence_allowance: float = Field(1.0, ge=0.0)
    """Evidence allowed per ``ln(answer sentences)``: novelty accumulates over sentences."""
    within_allowance_weight: float = Field(0.05, ge=0.0, le=1.0)
    """Weight of the weak evidence that falls within the allowance (it still ranks
    answers, but cannot flag one on its own)."""
    negation_min_coverage: float = Field(0.6, ge=0.0, le=1.0)
    """Coverage of the best context sentence needed before a negation flip counts."""
    contradiction_window: int = Field(2, ge=1)
    """A number or date the context lacks is *contradicted* (not just unsupported) when
    one of this many best-matching context sentences states another value of its kind."""
    local_window: int = Field(3, ge=0)
    """Words must occur in one of this many best-matching context sentences (0: anywhere)."""
    use_question: bool = True
    """Treat words, numbers and dates of the user question as supported."""
    max_evidence: int = Field(20, ge=0)
    """At most this many sentences are returned as evidence (worst first)."""
    index_cache_chars: int = Field(1_000_000, ge=0)
    """Keep the indexes of recently seen contexts, up to this many characters in all
    (25–50 bytes each, measured), so a resent document is not re-indexed; 0 = off."""


@dataclass(slots=True)
class SentenceCheck:
    """The verdict on one answer sentence."""

    text: str
    status: str
    risk: float
    weight: int
    unsupported_words: list[str]
    distant_words: list[str]
    """In the context, but not in the sentences that best match this one."""
    unsupported_entities: list[str]
    unsupported_values: list[str]
    n_entities: int
    n_values: int
    negation_flip: bool
    opinion: bool
    """First/second person, no entity, number or date: chit-chat (weak evidence)."""
    source_id: str | None
    source_span: str | None


# Possibility modals right before a negation: "this may not happen" hedges, it does not
# assert the opposite of the context.
_HEDGE_BEFORE = re.compile(r"\b(?:may|might)\s+$", re.IGNORECASE)
# First/second person: a sentence about the speakers ("I do not like comedies") with no
# entity, number or date is an opinion or chit-chat, not a claim about the context.
_PERSONAL = frozenset(["i", "i'm", "im", "me", "my", "mine", "we", "our", "us", "you", "your", "yours"])


def _asserted_negation(text: str) -> bool:
    """``has_negation`` minus hedged cues ("may not", "might not")."""
    return any(not _HEDGE_BEFORE.search(text[: m.start()]) for m in negation_cues(text))


def _personal_opinion(tokens: Sequence[str], n_entities: int, n_values: int) -> bool:
    return n_entities == 0 and n_values == 0 and not _PERSONAL.isdisjoint(tokens)


def _in_name(start: int, end: int, entities: Sequence[Span]) -> bool:
    """A spelled-out value inside a capitalized name ("World War Two") is a name."""
    return any(e.start <= start and end <= e.end for e in entities)


class _LazyForms(dict[str, str | None]):
    """``index.resolve(word)`` for each word looked up, computed on first look-up."""

    def __init__(self, index: TextIndex) -> None:
        super().__init__()
        self.index = index

    def __missing__(self, word: str) -> str | None:
        form = self[word] = self.index.resolve(word)
        return form


def check_sentence(
    text: str, ctx: TextIndex, question: TextIndex | None, cfg: GroundingConfig,
    entities: Sequence[Span] | None = None,
) -> SentenceCheck:
    """Check one answer sentence against the context index (and question index).

    ``entities`` is ``entity_candidates(text)`` when the caller already has it.
    """
    dates = extract_dates(text)
    sentence = AnswerSentence(Span(text, 0, len(text)),
                              tuple(entity_candidates(text) if entities is None else entities),
                              tuple(dates), tuple(extract_numbers(text, dates)))
    tokens = tokenize(text)
    words = content_words(tokens)
    return _check(sentence, tokens, words, ctx, ctx.resolve_all(words),
                  question, question.resolve_all(words) if question is not None else None, cfg)


def _check(
    sentence: AnswerSentence, tokens: list[str], words: set[str],
    ctx: TextIndex, forms: Mapping[str, str | None],
    question: TextIndex | None, qforms: Mapping[str, str | None] | None,
    cfg: GroundingConfig,
) -> SentenceCheck:
    """:func:`check_sentence` on an analyzed sentence; ``forms`` / ``qforms`` are
    ``resolve_all`` of (at least) ``words`` on the context / question index."""
    text = sentence.span.text
    entities = sentence.entities
    if qforms is None:
        missing = sorted(w for w in words if forms[w] is None)
    else:
        missing = sorted(w for w in words if forms[w] is None and qforms[w] is None)
    missing_set = set(missing)

    bad_entities: list[str] = []
    if missing_set:  # otherwise no entity can have an unsupported word
        for ent in entities:
            if content_words(tokenize(ent.text)) & missing_set:
                bad_entities.append(ent.text)

    k = max(1, cfg.local_window, cfg.contradiction_window)
    matches = ctx.best_matches(words, k, forms) if words else []
    match = matches[0] if matches else None
    best = ctx.sentences[match.sentence] if match is not None else None
    far: list[str] = []
    if cfg.local_window and matches:
        near = frozenset().union(*(ctx.sentences[m.sentence].tokens
                                   for m in matches[:cfg.local_window]))
        far = sorted(
            w for w in words
            if w not in missing_set and near.isdisjoint(variants(w))
            and not (qforms is not None and qforms[w] is not None)
        )

    bad_values: list[str] = []
    contradicted_value = False
    dates, numbers = sentence.dates, sentence.numbers
    n_values = len(dates) + len(numbers)
    # A value the context lacks contradicts it where a best-matching sentence states
    # another of the same kind ("completed in 1899" vs "It was completed in 1889").
    # Several of them: in a short context the best match is often a sibling sentence
    # ("The Eiffel Tower is 330 m tall.") and the value sits in the next one.
    near_ids = [m.sentence for m in matches[:cfg.contradiction_window]]
    for d in dates:
        if not (ctx.has_date(d) or (question is not None and question.has_date(d))):
            bad_values.append(d.text)
            if any(ctx.dates_of(i) for i in near_ids) and not (
                    not any(ch.isdigit() for ch in d.text) and _in_name(d.start, d.end, entities)):
                contradicted_value = True
    for q in numbers:
        if not (ctx.has_number(q) or (question is not None and question.has_number(q))):
            bad_values.append(q.text)
            if near_ids and not (
                not any(ch.isdigit() for ch in q.text) and _in_name(q.start, q.end, entities)
            ) and any(
                n.kind == q.kind and (not q.unit or n.unit == q.unit)
                for i in near_ids for n in ctx.numbers_of(i)
            ):
                contradicted_value = True

    flip = (
        best is not None and match is not None
        and not _personal_opinion(tokens, len(entities), n_values)
        and _negation_flip(text, words, best.text, ctx.negated(match.sentence),
                           match.coverage, cfg.negation_min_coverage)
    )
    contradicted = flip or contradicted_value
    risk = (
        cfg.word_weight * ((len(missing) + len(far)) / len(words) if words else 0.0)
        + cfg.entity_weight * (len(bad_entities) / len(entities) if entities else 0.0)
        + cfg.number_weight * (1.0 if bad_values else 0.0)
        + cfg.contradiction_weight * (1.0 if contradicted else 0.0)
    )
    risk = min(1.0, risk)
    share = (len(missing) + len(far)) / len(words) if words else 0.0
    status = (
        "contradicted" if contradicted
        else "unsupported" if bad_entities or bad_values or share >= cfg.sentence_threshold
        else "supported"
    )
    return SentenceCheck(
        text=text, status=status, risk=risk, weight=max(1, len(words)),
        unsupported_words=missing, distant_words=far, unsupported_entities=bad_entities,
        unsupported_values=bad_values, n_entities=len(entities), n_values=n_values,
        negation_flip=flip, opinion=_personal_opinion(tokens, len(entities), n_values),
        source_id=best.doc_id if best is not None else None,
        source_span=best.text if best is not None else None,
    )


def _negation_flip(text: str, words: set[str], ctx_text: str, ctx_negated: bool,
                   coverage: float, min_coverage: float) -> bool:
    """One side negated, the other not, on the same proposition.

    The answer adding a negation to a well-covered context sentence counts. The
    context's negation counts only when its sentence is not much longer than the
    answer's (a long context sentence usually negates some clause the answer left out).
    """
    if len(words) < 3 or coverage < min_coverage:
        return False
    negated = _asserted_negation(text)
    if negated == ctx_negated:
        return False
    if negated:
        return True
    return len(content_words(tokenize(ctx_text))) <= 1.5 * len(words)


def check_answer(
    answer: str, ctx: TextIndex, question: TextIndex | None, cfg: GroundingConfig,
    sentences: Sequence[AnswerSentence] | None = None,
) -> tuple[float, list[SentenceCheck]]:
    """Score an answer: ``(score in [0, 1], per-sentence checks)``; higher = better grounded.

    ``sentences`` is ``analyze_answer(answer)`` when the caller already has it.
    """
    if sentences is None:
        sentences = analyze_answer(answer)
    # Citation markers are the citations layer's: the "1" of "[1]" or the "Smith" and
    # "2020" of "(Smith, 2020)" are nothing the answer states about the context.
    ids: set[str] = set()

    def known(key: str) -> bool:  # "[a]" cites the document with id "a"
        if not ids:
            ids.update(norm(ctx.sentences[d.base].doc_id) for d in ctx.docs)
        return key in ids

    marked = [marker_spans(s.span.text, known) for s in sentences]
    sentences = [_without_markers(s, m) if m else s for s, m in zip(sentences, marked, strict=True)]
    tokens = [tokenize(_blanked(s.span.text, m) if m else s.span.text)
              for s, m in zip(sentences, marked, strict=True)]
    word_sets = [content_words(t) for t in tokens]
    every = set[str]().union(*word_sets)
    # Each word resolved once per answer; one pass over the context for the postings
    # of them all.
    forms = ctx.resolve_all(every)
    ctx.prefetch(f for f in forms.values() if f is not None)
    # The question is asked only about words the context lacks or has far away.
    qforms = _LazyForms(question) if question is not None else None
    checks = [_check(s, t, w, ctx, forms, question, qforms, cfg)
              for s, t, w in zip(sentences, tokens, word_sets, strict=True)]
    if not checks:
        return 1.0, []
    words = sum(c.weight for c in checks)
    entities = sum(c.n_entities for c in checks)
    values = sum(c.n_values for c in checks)
    pooled = (
        cfg.word_weight * sum(len(c.unsupported_words) + len(c.distant_words) for c in checks)
        / words
        + cfg.entity_weight * (sum(len(c.unsupported_entities) for c in checks) / entities
                               if entities else 0.0)
        + cfg.number_weight * (sum(len(c.unsupported_values) for c in checks) / values
                               if values else 0.0)
        + cfg.contradiction_weight * (1.0 if any(c.status == "contradicted" for c in checks)
                                      else 0.0)
    )
    worst = max(c.risk for c in checks)
    share_risk = cfg.max_weight * worst + (1.0 - cfg.max_weight) * min(1.0, pooled)
    # Counts, not shares: a faithful short answer and a faithful long one both have
    # few words absent from the context *and* the question; what grows with a
    # fabrication is how many there are, and rare-looking (long) ones weigh more.
    # Chit-chat sentences ("Hope you enjoy it!") count at opinion_weight.
    n_unsupported = 0.0
    rare = 0.0
    for c in checks:
        w = cfg.opinion_weight if c.opinion else 1.0
        n_unsupported += w * len(c.unsupported_words)
        rare += w * sum(1 for u in c.unsupported_words if len(u) >= cfg.rare_min_length)
        rare += len(c.unsupported_values)  # a number/date is specific
    weak = (
        cfg.share_weight * share_risk
        + 1.0 - exp(-n_unsupported / cfg.count_scale)
        + cfg.rare_weight * (1.0 - exp(-rare / cfg.count_scale))
    )
    allowance = answer_allowance(answer, ctx, len(checks), cfg)
    evidence = (
        cfg.contradiction_boost * (1.0 if any(c.status == "contradicted" for c in checks) else 0.0)
        + max(0.0, weak - allowance) + cfg.within_allowance_weight * min(weak, allowance)
    )
    return exp(-evidence), checks


def _blanked(text: str, spans: Sequence[tuple[int, int]]) -> str:
    for a, b in spans:
        text = text[:a] + " " * (b - a) + text[b:]
    return text


def _without_markers(s: AnswerSentence, spans: Sequence[tuple[int, int]]) -> AnswerSentence:
    """``s`` without the entities, dates and numbers that overlap a citation marker."""
    def outside(start: int, end: int) -> bool:
        return all(end <= a or b <= start for a, b in spans)

    return AnswerSentence(s.span, tuple(e for e in s.entities if outside(e.start, e.end)),
                          tuple(d for d in s.dates if outside(d.start, d.end)),
                          tuple(q for q in s.numbers if outside(q.start, q.end)))


def answer_allowance(answer: str, ctx: TextIndex, n_sentences: int,
                     cfg: GroundingConfig) -> float:
    """Weak evidence a faithful answer of this shape may carry by chance.

    Grows with the answer/context length ratio (a reply as long as its context must
    bring in words the context lacks: dialogue turns over a one-line knowledge snippet)
    and with the number of sentences (unsupported words accumulate over a multi-sentence
    summary). Only observable request properties: the layer never knows the task.
    """
    ctx_chars = sum(len(d.text) for d in ctx.docs)
    ratio = min(1.0, len(answer) / ctx_chars) if ctx_chars else 1.0
    return (cfg.length_allowance * ratio
            + cfg.sentence_allowance * log(max(1, n_sentences)))


def _reason(c: SentenceCheck) -> str:
    parts = []
    if c.negation_flip:
        parts.append("negation differs from the best-matching context sentence")
    if c.unsupported_values:
        parts.append("values not in context: " + ", ".join(c.unsupported_values))
    if c.unsupported_entities:
        parts.append("entities not in context: " + ", ".join(c.unsupported_entities))
    if c.unsupported_words:
        parts.append("words not in context: " + ", ".join(c.unsupported_words[:12]))
    if c.distant_words:
        parts.append("words not near the matching context: " + ", ".join(c.distant_words[:12]))
    return "; ".join(parts)


class GroundingLayer:
    """Checks an answer against the request's grounding context (see module doc)."""

    name: ClassVar[str] = "grounding"
    cpu_only: ClassVar[bool] = True
    Config: ClassVar[type[LayerConfig]] = GroundingConfig

    def __init__(self, config: GroundingConfig, resources: LayerResources) -> None:
        self.config = config
        self.resources = resources
        self._indexes = IndexCache(config.index_cache_chars)

    def prepare(self, context: GroundingContext) -> None:
        """Index the context (numbers, dates and every word's posting included) before
        the answer arrives."""
        if context and context.text.strip():
            index = context_index(context, self._indexes)
            index.facts()
            index.prefetch_all()

    async def verify(self, inp: VerifyInput) -> LayerResult:
        cfg = self.config
        if not inp.context or not inp.context.text.strip():
            return LayerResult(
                score=NEUTRAL_SCORE, passed=True, skipped=True, label="skipped",
                explanation="no grounding context: nothing to check against",
            )
        ctx = context_index(inp.context, self._indexes)
        question_text = inp.question if cfg.use_question else ""
        question = build_index([("question", question_text)]) if question_text else None
        score, checks = check_answer(inp.response_text, ctx, question, cfg,
                                     answer_sentences(inp.context, inp.response_text))
        counts = {s: sum(1 for c in checks if c.status == s)
                  for s in ("supported", "unsupported", "contradicted")}
        failed = [c for c in checks if c.status != "supported"]
        ranked = sorted(checks, key=lambda c: -c.risk)[: cfg.max_evidence]
        evidence = [
            Evidence(text=c.text, status=c.status, source_id=c.source_id,
                     source_span=c.source_span, score=round(1.0 - c.risk, 4), reason=_reason(c))
            for c in ranked
        ]
        passed = score >= cfg.threshold
        label = ("contradicted" if counts["contradicted"]
                 else "unsupported" if counts["unsupported"] else "supported")
        return LayerResult(
            score=score,
            passed=passed,
            label=label,
            explanation=(
                f"{len(checks)} sentence(s): {counts['supported']} supported, "
                f"{counts['unsupported']} unsupported, {counts['contradicted']} contradicted "
                f"by the context; score {score:.2f} "
                f"{'>=' if passed else '<'} threshold {cfg.threshold:.2f}"
            ),
            evidence=evidence,
            failed_claims=[c.text for c in failed],
            details={"sentences": len(checks), **counts},
        )
