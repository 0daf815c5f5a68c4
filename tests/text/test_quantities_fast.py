"""The candidate scans of gateway.text.quantities equal the whole-text scans they replace.

`_dates` / `_numbers` take the whole-text ``finditer`` path when the text holds a
non-ASCII ``\\d`` digit (dates, digit numbers) or a `_FOLDS` character (number words);
passing such a character in ``rare`` forces that path on the same text, so each text is
checked against the plain pattern semantics.
"""

from __future__ import annotations

import random
import re
import sys

import pytest

from gateway.text.quantities import (
    _FOLDS,
    DateRef,
    Quantity,
    _classes,
    _dates,
    _numbers,
    _runs,
    extract_dates,
    extract_numbers,
)

ALL_CHARS = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000)

TRICKY = [
    "ſix", "İ", "5M", "5 m", "$3bn", "twenty-five", "two and a half million", "the 1990s",
    "'90s", "’90s", "F-35", "X-Men 2", "12 percent", "1,200.5", ".5", "July 11, 1981",
    "11 July 1981", "1981-07-11", "July 1981", "July 11", "in 1981", "11th of July, 1981",
    "Sept. 5", "Sept., 1999", "May  5", "May\xa05", "May\n\n\n\n\n\n\n\n\n\n\n\n\n5",
    "twenty-ſix", "two bıllion", "5 bıllion", "5K", "$5K", "5k", "$5M", "5 M", "£300", "€ 5",
    "$ .5", "$.5", "1,234567", "July ٣", "٣ July", "1٣ July", "$٣", ".٣", "a dozen",
    "A Dozen eggs", "a  hundred", "a\xa0million", "one", "one hundred", "ONE HUNDRED",
    "Twenty Five", "Twenty-Five Percent", "éten", "éa dozen", "x1", "A1 2", "1981 trillion",
    "May 5,000", "thirteen", "5\u212a", "$5\u212a", "fıve", "İstanbul 5", "the '20s",
    "5 per cent", "5 %", "1990 percent", "1990%", "1990.5", "1990,5", "May 2020-01-05",
    "Jan. 1st, 2000", "2nd of Feb.", "32 December", "Dec 0", "seventy-seven", "forty\xa0two",
    "often tenfold ten", "Σ five", "word_two", "2_000", "２０２０", "five²", "3 Bn", "3bn!",
    "1..2", "...5", "$$5", "$\xa05", "£\u20035", "88 people", "88 per day", "57%.", "5 %x",
    "September 11, 2001", "11 September", "Sept 2001", "February, 2020", "Mayo 5", "XMay 5",
]
PIECES = [
    "May", "July", "Sept.", "Dec", "June", "September", "February", ",", ".", " ", "  ",
    "\xa0", "\n", "'", "’", "-",
    "$", "£", "%", "0", "1", "2", "3", "9", "19", "90", "1981", "2001", "11", "12th", "st",
    "of", "s", "a", "A", "one", "two", "Two", "twenty", "Twenty", "five", "hundred", "Million",
    "bn", "k", "K", "m", "M", "p", "per", "people", "percent", "per cent", "and a half", "ſ",
    "ı", "\u212a", "ix", "x", "F", "é", "٣", "_", "dozen", "thirteen", "ten", "e", "(", "—",
]


def _key(values: list[DateRef] | list[Quantity]) -> list[tuple[object, ...]]:
    # Field values with their types: 3 and 3.0 must not pass for each other.
    return [tuple((v, type(v)) for v in vars_of(x)) for x in values]


def vars_of(x: DateRef | Quantity) -> tuple[object, ...]:
    return tuple(getattr(x, f) for f in x.__slots__)


def _check(text: str) -> None:
    cls, rare = _classes(text)
    runs = _runs(cls)
    dates = _dates(text, cls, rare, runs)
    assert _key(dates) == _key(_dates(text, cls, rare + "٣", runs)), text
    assert _key(dates) == _key(extract_dates(text)), text
    numbers = _numbers(text, dates, cls, rare, runs)
    assert _key(numbers) == _key(_numbers(text, dates, cls, rare + "٣ı", runs)), text
    assert _key(numbers) == _key(extract_numbers(text)), text
    # Other date spans than the text's own (the date walk must not assume them).
    odd = [DateRef(None, start=s, end=s + n) for s, n in ((0, 3), (2, 9), (4, 1))]
    assert _key(_numbers(text, odd, cls, rare, runs)) == \
        _key(_numbers(text, odd, cls, rare + "٣ı", runs)), text


@pytest.mark.parametrize("text", TRICKY)
def test_candidate_scans_equal_whole_text_scans(text: str) -> None:
    _check(text)
    _check(f"On {text}, and {text} (x{text}) '{text}'.")


def test_candidate_scans_equal_whole_text_scans_on_random_text() -> None:
    rng = random.Random(20240611)
    for _ in range(4000):
        _check("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 16))))


def test_folds_are_the_non_ascii_characters_that_match_ascii_letters_ignoring_case() -> None:
    found = {c for c in re.findall("(?i)[a-z]", ALL_CHARS) if not c.isascii()}
    assert found == set(_FOLDS.pattern[1:-1])


def test_sre_classes_agree_with_the_str_methods_the_scans_use() -> None:
    # \w is what str.isalnum() or "_" says, \s is str.isspace() (one character each).
    words = set(re.findall(r"\w", ALL_CHARS))
    spaces = set(re.findall(r"\s", ALL_CHARS))
    assert all((c in words) == (c.isalnum() or c == "_") for c in ALL_CHARS)
    assert all((c in spaces) == c.isspace() for c in ALL_CHARS)


def test_values_are_plain_data() -> None:
    d = DateRef(1981, 7, 11)
    q = extract_numbers("12 people")[0]
    assert d == DateRef(1981, 7, 11) and hash(d) == hash(DateRef(1981, 7, 11))
    assert {q: 1}[extract_numbers("12 people")[0]] == 1
    assert (q.value, q.kind, q.unit, q.text, q.start, q.end, q.sig_digits) == (
        12.0, "plain", "people", "12", 0, 2, 2)
