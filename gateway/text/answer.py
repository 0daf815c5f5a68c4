"""The answer side of the model-free layers: its sentences, their entity candidates,
dates and numbers, analyzed once per request and shared by ``grounding``, ``claims``
and ``nli`` (the context side is :mod:`gateway.text.index`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gateway.text.memo import Memo
from gateway.text.quantities import DateRef, Quantity, extract_quantities
from gateway.text.tokens import Span, entity_candidates, split_sentences

__all__ = ["ANSWER_KEY", "AnalyzedAnswer", "AnswerSentence", "analyze_answer",
           "answer_sentences"]

ANSWER_KEY = "gateway.text.answer"
"""Memo key prefix of :func:`answer_sentences`."""


@dataclass(slots=True, unsafe_hash=True)
class AnswerSentence:
    """One sentence of an answer, its entity candidates, dates and numbers (shared by
    the layers).

    A value: never mutated, hashable by value. Not ``frozen``: a frozen dataclass builds
    several times slower (like :class:`~gateway.text.tokens.Span`)."""

    span: Span
    entities: tuple[Span, ...]
    """``entity_candidates(span.text)`` (offsets relative to the sentence)."""
    dates: tuple[DateRef, ...] = ()
    """``extract_dates(span.text)``: the sentence's own dates (offsets relative to it)."""
    numbers: tuple[Quantity, ...] = ()
    """``extract_numbers(span.text, dates)`` (offsets relative to the sentence)."""


class AnalyzedAnswer(list[AnswerSentence]):
    """What :func:`analyze_answer` returns: the sentences, plus all their dates and
    numbers with offsets into the answer (in text order)."""

    __slots__ = ("dates", "numbers", "text")

    def __init__(self, text: str, sentences: Iterable[AnswerSentence],
                 dates: list[DateRef], numbers: list[Quantity]) -> None:
        super().__init__(sentences)
        self.text = text
        self.dates = dates
        self.numbers = numbers


def analyze_answer(answer: str) -> AnalyzedAnswer:
    """The sentences of ``answer`` with their entity candidates, dates and numbers.

    Dates and numbers are found sentence by sentence, so none spans two sentences
    (over the whole text "in May. 5 people died" would read as the date "May. 5" and
    lose the number). :class:`AnalyzedAnswer` also lists them with answer offsets,
    in text order, for layers that read the answer as one text (``claims``).
    """
    sentences: list[AnswerSentence] = []
    dates: list[DateRef] = []
    numbers: list[Quantity] = []
    for s in split_sentences(answer):
        ds, qs = extract_quantities(s.text)
        sentences.append(AnswerSentence(s, tuple(entity_candidates(s.text)),
                                        tuple(ds) if ds else (), tuple(qs) if qs else ()))
        if not ds and not qs:  # (most sentences)
            continue
        base = s.start
        if not base:  # the first sentence's offsets are the answer's already
            dates += ds
            numbers += qs
            continue
        dates += [DateRef(d.year, d.month, d.day, d.decade, d.text, d.start + base,
                          d.end + base) for d in ds]
        numbers += [Quantity(q.value, q.kind, q.unit, q.text, q.start + base, q.end + base,
                             q.sig_digits) for q in qs]
    return AnalyzedAnswer(answer, sentences, dates, numbers)


def answer_sentences(context: Memo, answer: str) -> AnalyzedAnswer:
    """:func:`analyze_answer`, once per request (``grounding`` and ``claims`` both need it)."""
    return context.memo(f"{ANSWER_KEY}:{answer}",  # type: ignore[no-any-return]
                        lambda: analyze_answer(answer))
