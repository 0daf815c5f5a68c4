"""Text helpers: sentences, tokens, content words, entities, numbers and dates."""

from __future__ import annotations

import pytest

from gateway.text.quantities import DateRef, date_matches, extract_dates, extract_numbers
from gateway.text.quantities import number_matches
from gateway.text.tokens import content_words, entity_candidates, has_negation
from gateway.text.tokens import split_sentences, tokenize, variants


def texts(text: str) -> list[str]:
    return [s.text for s in split_sentences(text)]


def test_sentences_split_on_punctuation_and_glued_ends() -> None:
    assert texts("Named the Players of the Game.Andre Johnson (born 1981) played. He won!") == [
        "Named the Players of the Game.", "Andre Johnson (born 1981) played.", "He won!"]


def test_sentences_keep_abbreviations_and_initials() -> None:
    assert texts("Dr. Smith met J. K. Rowling in the U.S. Army. It cost $3.5 million.") == [
        "Dr. Smith met J. K. Rowling in the U.S. Army.", "It cost $3.5 million."]


def test_et_al_does_not_end_a_sentence_but_a_name_al_does() -> None:
    assert texts("Smith et al. (2019) found it. Lee et al. 2020 agreed.") == [
        "Smith et al. (2019) found it.", "Lee et al. 2020 agreed."]
    assert texts("He met Al. Then he left.") == ["He met Al.", "Then he left."]


def test_sentence_offsets_point_into_the_text() -> None:
    text = "  First one.  Second one?\nThird"
    for span in split_sentences(text):
        assert text[span.start:span.end] == span.text
    assert texts(text) == ["First one.", "Second one?", "Third"]


def test_tokens_are_lowercase_and_split_glued_words() -> None:
    assert tokenize("RomanceStep Up, Neptune's X-Men 2!") == [
        "romance", "step", "up", "neptune", "s", "x", "men", "2"]


def test_content_words_drop_stopwords_numbers_and_number_words() -> None:
    assert content_words(tokenize("The three cats of 2005 were not sleeping in 42nd St")) == {
        "cats", "sleeping", "st"}


def test_variants_cover_inflections_and_irregulars() -> None:
    assert "release" in variants("released")
    assert "country" in variants("countries")
    assert "stop" in variants("stopped")
    assert "send" in variants("sent")
    assert variants("movie")[0] == "movie"


@pytest.mark.parametrize(("text", "neg"), [
    ("He did not win.", True), ("He didn't win.", True), ("He never won.", True),
    ("He won without help.", True), ("He won.", False), ("Nothingness is a concept.", False),
])
def test_negation_cues(text: str, neg: bool) -> None:
    assert has_negation(text) is neg


def test_entity_candidates() -> None:
    got = [e.text for e in entity_candidates(
        "The Lost Hero is by J.K. Rowling and Craig T. Nelson, at the Bank of the West in the NFL.")]
    assert got == ["Lost Hero", "J.K. Rowling", "Craig T. Nelson", "Bank of the West", "NFL"]
    assert [e.text for e in entity_candidates("Gladly! X-Men 2 stars Hugh Jackman.")] == [
        "X-Men 2", "Hugh Jackman"]
    assert entity_candidates("Despite the rain, it went ahead.") == []


@pytest.mark.parametrize(("text", "expected"), [
    ("born July 11, 1981", (1981, 7, 11, False)),
    ("born 11 July 1981", (1981, 7, 11, False)),
    ("born 1981-07-11", (1981, 7, 11, False)),
    ("on the 3rd of March, 2003", (2003, 3, 3, False)),
    ("in March 2003", (2003, 3, None, False)),
    ("on May 5", (None, 5, 5, False)),
    ("in 1981 he", (1981, None, None, False)),
    ("the 1990s", (1990, None, None, True)),
    ("the '90s", (1990, None, None, True)),
    ("on 5th May, he", (None, 5, 5, False)),
    ("on Sept. 9, 1999", (1999, 9, 9, False)),
])
def test_dates_are_normalized(text: str, expected: tuple[object, ...]) -> None:
    [d] = extract_dates(text)
    assert (d.year, d.month, d.day, d.decade) == expected


def test_dates_keep_their_text_and_offsets_and_drop_impossible_days() -> None:
    text = "From May 35 to 1999-12-31, then 7 June."
    assert [(d.text, d.start, d.end, d.day) for d in extract_dates(text)] == [
        ("1999-12-31", 15, 25, 31), ("7 June.", 32, 39, 7)]


def test_date_matching_allows_partial_dates_and_decades() -> None:
    full = DateRef(1981, 7, 11)
    assert date_matches(DateRef(1981), [full])
    assert date_matches(DateRef(1981, 7), [full])
    assert not date_matches(DateRef(1981, 7, 12), [full])
    assert not date_matches(DateRef(1982), [full])
    assert date_matches(DateRef(1990, decade=True), [DateRef(1994, 2)])
    assert not date_matches(DateRef(1980, decade=True), [DateRef(1994)])


@pytest.mark.parametrize(("text", "value", "kind"), [
    ("1,200 people", 1200, "plain"),
    ("1,200.5 km", 1200.5, "plain"),
    ("12%", 12, "percent"),
    ("12 percent", 12, "percent"),
    ("£300", 300, "currency"),
    ("$3.5 million", 3.5e6, "currency"),
    ("$3bn", 3e9, "currency"),
    ("1.2 million fans", 1.2e6, "plain"),
    ("three cats", 3, "plain"),
    ("twenty-five dogs", 25, "plain"),
    ("two and a half years", 2.5, "plain"),
    ("a dozen eggs", 12, "plain"),
    ("seventy-two thousand seats", 72000, "plain"),
])
def test_numbers_are_normalized(text: str, value: float, kind: str) -> None:
    [q] = extract_numbers(text)
    assert q.value == pytest.approx(value) and q.kind == kind


def test_numbers_skip_dates_and_pronoun_one() -> None:
    assert extract_numbers("On July 11, 1981 one of them left.") == []
    assert [q.value for q in extract_numbers("5 m tall")] == [5]  # metres, not millions


def test_number_matching_respects_stated_precision() -> None:
    [q] = extract_numbers("1.2 million")
    assert number_matches(q, [1_234_567.0])
    assert not number_matches(q, [1_345_678.0])
    [q] = extract_numbers("12 people")
    assert number_matches(q, [12.0]) and not number_matches(q, [12.4])


def test_case_folded_lookalikes_are_not_numbers_and_do_not_crash() -> None:
    # IGNORECASE lets "ſix" / "bıllion" match the number patterns; they used to raise KeyError.
    assert [q.value for q in extract_numbers("ſix apples, 3 bıllion and two mıllıon")] == [3.0]
    assert [q.value for q in extract_numbers("six apples")] == [6.0]


def test_sentence_ends_glued_newline_and_quotes() -> None:
    assert texts("He said go! Then left.\nNext line  \n  third") == [
        "He said go!", "Then left.", "Next line", "third"]
    assert texts("wait... Then more.Glued here") == ["wait...", "Then more.", "Glued here"]


def test_camel_glue_check_agrees_with_the_plain_pattern() -> None:
    import random
    import re

    from gateway.text.tokens import has_camel_glue

    plain = re.compile(r"[a-z](?=[A-Z][a-z])")
    rng = random.Random(3)
    for _ in range(20_000):
        s = "".join(rng.choice("aAbZz .Q1é") for _ in range(rng.randint(0, 12)))
        assert has_camel_glue(s) is (plain.search(s) is not None), s
    assert has_camel_glue("RomanceStep") and not has_camel_glue("NASA Step")


def test_sentence_spans_trim_every_kind_of_whitespace() -> None:
    text = "\u00a0\u2003One here.\u3000\x1c Two there.\u0085"
    spans = split_sentences(text)
    assert [s.text for s in spans] == ["One here.", "Two there."]
    assert all(text[s.start:s.end] == s.text for s in spans)


def test_number_words_keep_their_stated_form_on_the_ascii_fast_path() -> None:
    (q,) = extract_numbers("TWENTY-FIVE Percent rose")
    assert (q.value, q.kind, q.text) == (25, "percent", "TWENTY-FIVE Percent")
    # Non-ASCII text takes the case-insensitive pattern: same values, same offsets.
    (r,) = extract_numbers("TWENTY-FIVE Percent rosé")
    assert (r.value, r.kind, r.text, r.start, r.end) == (25, "percent", q.text, q.start, q.end)


def test_number_word_hint_scan_equals_the_substring_checks() -> None:
    import random

    from gateway.text.quantities import _WORD_HINT, _WORD_HINTS

    rng = random.Random(11)
    for _ in range(5000):
        s = "".join(rng.choice("twoneighfvrzxusd ") for _ in range(rng.randint(0, 10)))
        assert bool(_WORD_HINT.search(s)) is any(h in s for h in _WORD_HINTS), s
