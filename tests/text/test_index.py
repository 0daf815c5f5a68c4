"""The context index: lazily found facts equal a full up-front scan."""

from __future__ import annotations

from bisect import bisect_right

import pytest

from gateway.text.quantities import extract_dates, extract_numbers
from gateway.text.index import build_index
from gateway.text.tokens import negation_cues, split_sentences

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
    from gateway.text.answer import analyze_answer, answer_sentences
    from gateway.sources.context import GroundingContext
    from gateway.text.tokens import entity_candidates

    answer = "Andre Johnson played for the Houston Texans. He was born in 1981."
    got = analyze_answer(answer)
    assert [a.span for a in got] == split_sentences(answer)
    assert [list(a.entities) for a in got] == [entity_candidates(s.text)
                                              for s in split_sentences(answer)]
    ctx = GroundingContext(documents=[])
    first = answer_sentences(ctx, answer)
    assert first == got and answer_sentences(ctx, answer) is first
    assert answer_sentences(ctx, answer + " More.") is not first


def _eager_postings(index_docs: list[tuple[str, str]]) -> dict[str, list[int]]:
    """What the index used to build up front: every non-stopword token -> sentence ids."""
    from gateway.text.tokens import STOPWORDS, tokenize

    out: dict[str, list[int]] = {}
    sid = 0
    for _, text in index_docs:
        for span in split_sentences(text):
            for tok in sorted(set(tokenize(span.text)) - STOPWORDS):
                out.setdefault(tok, []).append(sid)
            sid += 1
    return out


def test_postings_found_on_demand_equal_eager_postings() -> None:
    index = build_index(DOCS)
    eager = _eager_postings(DOCS)
    assert index._postings == {}  # building the index finds no postings
    index.prefetch(["team", "johnson", "the", "absent"])
    assert set(index._postings) == {"team", "johnson", "the"}  # words of the text only
    assert index.posting("the") == [] and index.posting("absent") == []  # stopword, unknown
    assert "absent" not in index._postings  # an unknown word leaves no entry behind
    for word in sorted(eager):
        assert index.posting(word) == eager[word], word


def test_tokens_of_non_ascii_and_glued_text_equal_tokenize() -> None:
    """The document-wide fast paths (regex punctuation on non-ASCII text, re-tokenizing
    only the sentences with a glued "wordWord") give what tokenize gives per sentence."""
    from gateway.text.tokens import TO_SPACE, punct_to_space, tokenize

    text = ("The club\u00a0paid \u00a3300 for it \u2013 \u2018a lot\u2019. RomanceStep won the "
            "Game.Andre Johnson scored. \u201cNo,\u201d he said. Caf\u00e9 R\u00e9sum\u00e9s rose.")
    assert punct_to_space(text.lower()) == text.lower().translate(TO_SPACE)
    index = build_index([("d", text)])
    assert [s.tokens for s in index.sentences] == [frozenset(tokenize(s.text))
                                                   for s in split_sentences(text)]
    assert {"romance", "step", "game", "andre", "caf\u00e9"} <= index.vocab


def test_best_matches_with_resolved_forms_equal_without() -> None:
    index = build_index(DOCS)
    words = {"johnson", "born", "games", "million", "revenue"}
    assert index.best_matches(words, 3) == index.best_matches(words, 3,
                                                              index.resolve_all(words))
    top = index.best_matches(words, 3)
    assert top[0].sentence == 0 and [m.coverage for m in top] == sorted(
        (m.coverage for m in top), reverse=True)


def test_answer_values_are_each_sentences_own() -> None:
    """Each sentence holds extract_dates/extract_numbers of its own text; the analysis
    also lists them all with answer offsets, in text order (what claims reads)."""
    from gateway.text.answer import analyze_answer

    answer = ("He was born in July\n1981 in Texas. The team won 12 games and $3.5 million. "
              "The flood came in May. 5 people died.")
    got = analyze_answer(answer)
    for a in got:
        dates = extract_dates(a.span.text)
        assert list(a.dates) == dates
        assert list(a.numbers) == extract_numbers(a.span.text, dates)
    assert [d.text for d in got.dates] == ["1981"]  # "July" and "1981" are two sentences
    assert [(q.text, answer[q.start:q.end]) for q in got.numbers] == [
        ("12", "12"), ("$3.5 million", "$3.5 million"), ("5", "5")]
    assert [d.start for d in got.dates] == [answer.index("1981")]


def test_prefetch_all_equals_postings_found_on_demand() -> None:
    index = build_index(DOCS)
    index.prefetch(["team", "the"])  # some found before: kept
    index.prefetch_all()
    eager = _eager_postings(DOCS)
    assert {w: p for w, p in index._postings.items() if p} == eager
    assert index.posting("the") == [] and index.posting("never-seen") == []
    assert "never-seen" not in index._postings  # no pass, no entry: all are known
    words = {"johnson", "born", "games", "million", "revenue"}
    assert index.best_matches(words, 3) == build_index(DOCS).best_matches(words, 3)
