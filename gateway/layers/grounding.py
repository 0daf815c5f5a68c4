"""``grounding`` layer: is each answer sentence backed by the request's own context?

Model-free. For every answer sentence it checks, against the grounding context:

- **values with their units** — a number is read with its unit, dimension, hedge and
  bound (``gateway.text.measures``) and found when the context states the same
  quantity in any unit, rounded or within a bound; or **derived** from stated values
  (``gateway.text.derive``); **dates** likewise;
- **names** — entity candidates, plus an opening word the context writes as a name;
- **binding** — a found value, date or name whose frame (the words around it) a
  context slot holding another filler matches much better is on the wrong event or in
  the wrong place (``_grounding_facts``); a name the context lacks, copied into another
  name's place, is substituted;
- **negation and directions, clause by clause** (``_grounding_polarity``), with
  answer particles, rejected alternatives and prefix negation understood;
- **the question's premise** — "Yes" to a premise the context contradicts, "No" to one
  it states (``_grounding_premise``); the question's values and names support nothing
  the context states otherwise;
- **what the answer adds to the question** — an answer to a question on a passage
  whose own words (those the question lacks) are all absent from the context fills the
  asked slot with something the context does not say (``_grounding_novelty``); one
  that picks the alternative of "A or B?" the context does not give the asked property
  to (``gateway.text.choice``), or leaves the slot vague ("a few albums"; no year for
  "what year": ``gateway.text.vague``);
- **content words** — the share found neither in the question nor in the
  ``local_window`` context sentences that best match this sentence; conversational
  formulas state nothing.

Each sentence gets a status: ``contradicted``, ``unsupported`` or ``supported``; those
not supported are the ``failed_claims``. The answer's score pools them (strong
evidence: any contradiction, outside a long document; weak: unsupported counts beyond
a chance allowance for the answer's length and sentences) and is calibrated per request
shape (``_grounding_shape``: passage, conversation, document)::

    score = exp(-shape_scale[shape] * evidence)

The formula and every constant: ``docs/layers.md``. ``passed`` means *no evidence of
error* at ``threshold``; it never means "verified" — the layer compares surface forms,
not meaning (see ``docs/layers.md`` for what it is blind to). With no context the
layer is skipped (neutral score, passed).
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field

from gateway.layers._grounding_answer import AnswerShare, answer_allowance, check_answer, core_key
from gateway.layers._grounding_sentence import SentenceCheck, check_sentence
from gateway.layers._grounding_shape import request_shape
from gateway.layers.base import Evidence, LayerConfig, LayerResources, LayerResult, VerifyInput
from gateway.sources.context import GroundingContext
from gateway.text.answer import answer_sentences
from gateway.text.byline import strip_attributions
from gateway.text.context_facts import context_facts
from gateway.text.index import IndexCache, build_index, context_index

__all__ = ["GroundingConfig", "GroundingLayer", "SentenceCheck", "answer_allowance",
           "check_answer", "check_sentence"]

NEUTRAL_SCORE = 0.5
SHARE_KEY = "gateway.layers.grounding.share"
"""Memo key of the request's :class:`AnswerShare` (the sentence cores its grounding
layers share)."""
_EMPTY_TAGS = re.compile(r"<(\w+)[^<>]*>\s*</\1>")


def _without_blocks(asked: str, context: GroundingContext) -> str:
    """The user's question without the context blocks its message carries ("<context>…
    </context> How tall is it?" asks "How tall is it?"): the documents are what the answer
    is checked against, not words the user asked with (an answer that copies them does
    not "repeat the question")."""
    if "<" not in asked:
        return asked
    for doc in context.documents:
        if doc.kind == "block" and doc.text and doc.text in asked:
            asked = asked.replace(doc.text, " ")
    return _EMPTY_TAGS.sub(" ", asked).strip()


QUESTION_KEY = "gateway.layers.grounding.question:"
"""Memo key prefix of the question's index (built once per request)."""


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
    name_rarity: float = Field(4.0, ge=0.0)
    """Each unsupported name counts this much among the rare-looking specifics, in the
    ``passage`` shape (a conversation brings in names of its own; a document's summary
    renames freely)."""
    rare_min_length: int = Field(7, ge=1)
    """Letters from which an unsupported word counts as rare-looking."""
    contradiction_boost: float = Field(2.0, ge=0.0)
    """Evidence added when any sentence is contradicted (on top of the share risk).
    Strong evidence: never absorbed by the allowance below."""
    opinion_weight: float = Field(0.25, ge=0.0, le=1.0)
    """Weight of unsupported words in first/second-person sentences without entities,
    numbers or dates ("I hope you enjoy it"): chit-chat, weak evidence."""
    anchored_word_weight: float = Field(0.5, ge=0.0, le=1.0)
    """Weight of unsupported words in a sentence whose values and names the context all
    has (mostly paraphrase: "finished on 31 March 1889"), in the ``passage`` shape (a
    document's summary names what it found there and still makes things up)."""
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
    negation_scope: bool = False
    """A negation flip counts only when the other clause uses the word the negation
    governs ("will not *return*" is not flipped by "the festival's cancellation";
    ``gateway.text.negation_scope``). On by default."""
    contradiction_window: int = Field(2, ge=1)
    """A number or date the context lacks is *contradicted* (not just unsupported) when
    one of this many best-matching context sentences states another value of its kind."""
    bind_min: float = Field(1.5, ge=0.0)
    """Frame similarity (IDF-weighted shared words around a fact) a context slot holding
    *another* value or name needs before it can contradict the answer's (wrong event,
    swapped name)."""
    bind_ratio: float = Field(1.4, ge=1.0)
    bind_margin: float = Field(0.3, ge=0.0)
    """That slot must beat ``bind_ratio`` x the best slot holding the answer's own value
    (or date) plus ``bind_margin``."""
    substitute_min: float = Field(2.0, ge=0.0)
    """Frame similarity for a name the context lacks to count as put in another's place."""
    name_variants: bool = True
    """A name the context lacks that keeps all but one word of a name an aligned context
    sentence holds, the other word new to the context ("Tom *Hanks*" for Tom Cruise,
    "AFC *East*" for AFC South), is substituted (``gateway.text.name_variants``). On by
    default (see ``FINISH_ONLY``: a job's layers share their work only when it agrees)."""
    comparisons: bool = True
    """An answer to a date comparison ("Who was born first, A or B?") that picks the
    alternative the context's years rule out is contradicted
    (``gateway.text.comparison``). On by default."""
    document_binding_weak: bool = True
    """In the ``document`` shape (a summary), a contradiction found only by binding a
    *name* — one the context puts on another slot, a renamed or substituted name — is
    weak evidence, as in a long context: a summary renames and regroups (HaluEval
    development summaries: 5 of the 13 such contradictions were on faithful summaries).
    A value or date bound elsewhere or stated otherwise, a flipped negation or a false
    premise stay strong. On by default."""
    document_unit_strong: bool = True
    """In the ``document`` shape, a value the context states otherwise in the same unit
    and in the aligned sentences ("20 seconds" where the context says "11 seconds"),
    by a quarter or more but less than tenfold, raises the answer's evidence to
    ``novelty_boost`` even in a long context, where a contradiction is otherwise weak
    (``_grounding_units``): a disclaimer, never a block on its own. On by default."""
    question_novelty: bool = True
    """In the ``passage`` shape, an answer to a question whose own words (those the
    question lacks) are all absent from the context in any form, with no context value
    either — or one that only repeats the question, or denies what a wh-question asks
    for — is unsupported with at least ``novelty_boost`` of evidence: it fills the asked
    slot with something the context does not say (``_grounding_novelty``). On by
    default."""
    choice_questions: bool = True
    """In the ``passage`` shape, an answer to a choice question ("Who is the frontman of
    Lagwagon, Joey Cape or Scott Weiland?") that picks the alternative whose context
    sentences lack the question's other words, while the other's carry them, is
    unsupported like ``question_novelty``'s (``gateway.text.choice``). On by default."""
    vague_answers: bool = True
    """In the ``passage`` shape, an answer to a wh-question that fills the asked slot
    with a vague amount neither the context nor the question uses ("a few albums",
    "for many years"), or gives no year where the question asks for one, is unsupported
    like ``question_novelty``'s (``gateway.text.vague``). On by default."""
    document_free_words: float = Field(2.0, ge=0.0)
    """In the ``document`` shape, this many unsupported words (weighted as counted) carry
    no weak evidence of their own: a summary brings in a couple of words of its own — a
    paraphrase ("plea", "pretenders"), a connective — whatever its length, and a
    one-sentence summary of a long article gets almost no length allowance. They still
    count in the pooled share. HaluEval development summaries (425 faithful): with 2
    and the document scale 0.35 -> 0.50, 15 -> 8 faithful flagged and 101 -> 103
    hallucinated caught (docs/layers.md). 0: off."""
    corrections: bool = True
    """In the ``conversation`` shape, a reply sentence that corrects the conversation
    ("Actually, …", "in fact") and asserts names, numbers or words the context lacks
    makes the reply unsupported with at least ``correction_boost`` of evidence
    (``_grounding_correction``): a disclaimer at most on its own. On by default."""
    role_credits: bool = True
    """Outside the ``document`` shape, a sentence that credits a work to a person the
    context and the question never name, in a role the context gives another person
    beside the same work's words ("Les Misérables was written by William Shakespeare"
    against "Les Misérables is written by Victor Hugo"), makes the answer unsupported
    (``gateway.text.roles``): a disclaimer (``correction_boost`` in a conversation,
    ``novelty_boost`` in a passage). On by default."""
    correction_boost: float = Field(1.0, ge=0.0)
    """The evidence ``corrections`` raises such a reply's to, at least (1.0: a
    disclaimer at the shipped conversation scale, never a block on its own)."""
    novelty_boost: float = Field(0.5, ge=0.0)
    """The evidence ``question_novelty`` raises such an answer's to, at least (0.5: a
    disclaimer at the shipped passage scale; a block only with other evidence)."""
    attribution_prefixes: bool = True
    """In a ``document``-shaped request, a sentence's opening attribution ("Errol Louis:
    …", "Report: …") is no claim: dropped before checking
    (``gateway.text.byline``). On by default."""
    shape_scale: dict[str, float] = Field(
        default_factory=lambda: {"passage": 1.49, "conversation": 0.468, "document": 0.632})
    """Evidence scale per request shape (``_grounding_shape``: passage, conversation,
    document): per-task calibration, so that ``threshold`` flags about the same share of
    faithful answers in each (fitted with cross-validation, docs/layers.md)."""
    shape_power: dict[str, float] = Field(default_factory=dict)
    """Per request shape, the exponent that shapes the *pass band* of the score
    (``gateway.scoring.task_calibration``): scores of passed answers made comparable
    across shapes, no verdict changed; missing shapes: 1 (the plain ``exp`` form)."""
    long_context_boost: float = Field(0.0, ge=0.0)
    """``contradiction_boost`` for a context of more than ``long_context_sentences``."""
    long_context_sentences: int = Field(12, ge=1)
    summary_context_sentences: int | None = Field(None, ge=0)
    """A request that asks for a summary (``gateway.text.task``) over a context of more
    than this many sentences is calibrated as a ``document``; ``None``: only contexts
    of more than ``long_context_sentences`` are."""
    """Above this many context sentences binding contradictions (a value on another
    event, a swapped or substituted name) count as weak evidence only: in a long
    document a competing slot turns up by chance (HaluEval dev summaries: 5 of 9)."""
    local_window: int = Field(3, ge=0)
    """Words must occur in one of this many best-matching context sentences (0: anywhere)."""
    use_question: bool = True
    """Treat words, numbers and dates of the user question as supported."""
    max_evidence: int = Field(20, ge=0)
    """At most this many sentences are returned as evidence (worst first)."""
    index_cache_chars: int = Field(1_000_000, ge=0)
    """Keep the indexes of recently seen contexts, up to this many characters in all
    (25–50 bytes each, measured), so a resent document is not re-indexed; 0 = off."""


def _reason(c: SentenceCheck) -> str:
    parts = []
    if c.negation_flip:
        parts.append("negation differs from the context's "
                     f"\"{(c.negated_clause or '')[:120]}\"")
    parts += [f.why for f in c.facts or () if f.status == "contradicted" and f.why]
    if c.premise:
        parts.append(c.premise)
    if c.unsupported_values:
        parts.append("values not in context: " + ", ".join(c.unsupported_values))
    if c.unsupported_entities:
        parts.append("entities not in context: " + ", ".join(c.unsupported_entities))
    if c.unsupported_words:
        parts.append("words not in context: " + ", ".join(c.unsupported_words[:12]))
    if c.distant_words:
        parts.append("words not near the matching context: " + ", ".join(c.distant_words[:12]))
    return "; ".join(parts)


def _has_text(context: GroundingContext) -> bool:
    """``context.text.strip() != ""`` without joining the documents: the join's
    separators are whitespace, and ``str.isspace`` stops at the first other character."""
    return any(d.text and not d.text.isspace() for d in context.documents)


class GroundingLayer:
    """Checks an answer against the request's grounding context (see module doc)."""

    name: ClassVar[str] = "grounding"
    cpu_only: ClassVar[bool] = True
    Config: ClassVar[type[LayerConfig]] = GroundingConfig

    def __init__(self, config: GroundingConfig, resources: LayerResources) -> None:
        self.config = config
        self.resources = resources
        self._indexes = IndexCache(config.index_cache_chars)
        self._core_key = core_key(config)

    def prepare(self, context: GroundingContext) -> None:
        """Index the context (numbers, dates and every word's posting included) before
        the answer arrives; the rest of its analysis waits for an answer to ask."""
        if context and context.text.strip():
            index = context_index(context, self._indexes)
            index.facts()
            index.prefetch_all()
            context_facts(index).prepare()  # proper names, the sorted vocabulary

    async def verify(self, inp: VerifyInput) -> LayerResult:
        cfg = self.config
        if not inp.context or not _has_text(inp.context):
            return LayerResult(
                score=NEUTRAL_SCORE, passed=True, skipped=True, label="skipped",
                explanation="no grounding context: nothing to check against",
            )
        ctx = context_index(inp.context, self._indexes)
        # Held while this runs: every context_facts(ctx) below finds it alive (the index
        # keeps only a weak reference) instead of building another per call (~12 a job).
        _facts = context_facts(ctx)
        asked = inp.question  # read from the messages on each access
        question_text = _without_blocks(asked, inp.context) if cfg.use_question else ""
        question = inp.context.memo(QUESTION_KEY + question_text,
                                    lambda: build_index([("question", question_text)])
                                    ) if question_text else None
        shape = request_shape(inp.messages, asked, len(ctx.sentences),
                              cfg.long_context_sentences, cfg.summary_context_sentences)
        answer = inp.response_text
        if cfg.attribution_prefixes and shape == "document":
            answer = strip_attributions(answer)
        # The job's other grounding layers (a candidate policy's) share the sentence cores.
        score, checks = check_answer(answer, ctx, question, cfg,
                                     answer_sentences(inp.context, answer), shape,
                                     inp.context.memo(SHARE_KEY, AnswerShare), self._core_key)
        counts = dict.fromkeys(("supported", "unsupported", "contradicted"), 0)
        for c in checks:  # (one pass)
            if c.status in counts:
                counts[c.status] += 1
        failed = [c for c in checks if c.status != "supported"]
        # brief (the pipeline): no evidence read, so none ranked and built.
        evidence = [] if inp.brief else [
            Evidence(text=c.text, status=c.status, source_id=c.source_id,
                     source_span=c.source_span, score=round(1.0 - c.risk, 4), reason=_reason(c))
            for c in sorted(checks, key=lambda c: -c.risk)[: cfg.max_evidence]
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
            details={} if inp.brief else {"sentences": len(checks), "shape": shape, **counts},
        )
