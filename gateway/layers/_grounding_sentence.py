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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.text.answer import AnswerSentence
from gateway.text.index import TextIndex
from gateway.text.quantities import extract_quantities
from gateway.text.tokens import (
    Span,
    content_words,
    entity_candidates,
    negation_cues,
    tokenize,
    variants,
)

if TYPE_CHECKING:
    from gateway.layers.grounding import GroundingConfig

__all__ = ["SentenceCheck", "check_analyzed", "check_sentence"]


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


def check_sentence(
    text: str, ctx: TextIndex, question: TextIndex | None, cfg: GroundingConfig,
    entities: Sequence[Span] | None = None,
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
                  question, question.resolve_all(words) if question is not None else None, cfg)


def check_analyzed(
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


