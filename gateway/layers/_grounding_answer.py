"""The ``grounding`` layer's answer score: every sentence checked, then pooled.

:func:`check_answer` runs :func:`~gateway.layers._grounding_sentence.check_analyzed`
on each answer sentence (citation markers blanked out: they are the citations
layer's) and pools the checks into the answer's score with the formula in
:mod:`gateway.layers.grounding`'s docstring; :func:`answer_allowance` is the weak
evidence a faithful answer of its shape may carry by chance.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import exp, log
from typing import TYPE_CHECKING

from gateway.layers._citation_pairs import marker_spans, norm
from gateway.layers._grounding_correction import unsupported_correction
from gateway.layers._grounding_novelty import adds_nothing, denies_the_asked, negated
from gateway.layers._grounding_premise import check_stance
from gateway.layers._grounding_sentence import (
    FINISH_ONLY,
    SentenceCheck,
    SentenceCore,
    finish_check,
    question_facts,
    sentence_core,
    sentence_options,
)
from gateway.layers._grounding_units import same_unit_conflict
from gateway.scoring.task_calibration import calibrated_score
from gateway.text.answer import AnswerSentence, analyze_answer
from gateway.text.choice import choice_conflict
from gateway.text.comparison import comparison_conflict
from gateway.text.correction import may_correct
from gateway.text.frames import frame_words
from gateway.text.index import TextIndex
from gateway.text.roles import credits_someone, role_conflict
from gateway.text.tokens import content_words, tokenize
from gateway.text.vague import vague_answer

if TYPE_CHECKING:
    from gateway.layers.grounding import GroundingConfig

__all__ = ["AnswerShare", "answer_allowance", "check_answer", "core_key"]


class _LazyForms(dict[str, str | None]):
    """``index.resolve(word)`` for each word looked up, computed on first look-up."""

    def __init__(self, index: TextIndex) -> None:
        super().__init__()
        self.index = index

    def __missing__(self, word: str) -> str | None:
        form = self[word] = self.index.resolve(word)
        return form


def check_answer(
    answer: str, ctx: TextIndex, question: TextIndex | None, cfg: GroundingConfig,
    sentences: Sequence[AnswerSentence] | None = None, shape: str | None = None,
    share: AnswerShare | None = None, key: str | None = None,
) -> tuple[float, list[SentenceCheck]]:
    """Score an answer: ``(score in [0, 1], per-sentence checks)``; higher = better grounded.

    ``sentences`` is ``analyze_answer(answer)`` when the caller already has it; ``shape``
    the request's (``_grounding_shape``; ``None``: ``document`` for a long context, else
    ``passage``), which picks the evidence scale and whether contradictions are strong.
    ``share``: where the verifications of one job keep the answer's sentence cores
    (:class:`AnswerShare`), under ``key`` (``core_key(cfg)``, computed when ``None``);
    the result is the same with or without it.
    """
    if sentences is None:
        sentences = analyze_answer(answer)
    if shape is None:
        shape = "document" if len(ctx.sentences) > cfg.long_context_sentences else "passage"
    cores = None
    if share is not None:
        key = core_key(cfg) if key is None else key
        cores = share.cores(key, answer, ctx, question, sentences)
    if cores is None:
        cores = _cores(ctx, question, cfg, sentences)
        if share is not None:
            assert key is not None
            share.keep(key, answer, ctx, question, sentences, cores)
    checks = [finish_check(core, ctx, cfg) for core in cores]
    if not checks:
        return 1.0, []
    if question is not None:
        asked = " ".join(s.text for s in question.sentences)
        why = check_stance(checks[0], asked, ctx, cfg)
        if why is None and cfg.comparisons and checks[0].status != "contradicted":
            why = comparison_conflict(asked, lambda: (s.text for s in ctx.sentences), answer)
        if why is not None:
            checks[0].status = "contradicted"
            checks[0].premise = why
            checks[0].risk = min(1.0, checks[0].risk + cfg.contradiction_weight)
    novel = _novelty(answer, checks, cores, ctx, question, cfg, shape)
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
    # A reply as long as its context must bring in names of its own (a dialogue turn over
    # a one-line snippet); a short answer to a long passage has no such excuse.
    name_rarity = cfg.name_rarity if shape == "passage" else 0.0
    for c in checks:
        w = (cfg.opinion_weight if c.opinion else
             cfg.anchored_word_weight if c.anchored and c.status != "contradicted"
             and shape == "passage" else 1.0)
        n_unsupported += w * len(c.unsupported_words)
        rare += w * sum(1 for u in c.unsupported_words if len(u) >= cfg.rare_min_length)
        rare += len(c.unsupported_values)  # a number/date is specific
        rare += name_rarity * len(c.unsupported_entities)  # and so is a name
    if shape == "document":  # a summary's own couple of words (GroundingConfig)
        n_unsupported = max(0.0, n_unsupported - cfg.document_free_words)
    weak = (
        cfg.share_weight * share_risk
        + 1.0 - exp(-n_unsupported / cfg.count_scale)
        + cfg.rare_weight * (1.0 - exp(-rare / cfg.count_scale))
    )
    allowance = answer_allowance(answer, ctx, len(checks), cfg)
    # A long document offers a competing value, name or clause by chance: there a
    # contradiction is weak evidence (in the share above), never strong on its own.
    # (By length, not shape: a summary of a shorter text is calibrated as a document but
    # its contradictions stay strong.)
    boost = (cfg.long_context_boost if shape == "document"
             and (len(ctx.sentences) > cfg.long_context_sentences
                  or cfg.document_binding_weak and _names_bound_only(checks))
             else cfg.contradiction_boost)
    evidence = (
        boost * (1.0 if any(c.status == "contradicted" for c in checks) else 0.0)
        + max(0.0, weak - allowance) + cfg.within_allowance_weight * min(weak, allowance)
    )
    if boost != cfg.contradiction_boost and cfg.document_unit_strong and \
            any(c.status == "contradicted" and same_unit_conflict(c.facts) for c in checks):
        novel = max(novel, cfg.novelty_boost)  # a figure restated wrongly (_grounding_units)
    if cfg.corrections and shape == "conversation" and novel < cfg.correction_boost \
            and may_correct(answer):
        novel = max(novel, _correction(checks, cfg))
    if cfg.role_credits and shape != "document" and question is not None \
            and novel < cfg.novelty_boost:
        novel = max(novel, _role_credit(checks, ctx, question, cfg, shape))
    evidence = max(evidence, novel)  # at least a disclaimer; a block needs other evidence
    return calibrated_score(evidence, shape, cfg.threshold, cfg.shape_scale, cfg.shape_power), checks


def _correction(checks: list[SentenceCheck], cfg: GroundingConfig) -> float:
    """``cfg.correction_boost`` when a sentence corrects the conversation with what the
    context lacks (``_grounding_correction``): that sentence becomes unsupported and
    says why; 0.0 otherwise."""
    c = unsupported_correction(checks)
    if c is None:
        return 0.0
    c.status = "unsupported"
    c.premise = "corrects the conversation with what the context does not state"
    return cfg.correction_boost


def _role_credit(checks: list[SentenceCheck], ctx: TextIndex, question: TextIndex,
                 cfg: GroundingConfig, shape: str) -> float:
    """A disclaimer's evidence (``correction_boost`` in a conversation, ``novelty_boost``
    in a passage) when a sentence credits a work the context credits to another person
    in the same role (``gateway.text.roles``): that sentence becomes unsupported and says
    why; 0.0 otherwise."""
    crediting = [c for c in checks if c.status != "contradicted" and credits_someone(c.text)]
    if not crediting:
        return 0.0
    context = " ".join(s.text for s in ctx.sentences)
    asked = " ".join(s.text for s in question.sentences)
    for c in crediting:
        why = role_conflict(c.text, context, asked)
        if why is not None:
            c.status = "unsupported"
            c.premise = why
            return cfg.correction_boost if shape == "conversation" else cfg.novelty_boost
    return 0.0


def _names_bound_only(checks: Sequence[SentenceCheck]) -> bool:
    """Whether every contradiction among ``checks`` is a *name* found by binding — a name
    the context puts on another slot ("Tottenham: the context puts Spurs there") or one
    put in another's place — with no value or date contradicted, no negation or premise."""
    contradicted = [c for c in checks if c.status == "contradicted"]
    return bool(contradicted) and all(
        not c.negation_flip and c.premise is None and c.facts
        and all(f.binding and f.kind == "name" for f in c.facts if f.status == "contradicted")
        and any(f.status == "contradicted" for f in c.facts)
        for c in contradicted)


def _novelty(answer: str, checks: list[SentenceCheck], cores: Sequence[SentenceCore],
             ctx: TextIndex, question: TextIndex | None, cfg: GroundingConfig,
             shape: str) -> float:
    """``cfg.novelty_boost`` when an answer to a question on a passage adds nothing the
    context holds (``_grounding_novelty``): its sentences become unsupported and the
    first says why. The answer's evidence is raised to at least this (not absorbed by
    the allowance, never a block on its own); 0.0 otherwise."""
    if not cfg.question_novelty or shape != "passage" or question is None or \
            not question.sentences or any(c.status == "contradicted" for c in checks) or \
            not any("?" in s.text for s in question.sentences):
        return 0.0
    tokens = [core.tokens for core in cores]
    if negated(answer):
        why = denies_the_asked(answer, tokens, question)
    else:
        words = set[str]().union(*(core.words for core in cores))
        why = adds_nothing(answer, checks, tokens, words, ctx, question)
    if why is None and (cfg.choice_questions or cfg.vague_answers):
        asked = " ".join(s.text for s in question.sentences)
        if cfg.choice_questions:
            why = choice_conflict(asked, lambda: (s.text for s in ctx.sentences), answer)
        if why is None and cfg.vague_answers:
            why = vague_answer(asked, lambda: " ".join(s.text for s in ctx.sentences), answer)
    if why is None:
        return 0.0
    for c in checks:
        if c.status == "supported":
            c.status = "unsupported"
    checks[0].premise = why
    return cfg.novelty_boost


class AnswerShare:
    """The sentence cores of the answers one job checked (``check_answer``'s ``share``).

    A job verifies its answer with its policy and then its candidates; ``grounding``
    layers among them whose configurations differ only in :data:`FINISH_ONLY` fields
    (the shipped ``default`` and ``grounding`` policies' do) read the answer alike. The
    cores are kept per (:func:`core_key` of the configuration, answer, its analysed
    sentences, context index, question index) — the objects compared by identity, as the
    request's memo holds them — and never mutated (``finish_check`` builds new checks)."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: list[tuple[str, str, object, TextIndex, TextIndex | None,
                               list[SentenceCore]]] = []

    def cores(self, key: str, answer: str, ctx: TextIndex, question: TextIndex | None,
              sentences: object) -> list[SentenceCore] | None:
        for k, text, sents, c, q, cores in self._kept:
            if c is ctx and q is question and sents is sentences and k == key \
                    and text == answer:
                return cores
        return None

    def keep(self, key: str, answer: str, ctx: TextIndex, question: TextIndex | None,
             sentences: object, cores: list[SentenceCore]) -> None:
        self._kept.append((key, answer, sentences, ctx, question, cores))


def core_key(cfg: GroundingConfig) -> str:
    """The values of every configuration field the sentence cores may read (all but
    :data:`FINISH_ONLY`): two configurations with the same key get the same cores."""
    return repr(sorted((k, v) for k, v in cfg.model_dump().items() if k not in FINISH_ONLY))


def _cores(ctx: TextIndex, question: TextIndex | None, cfg: GroundingConfig,
           sentences: Sequence[AnswerSentence]) -> list[SentenceCore]:
    """Each answer sentence's :class:`SentenceCore` (citation markers blanked out)."""
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
    qfacts = question_facts(question, ctx, cfg)
    topic = _topic(question, word_sets)
    opts = sentence_options(cfg, ctx)
    return [sentence_core(s, t, w, ctx, forms, question, qforms, cfg, qfacts,
                          topic if i == 0 else (), opts)
            for i, (s, t, w) in enumerate(zip(sentences, tokens, word_sets, strict=True))]


TOPIC_WEIGHT = 0.5
"""Weight of the question's words in the frame of a short answer's values and names."""
TOPIC_MAX_WORDS = 8


def _topic(question: TextIndex | None, word_sets: Sequence[set[str]]) -> list[tuple[str, float]]:
    """The question's stems, a frame for a short first sentence ("Around 1450, in Mainz."
    answers "When was the Gutenberg Bible completed?")."""
    if question is None or not question.sentences or not word_sets or \
            len(word_sets[0]) > TOPIC_MAX_WORDS:
        return []
    last = question.sentences[-1]
    keys = {k for k in (frame_words(t) for t in last.tokens) if k is not None}
    return [(k, TOPIC_WEIGHT) for k in sorted(keys)]


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


def _length_ratio(answer: str, ctx: TextIndex) -> float:
    """Answer/context length in characters, capped at 1."""
    ctx_chars = sum(len(d.text) for d in ctx.docs)
    return min(1.0, len(answer) / ctx_chars) if ctx_chars else 1.0


def answer_allowance(answer: str, ctx: TextIndex, n_sentences: int,
                     cfg: GroundingConfig) -> float:
    """Weak evidence a faithful answer of this shape may carry by chance.

    Grows with the answer/context length ratio (a reply as long as its context must
    bring in words the context lacks: dialogue turns over a one-line knowledge snippet)
    and with the number of sentences (unsupported words accumulate over a multi-sentence
    summary). Only observable request properties: the layer never knows the task.
    """
    return (cfg.length_allowance * _length_ratio(answer, ctx)
            + cfg.sentence_allowance * log(max(1, n_sentences)))


