"""The ``grounding`` layer's sentence check: one answer sentence against the context.

:func:`check_sentence` (and :func:`check_analyzed`, for a sentence already
analyzed) gives a :class:`SentenceCheck`: which content words, entities, numbers and
dates the context (or the question) does not back, whether a value or a negation
contradicts the best-matching context sentence, and the sentence's status and risk.
How the answer's score pools the sentences is :mod:`gateway.layers._grounding_answer`;
the formulas are in :mod:`gateway.layers.grounding`'s docstring.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gateway.layers._grounding_facts import FactCheck, FactOptions, check_facts
from gateway.layers._grounding_polarity import AnswerClauses, clause_flip
from gateway.layers._grounding_question import QuestionFacts
from gateway.layers._grounding_question import question_facts as read_question
from gateway.text.answer import AnswerSentence
from gateway.text.context_facts import context_facts
from gateway.text.frames import clauses
from gateway.text.index import IndexedSentence, Match, TextIndex
from gateway.text.measures import sentence_measures, years_as_measures
from gateway.text.names import names_in
from gateway.text.phatic import PHATIC_WORDS, is_phatic
from gateway.text.polarity import FlipCues, contrast_spans, flip_cues, leading_particle
from gateway.text.quantities import extract_quantities
from gateway.text.stem import stem
from gateway.text.tokens import (
    STOPWORDS,
    Span,
    content_words,
    entity_candidates,
    negation_cues,
    tokenize,
    variants,
)

if TYPE_CHECKING:
    from gateway.layers.grounding import GroundingConfig

__all__ = ["FINISH_ONLY", "SentenceCheck", "SentenceCore", "check_analyzed", "check_sentence",
           "finish_check", "sentence_core", "sentence_options"]


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
    facts: list[FactCheck] | None = None
    """The values, dates and names checked (see ``_grounding_facts``)."""
    negated_clause: str | None = None
    """The context clause whose polarity differs (``negation_flip``)."""
    premise: str | None = None
    """Why its opening "Yes"/"No" contradicts the context (``_grounding_premise``)."""
    anchored: bool = False
    """It states values or names, and the context has every one of them."""


# Possibility modals right before a negation: "this may not happen" hedges, it does not
# assert the opposite of the context.
_HEDGE_BEFORE = re.compile(r"\b(?:may|might)\s+$", re.IGNORECASE)
# First/second person: a sentence about the speakers ("I do not like comedies") with no
# entity, number or date is an opinion or chit-chat, not a claim about the context.
_PERSONAL = frozenset(["i", "i'm", "im", "me", "my", "mine", "we", "our", "us", "you", "your", "yours"])


def _asserted_negation(text: str) -> bool:
    """``has_negation`` minus hedged cues ("may not", "might not")."""
    return any(not _HEDGE_BEFORE.search(text[: m.start()]) for m in negation_cues(text))


_FIRST_PERSON = frozenset(["i", "i'm", "im", "me", "my", "mine", "we", "our", "us"])


def _personal_opinion(tokens: Sequence[str], n_entities: int, n_values: int) -> bool:
    return n_entities == 0 and n_values == 0 and not _PERSONAL.isdisjoint(tokens)


def _speaker(tokens: Sequence[str], n_entities: int, n_values: int) -> str | None:
    """``"first"`` for a fact-free sentence about the speaker ("I do not like comedies":
    an opinion, never a flip), ``"second"`` for one addressed to the user ("you do not
    need to…": checked when a context clause covers it well), else ``None``."""
    if n_entities or n_values:
        return None
    if not _FIRST_PERSON.isdisjoint(tokens):
        return "first"
    return "second" if not _PERSONAL.isdisjoint(tokens) else None


def _cues(tokens: Sequence[str], words: set[str] | None = None,
          ) -> tuple[FlipCues, Callable[[frozenset[str]], bool]]:
    """The sentence's flip cues, and whether it has a word of some stems (computed on
    demand, stopwords aside); ``words``: ``set(tokens)`` when the caller has it."""
    if words is None:
        words = set(tokens)
    stems: list[frozenset[str]] = []

    def has(wanted: frozenset[str]) -> bool:
        if not stems:
            stems.append(frozenset(stem(w) for w in words - STOPWORDS))
        return not wanted.isdisjoint(stems[0])

    return flip_cues(words, lambda: tokens), has


def _in_name(start: int, end: int, entities: Sequence[Span]) -> bool:
    """A spelled-out value inside a capitalized name ("World War Two") is a name."""
    return any(e.start <= start and end <= e.end for e in entities)


def question_facts(question: TextIndex | None, ctx: TextIndex,
                   cfg: GroundingConfig) -> QuestionFacts | None:
    """The question's values, dates and names (read once per answer)."""
    if question is None:
        return None
    return read_question(question, context_facts(ctx), fact_options(cfg))


_OPTIONS: dict[tuple[int, bool], tuple[GroundingConfig, FactOptions]] = {}
""":func:`fact_options` per loaded configuration (by identity; the configuration is kept
with its entry, so its id is not reused while the entry lives)."""
_OPTIONS_MAX = 256


def fact_options(cfg: GroundingConfig, binding: bool = True) -> FactOptions:
    """The fact options of ``cfg`` (built once per configuration object: a loaded
    policy's configuration is frozen; the options are never changed by their readers)."""
    key = (id(cfg), binding)
    hit = _OPTIONS.get(key)
    if hit is not None and hit[0] is cfg:
        return hit[1]
    opts = FactOptions(window=cfg.contradiction_window, bind_min=cfg.bind_min,
                       bind_ratio=cfg.bind_ratio, bind_margin=cfg.bind_margin,
                       substitute_min=cfg.substitute_min, binding=binding,
                       name_variants=cfg.name_variants)
    if len(_OPTIONS) >= _OPTIONS_MAX:  # policies reloaded many times: start again
        _OPTIONS.clear()
    _OPTIONS[key] = (cfg, opts)
    return opts


def sentence_options(cfg: GroundingConfig, ctx: TextIndex) -> FactOptions:
    """The fact options of an answer sentence against ``ctx``: no binding in a document
    (more than ``long_context_sentences``)."""
    return fact_options(cfg, binding=len(ctx.sentences) <= cfg.long_context_sentences)


def check_sentence(
    text: str, ctx: TextIndex, question: TextIndex | None, cfg: GroundingConfig,
    entities: Sequence[Span] | None = None, *, opinions: bool = True,
) -> SentenceCheck:
    """Check one answer sentence against the context index (and question index).

    ``entities`` is ``entity_candidates(text)`` when the caller already has it.
    """
    dates, numbers = extract_quantities(text)
    sentence = AnswerSentence(Span(text, 0, len(text)),
                              tuple(entity_candidates(text) if entities is None else entities),
                              tuple(dates), tuple(numbers))
    tokens = tokenize(text)
    words = content_words(tokens)
    return check_analyzed(sentence, tokens, words, ctx, ctx.resolve_all(words),
                          question, question.resolve_all(words) if question is not None
                          else None, cfg, question_facts(question, ctx, cfg),
                          opinions=opinions)


def check_analyzed(
    sentence: AnswerSentence, tokens: list[str], words: set[str],
    ctx: TextIndex, forms: Mapping[str, str | None],
    question: TextIndex | None, qforms: Mapping[str, str | None] | None,
    cfg: GroundingConfig, qfacts: QuestionFacts | None = None,
    topic: Sequence[tuple[str, float]] = (), *, opinions: bool = True,
) -> SentenceCheck:
    """:func:`check_sentence` on an analyzed sentence; ``forms`` / ``qforms`` are
    ``resolve_all`` of (at least) ``words`` on the context / question index."""
    return finish_check(sentence_core(sentence, tokens, words, ctx, forms, question, qforms,
                                      cfg, qfacts, topic), ctx, cfg, opinions=opinions)


@dataclass(slots=True)
class SentenceCore:
    """What :func:`check_analyzed` finds before the negation check and the scoring: the
    words, values and names the context does not back, and the alignment. It reads no
    field of the configuration in :data:`FINISH_ONLY`, so the verifications of one job
    whose configurations differ only there share it (``_grounding_answer``). Never
    mutated once built, but for ``clauses``, which only caches what the negation check
    reads of this sentence and its aligned context sentences (the same for every
    configuration sharing the core)."""

    text: str
    tokens: list[str]
    words: set[str]
    claim_start: int
    contrasts: list[tuple[int, int]]
    rejected: set[str]
    missing: list[str]
    far: list[str]
    bad_entities: list[str]
    bad_values: list[str]
    facts: list[FactCheck]
    matches: list[Match]
    best: IndexedSentence | None
    n_values: int
    entities: tuple[Span, ...]
    contradicted_value: bool
    phatic: bool
    anchored: bool
    cues: FlipCues
    has: Callable[[frozenset[str]], bool]
    clauses: AnswerClauses = field(default_factory=AnswerClauses)
    """The negation check's reading of this sentence (and its pairing with the aligned
    context clauses), filled by its first call."""


FINISH_ONLY = frozenset([
    "threshold", "sentence_threshold", "word_weight", "entity_weight", "number_weight",
    "contradiction_weight", "max_weight", "share_weight", "count_scale", "rare_weight",
    "name_rarity", "rare_min_length", "contradiction_boost", "opinion_weight",
    "anchored_word_weight", "length_allowance", "sentence_allowance",
    "within_allowance_weight", "negation_min_coverage", "negation_scope", "shape_scale",
    "shape_power", "long_context_boost", "summary_context_sentences", "max_evidence",
    "index_cache_chars",
])
"""The ``GroundingConfig`` fields that :func:`sentence_core` (and the answer-level work
before it, ``_grounding_answer``) never reads: the negation check, the sentence's
risk and status, the answer's pooling and calibration, and the layer's own limits.
Every other field is part of the key under which a job shares that work."""


def sentence_core(
    sentence: AnswerSentence, tokens: list[str], words: set[str],
    ctx: TextIndex, forms: Mapping[str, str | None],
    question: TextIndex | None, qforms: Mapping[str, str | None] | None,
    cfg: GroundingConfig, qfacts: QuestionFacts | None = None,
    topic: Sequence[tuple[str, float]] = (), opts: FactOptions | None = None,
) -> SentenceCore:
    """The first part of :func:`check_analyzed` (see :class:`SentenceCore`); ``opts`` is
    :func:`sentence_options` when the caller has it (one per answer)."""
    text = sentence.span.text
    entities = sentence.entities
    _stance, claim_start = leading_particle(text)
    contrasts = contrast_spans(text)
    rejected = _words_in(text, contrasts) if contrasts else set()
    missing = [w for w in words if forms[w] is None and w not in rejected]
    if qforms is not None and missing:  # the question is asked about these only
        missing = [w for w in missing if qforms[w] is None]
    missing.sort()
    missing_set = set(missing)

    bad_entities: list[str] = []
    if missing_set:  # otherwise no entity can have an unsupported word
        for ent in entities:
            # A token of the entity is a substring of its lower-cased text: an entity
            # that contains no missing word as a substring has none among its tokens.
            low = ent.text.lower()
            if any(w in low for w in missing_set) and \
                    content_words(tokenize(ent.text)) & missing_set:
                bad_entities.append(ent.text)

    k = max(1, cfg.local_window, cfg.contradiction_window)
    matches = ctx.best_matches(words, k, forms) if words else []
    match = matches[0] if matches else None
    best = ctx.sentences[match.sentence] if match is not None else None
    far: list[str] = []
    if cfg.local_window and matches:
        sets = [ctx.sentences[m.sentence].tokens for m in matches[:cfg.local_window]]
        # The context's form of a word is one of its variants: found in a near
        # sentence, the word is near (most are; the rest get the full test).
        if len(sets) == 3:  # the default window, in one pass
            s0, s1, s2 = sets
            rest = [w for w in words if w not in missing_set and w not in rejected
                    and (f := forms[w]) not in s0 and f not in s1 and f not in s2]
        else:
            rest = [w for w in words if w not in missing_set and w not in rejected]
            for tokens_near in sets:
                rest = [w for w in rest if forms[w] not in tokens_near]
        if rest:  # (each near set asked in turn: their union is not built for a few words)
            rest = [w for w in rest if all(near.isdisjoint(variants(w)) for near in sets)
                    and not (qforms is not None and qforms[w] is not None)]
        far = sorted(rest)

    dates, numbers = sentence.dates, sentence.numbers
    cf = context_facts(ctx)
    proper = cf.proper()
    names = names_in(text, entities, proper) if proper else list(entities)
    token_set = set(tokens)  # read by the measures and the flip cues
    measures = sentence_measures(text, numbers, dates, token_set)
    dates = tuple(years_as_measures(text, dates)[0])
    if len(ctx.sentences) > cfg.long_context_sentences:
        aligned = [m.sentence for m in matches]  # a document: no frames compared
    else:
        aligned = _aligned(text, words, matches, ctx, forms,
                           _question_words(question) if topic else frozenset())
    facts = check_facts(text, measures, dates, names, ctx, cf, aligned,
                        sentence_options(cfg, ctx) if opts is None else opts, qfacts, topic,
                        skip=contrasts)
    n_values = len(dates) + len(measures)
    bad_values = [f.text for f in facts if f.kind != "name"
                  and f.status in ("unsupported", "contradicted")]
    contradicted_value = any(f.status == "contradicted" for f in facts)
    found_names = {f.text for f in facts if f.kind == "name" and f.status != "unsupported"}
    if found_names:
        bad_entities = [e for e in bad_entities if e not in found_names]
    bad_entities += [f.text for f in facts if f.kind == "name" and f.status == "unsupported"
                     and f.text not in bad_entities]
    entities = tuple(names)
    if facts:
        # The words of a found value ("330 *metres*") are the value's, not claims of their own.
        found = [m for m in measures if any(f.text == m.text and f.status in
                                             ("supported", "question", "derived")
                                             for f in facts)]
        unit_words = _words_in(text, [(m.start, m.end) for m in found])
        unit_words |= {m.noun for m in found if m.noun}  # "eight *people*" ~ "8 persons"
        if unit_words:
            missing = [w for w in missing if w not in unit_words]
            missing_set = set(missing)
            far = [w for w in far if w not in unit_words]

    # Friendly formulas ("Glad it helped!", "Safe travels.") state nothing: their own
    # words are no claims, the rest of such a sentence weighs like an opinion.
    phatic = (n_values == 0 and not bad_entities and not contradicted_value
              and is_phatic(words - rejected))
    if phatic:
        missing = [w for w in missing if w not in PHATIC_WORDS]
        far = [w for w in far if w not in PHATIC_WORDS]
        missing_set = set(missing)
    # A sentence whose values and names are all found is anchored in the context: words
    # it adds are most likely paraphrase ("finished on 31 March 1889").
    anchored = bool(facts) and all(f.status in ("supported", "derived") for f in facts)
    cues, has = _cues(tokens, token_set)
    return SentenceCore(
        text=text, tokens=tokens, words=words, claim_start=claim_start, contrasts=contrasts,
        rejected=rejected, missing=missing, far=far, bad_entities=bad_entities,
        bad_values=bad_values, facts=facts, matches=matches, best=best, n_values=n_values,
        entities=entities, contradicted_value=contradicted_value, phatic=phatic,
        anchored=anchored, cues=cues, has=has)


def finish_check(core: SentenceCore, ctx: TextIndex, cfg: GroundingConfig, *,
                 opinions: bool = True) -> SentenceCheck:
    """The rest of :func:`check_analyzed`: the negation check, the sentence's risk and
    status (a new :class:`SentenceCheck`; ``core`` is left as it is)."""
    text, tokens, words = core.text, core.tokens, core.words
    entities, n_values = core.entities, core.n_values
    missing, far, bad_entities = core.missing, core.far, core.bad_entities
    matches, best = core.matches, core.best
    flipped = clause_flip(text, core.claim_start, core.contrasts, context_facts(ctx),
                          [m.sentence for m in matches[:cfg.contradiction_window]],
                          cfg.negation_min_coverage,
                          _speaker(tokens, len(entities), n_values) if opinions else None,
                          core.cues, core.has, scope_check=cfg.negation_scope,
                          memo=core.clauses)
    flip = flipped is not None
    contradicted = flip or core.contradicted_value
    risk = (
        cfg.word_weight * ((len(missing) + len(far)) / len(words) if words else 0.0)
        + cfg.entity_weight * (len(bad_entities) / len(entities) if entities else 0.0)
        + cfg.number_weight * (1.0 if core.bad_values else 0.0)
        + cfg.contradiction_weight * (1.0 if contradicted else 0.0)
    )
    risk = min(1.0, risk)
    share = (len(missing) + len(far)) / len(words) if words else 0.0
    status = (
        "contradicted" if contradicted
        else "unsupported" if bad_entities or core.bad_values or share >= cfg.sentence_threshold
        else "supported"
    )
    return SentenceCheck(
        text=text, status=status, risk=risk, weight=max(1, len(words)),
        unsupported_words=list(missing), distant_words=list(far),
        unsupported_entities=list(bad_entities), unsupported_values=list(core.bad_values),
        n_entities=len(entities), n_values=n_values,
        negation_flip=flip,
        opinion=core.phatic or _personal_opinion(tokens, len(entities), n_values),
        anchored=core.anchored,
        source_id=best.doc_id if best is not None else None,
        source_span=best.text if best is not None else None,
        facts=list(core.facts), negated_clause=flipped,
    )


def _aligned(text: str, words: set[str], matches: Sequence[Match], ctx: TextIndex,
             forms: Mapping[str, str | None],
             asked: set[str] | frozenset[str] = frozenset()) -> list[int]:
    """Context sentences this one aligns with: its best matches, then each clause's two
    best (a summary sentence merges facts from several places); for a short answer also
    the two best for its words with the question's ("Around 1450." to "When was the
    Bible completed?")."""
    out = [m.sentence for m in matches]
    if asked:
        for m in ctx.best_matches(words | asked, 2):
            if m.sentence not in out:
                out.append(m.sentence)
    parts = clauses(text)
    if len(parts) > 1:
        for a, b in parts:
            cw = content_words(tokenize(text[a:b])) & words
            if len(cw) < 2:
                continue
            for m in ctx.best_matches(cw, 2, forms):
                if m.sentence not in out:
                    out.append(m.sentence)
    return out


def _question_words(question: TextIndex | None) -> frozenset[str]:
    """The content words of the question's last sentence."""
    if question is None or not question.sentences:
        return frozenset()
    return frozenset(content_words(question.sentences[-1].tokens))


def _words_in(text: str, spans: Sequence[tuple[int, int]]) -> set[str]:
    out: set[str] = set()
    for a, b in spans:
        out.update(tokenize(text[a:b]))
    return out
