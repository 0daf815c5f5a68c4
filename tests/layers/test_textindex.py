"""The context index: lazily found facts equal a full up-front scan."""

from __future__ import annotations

from bisect import bisect_right

import pytest

from gateway.quantities import extract_dates, extract_numbers
from gateway.textindex import build_index
from gateway.textutil import negation_cues, split_sentences

DOCS = [
    ("a", ("On July 11, 1981 Andre Johnson was born. He did not play in 1999.\n"
           "The team won 12 games and $3.5 million. Nobody scored twenty-five points.")),
    ("b", "No dates here at all. Revenue rose 12% in the 1990s; it never fell."),
    ("c", "   "),  # no sentences: skipped
    ("d", "Dr. Smith wasn't there on May 5. Three hundred people came."),
]


def _full_scan() -> tuple[list[list[object]], list[list[object]], list[bool]]:
    """What the index used to compute up front: whole-document scans by sentence."""
    numbers: list[list[object]] = []
    dates: list[list[object]] = []
    negated: list[bool] = []
    for _, text in DOCS:
        spans = split_sentences(text)
        starts = [s.start for s in spans]
        base = len(numbers)
        numbers += [[] for _ in spans]
        dates += [[] for _ in spans]
        cues = {bisect_right(starts, m.start()) - 1 for m in negation_cues(text)}
        negated += [i in cues for i in range(len(spans))]
        doc_dates = extract_dates(text)
        for d in doc_dates:
            dates[base + bisect_right(starts, d.start) - 1].append(d)
        for q in extract_numbers(text, doc_dates):
            numbers[base + bisect_right(starts, q.start) - 1].append(q)
    return numbers, dates, negated


def test_lazy_numbers_dates_and_negation_equal_a_full_scan() -> None:
    index = build_index(DOCS)
    numbers, dates, negated = _full_scan()
    assert len(index.sentences) == len(numbers) == 8
    assert [index.numbers_of(i) for i in range(8)] == numbers
    assert [index.dates_of(i) for i in range(8)] == dates
    assert [index.negated(i) for i in range(8)] == negated
    assert any(negated) and not all(negated)


def test_facts_are_scanned_only_when_asked() -> None:
    index = build_index(DOCS)
    assert index._facts is None  # building the index scans no numbers or dates
    assert index.dates_of(0)[0].year == 1981
    assert index._facts is not None


@pytest.mark.parametrize(("text", "found"), [("12", True), ("13", False), ("3.5 million", True)])
def test_has_number_sees_every_document(text: str, found: bool) -> None:
    index = build_index(DOCS)
    assert index.has_number(extract_numbers(text)[0]) is found


def test_has_date_uses_decades_and_undated_dates() -> None:
    index = build_index(DOCS)
    assert index.has_date(extract_dates("in 1995")[0])  # "the 1990s"
    assert index.has_date(extract_dates("May 5, 2001")[0])  # "May 5" (no year)
    assert not index.has_date(extract_dates("June 6, 2001")[0])


def test_range_facts_cover_only_their_sentences_and_are_memoized() -> None:
    index = build_index(DOCS)
    numbers, dates, _ = _full_scan()
    lo, hi = 4, 6  # document "b"
    got = index.range_facts(lo, hi)
    assert got.values == [q.value for ns in numbers[lo:hi] for q in ns] == [12.0]
    assert got.dates == [d for ds in dates[lo:hi] for d in ds]
    assert got.parts == {12.0, 1990.0}
    assert index.range_facts(lo, hi) is got


def test_answer_sentences_are_analyzed_once_per_request() -> None:
    from gateway.context import GroundingContext
    from gateway.textindex import analyze_answer, answer_sentences
    from gateway.textutil import entity_candidates

    answer = "Andre Johnson played for the Houston Texans. He was born in 1981."
    got = analyze_answer(answer)
    assert [a.span for a in got] == split_sentences(answer)
    assert [list(a.entities) for a in got] == [entity_candidates(s.text)
                                              for s in split_sentences(answer)]
    ctx = GroundingContext(documents=[])
    first = answer_sentences(ctx, answer)
    assert first == got and answer_sentences(ctx, answer) is first
    assert answer_sentences(ctx, answer + " More.") is not first
