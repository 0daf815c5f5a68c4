"""Session 9's cheaper steps of the answer pass must give what their plain forms give:
each shortcut against a reference written the plain way here, on every sentence of the
repository's labelled texts and on noise built to hit the shortcut's edges.

- ``quantities.extract_quantities``: ASCII text is classified once, and one without a
  digit goes straight to its number words (no date, no digit-number scan);
- ``measures.sentence_measures``: the sentence lower-cased once for its clock and "an
  hour" tests, no date work without dates, no spans of nothing; on ASCII text the clock
  hint scans to the digits only (``_ASCII_CLOCK_HINT``);
- ``slots.sentence_slots`` without frames: each fact made directly (no filler list,
  no pairing with what each filler was);
- ``tokens.split_sentences``: each sentence's span made inline, its left side stripped
  only when something was (``tokens.entity_candidates``' words of several are
  ``g.split()``: tests/text/test_verify_cpu_fast.py holds its reference).
"""

from __future__ import annotations

import random

import pytest
from corpus_texts import real_texts, sentence_clocks_plain

from gateway.text import measures as M
from gateway.text import slots as S
from gateway.text import tokens as T
from gateway.text.names import name_key
from gateway.text.quantities import (
    DateRef,
    Quantity,
    _dates,
    _numbers,
    _prepare,
    extract_quantities,
)
from gateway.text.tokens import Span, split_sentences, tokenize

_PIECES = ["May", "July 4", "Sept.", " ", "  ", "\t", "\n", "\xa0", ",", ".", ":", "'", "’",
           "-", "$", "%", "0", "1", "2", "9", "12", "1981", "2001", "11", "30", "st", "of",
           "a", "A", "an", "one", "two", "Two", "twenty", "five", "hundred", "million",
           "half", "a half", "an hour", "a tenth", "minutes", "mile", "am", "pm", "a.m.",
           "P.M", "PM", "noon", "NOON", "Noon", "midnight", "MIDNIGHT", "mıdnıght",
           "MIDNİGHT", "ı", "ſ", "\u212a", "é", "٣", "５", "to", "up to", "more than",
           "about", "under", "over", "or more", "years", "year", "F-35", "x", "The", "m",
           "s", "'s"]


def _sentences() -> list[str]:
    return [s.text for t in real_texts() for s in split_sentences(t)]


def _noise(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 14))) for _ in range(n)]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return _sentences() + _noise(9, 20000)


def _key(values: list[DateRef] | list[Quantity]) -> list[tuple[object, ...]]:
    # Field values with their types: 3 and 3.0 must not pass for each other.
    return [tuple((v, type(v)) for v in (getattr(x, f) for f in x.__slots__)) for x in values]


def _reference_quantities(text: str) -> tuple[list[DateRef], list[Quantity]]:
    cls, rare, runs = _prepare(text)
    dates = _dates(text, cls, rare, runs)
    return dates, _numbers(text, dates, cls, rare, runs)


def test_extract_quantities_is_dates_then_numbers(texts: list[str]) -> None:
    words = 0
    for text in texts:
        dates, numbers = extract_quantities(text)
        want_dates, want_numbers = _reference_quantities(text)
        assert _key(dates) == _key(want_dates), text[:80]
        assert _key(numbers) == _key(want_numbers), text[:80]
        words += any(q.text[:1].isalpha() for q in numbers)
    assert words > 1000  # the digit-free path met number words


def _reference_measures(text: str, numbers: list[Quantity], dates: list[DateRef],
                        words: set[str]) -> list[M.Measure]:
    """``sentence_measures`` as session 8 wrote it."""
    clocks = sentence_clocks_plain(text)
    out = [M.measure_of(text, q) for q in numbers
           if not (clocks and any(c.start <= q.start < c.end for c in clocks))]
    if len(out) > 1:
        M._inherit_ranges(text, out)
    kept, years = M.years_as_measures(text, list(dates))
    out += years
    taken = [(m.start, m.end) for m in out] + [(d.start, d.end) for d in kept] + \
        [(c.start, c.end) for c in clocks]
    extra = M._extras(text, taken, words) + clocks
    if extra or years:
        out = sorted(out + extra, key=lambda m: m.start)
    for m in out:
        if m.bound == -1 and M._ceiling(text, m.start):
            m.ceiling = True
    return out


def test_sentence_measures_are_the_plain_reading(texts: list[str]) -> None:
    clocks = found = 0
    for text in texts + ["at 5 pm", "at 5\tP.M.", "at 5 PM", "5:30", "at NOON", "x:y",
                         "12:30 and noon", "at ５ pm", "5 ᴘm", "١٢ pm", "at 3\x1cpm"]:
        dates, numbers = extract_quantities(text)
        words = set(tokenize(text))
        got = M.sentence_measures(text, numbers, dates, words)
        assert got == _reference_measures(text, numbers, dates, words), text[:80]
        assert M._sentence_clocks(text, text.lower()) == M._sentence_clocks(text) == \
            sentence_clocks_plain(text), text[:80]
        found += bool(got)
        clocks += any(m.dim == "clock" for m in got)
    assert found > 3000 and clocks > 300


def _reference_split(text: str) -> list[Span]:
    """``split_sentences`` as session 8 wrote it."""
    out: list[Span] = []

    def append(start: int, end: int) -> None:
        piece = text[start:end]
        kept = piece.strip()
        if kept:
            start += len(piece) - len(piece.lstrip())
            out.append(Span(kept, start, start + len(kept)))

    start = 0
    for m in T._SENT_END.finditer(text):
        gap = m.group(0)
        cut = m.start() if gap[0] == "\n" else m.start() + 1
        if "\n" not in gap and not T._split_ok(text, cut, m.end()):
            continue
        append(start, cut)
        start = m.end()
    append(start, len(text))
    return out


def test_split_sentences_is_the_reference() -> None:
    rng = random.Random(19)
    pieces = ["Word", "word", ". ", ".  ", "! ", "? ", ".\n", "\n", "\n\n ", " \n", "\t",
              "\xa0", "Dr. ", "U.S. ", "J. K. ", "5 V. ", "No. 5", "No. The", "et al. (",
              ".Next", "a.B", "\"", "’", ")", " ", "  ", "3.5", "é", "É"]
    texts = list(real_texts()) + ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 16)))
                                  for _ in range(20000)]
    many = 0
    for text in texts:
        got = split_sentences(text)
        assert got == _reference_split(text), text[:80]
        many += len(got) > 1
    assert many > 5000


def _reference_slots(text: str, measures: list[M.Measure], dates: list[DateRef],
                     names: list[Span]) -> list[S.Fact]:
    """``sentence_slots(..., frames=False)`` as session 8 wrote it."""
    if dates or measures:
        names = [n for n in names if not any(n.start < d.end and d.start < n.end for d in dates)
                 and not any(m.start <= n.start and n.end <= m.end for m in measures)]
    spans = [(n.start, n.end) for n in names]
    made: list[S.Fact] = []
    empty: dict[str, float] = {}
    for n in names:
        made.append(S.Fact(n.start, n.end, empty, empty, name=n, key=name_key(n.text)))
    for d in dates:
        if not any(a <= d.start and d.end <= b for a, b in spans):
            made.append(S.Fact(d.start, d.end, empty, empty, date=d))
    for m in measures:
        if any(a <= m.start and m.end <= b for a, b in spans) or any(
                m.start < e and s < m.end for s, e in spans):
            continue
        made.append(S.Fact(m.start, m.end, empty, empty, measure=m))
    return made


def test_sentence_slots_without_frames_are_the_reference(texts: list[str]) -> None:
    facts = 0
    for text in texts:
        dates, numbers = extract_quantities(text)
        measures = M.sentence_measures(text, numbers, dates)
        kept = M.years_as_measures(text, dates)[0]
        names = T.entity_candidates(text)
        got = S.sentence_slots(text, measures, kept, names, frames=False)
        assert got == _reference_slots(text, measures, kept, names), text[:80]
        facts += len(got)
    assert facts > 20000
