"""Numbers and dates found in text, normalized so they can be compared.

Pure functions; patterns compiled once at import.

- :func:`extract_dates` finds ``"July 11, 1981"``, ``"11 July 1981"``,
  ``"1981-07-11"``, ``"July 1981"``, ``"July 11"``, bare years (``"in 1981"``) and
  decades (``"the 1990s"``, ``"'90s"``) and returns :class:`DateRef` values with the
  parts that were stated (``None`` for the rest).
- :func:`extract_quantities` is both at once (the text is classified once; the
  usual call: ``extract_numbers(s, extract_dates(s))`` did the same work twice).
- :func:`extract_numbers` finds quantities that are *not* part of a date: digits
  with separators and decimals (``"1,200.5"``), scale words (``"1.2 million"``,
  ``"$3bn"``), percentages (``"12%"``, ``"12 percent"``), currency (``"£300"``) and
  spelled-out numbers (``"three"``, ``"twenty-five"``, ``"two and a half"``,
  ``"a dozen"``). The bare word ``"one"`` is not a number (it is usually a pronoun).
- :func:`number_matches` / :func:`date_matches` decide whether a stated value is
  backed by another one, allowing rounding (``"1.2 million"`` is backed by
  ``1,234,567``) and partial dates (``"1981"`` is backed by ``"July 11, 1981"``).

The patterns, and the candidate scans that find where they can match (with the same
results as ``finditer`` over the whole text), are in :mod:`gateway.text._quantity_scan`;
`_dates` and `_numbers` here turn the matches into values (`_digit_quantities` scans
the digit runs and builds its values directly).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import floor, log10
from operator import attrgetter

from gateway.text._quantity_scan import (
    _CLASS,
    _DATE,
    _FOLDS,
    _MONTHS,
    _NUMBER_DIGITS,
    _NUMBER_WORDS,
    _date_matches,
    _prepare,
    _word_matches,
)

# Re-exported: tests read these on this module, where they were defined before the split.
from gateway.text._quantity_scan import _classes as _classes
from gateway.text._quantity_scan import _runs as _runs

__all__ = [
    "DateRef",
    "Quantity",
    "date_matches",
    "extract_dates",
    "extract_numbers",
    "extract_quantities",
    "number_in",
    "number_matches",
]

_SMALL: dict[str, float] = {
    "zero": 0, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "dozen": 12, "one": 1, "a": 1,
}
_SCALES: dict[str, float] = {
    "hundred": 1e2, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12,
    "k": 1e3, "m": 1e6, "mn": 1e6, "bn": 1e9, "tn": 1e12,
}
_WORD_HINTS = ("zero", "two", "thre", "four", "five", "six", "seven", "eight", "nine", "ten",
               "eleven", "twel", "fift", "twent", "thirt", "fort", "eight", "dozen", "hundred",
               "thousand", "million", "billion", "trillion", "one")
_WORD_HINT = re.compile("|".join(_WORD_HINTS))
"""``any(h in low for h in _WORD_HINTS)`` as one scan: a kept number word contains one
(only the whole-text scan of texts with `_FOLDS` characters still needs it)."""
_UNIT_AFTER = re.compile(r"\s*([A-Za-z]+)")
_DIGIT = re.compile(r"\d")
"""Every date form and every non-word number contains one (same ``\\d`` as the patterns)."""
_PART_OF_NAME = re.compile(r"[A-Za-z]-\s?\d|[A-Za-z]\d")

_MONTH_NUM: dict[str, int] = {
    form: n for name, n in _MONTHS.items() for form in (name.capitalize(), name.capitalize() + ".")
}
"""A matched month (``"Sept."``) -> its number."""
_ASCII_DIGITS = frozenset("0123456789")
_SUFFIX_INITIALS = frozenset("hHtTmMbBkK%\u212a")
"""What a scale or percent after one space starts with, case ignored (K: Kelvin sign;
"p" is looked at further)."""
_CURRENCY = frozenset("$£€¥")
_START = attrgetter("start")


@dataclass(slots=True, unsafe_hash=True)
class DateRef:
    """A date with only the stated parts set. ``decade`` marks ``"the 1990s"``.

    Not frozen (a frozen ``__init__`` costs three times as much); treat as immutable.
    Equality and hashing are by value, as before."""

    year: int | None
    month: int | None = None
    day: int | None = None
    decade: bool = False
    text: str = ""
    start: int = 0
    end: int = 0


@dataclass(slots=True, unsafe_hash=True)
class Quantity:
    """A number with its kind: ``percent``, ``currency`` or ``plain``; ``unit`` is the next word.

    Not frozen, for construction speed (like :class:`DateRef`); treat as immutable."""

    value: float
    kind: str
    unit: str
    text: str
    start: int
    end: int
    sig_digits: int
    """How precisely it was stated (``"1.2 million"`` -> 2), for rounding-aware matching."""


def extract_dates(text: str) -> list[DateRef]:
    """All dates in ``text``, in order (see the module docstring for the forms)."""
    cls, rare, runs = _prepare(text)
    if not runs and (not rare or _DIGIT.search(rare) is None):
        return []  # cheap prefilter: most sentences state no date
    return _dates(text, cls, rare, runs)


def _dates(text: str, cls: bytes, rare: str, runs: list[tuple[int, int]]) -> list[DateRef]:
    """`extract_dates` given `_classes` and `_runs` of ``text``."""
    if rare and _DIGIT.search(rare) is not None:
        matches = list(_DATE.finditer(text))  # digits beyond ASCII: the scan of old
    else:
        matches = _date_matches(text, cls, runs)
    out: list[DateRef] = []
    for m in matches:
        # The last group that matched names the branch (groups never nest).
        last = m.lastgroup
        year: int | None
        month: int | None
        day: int | None = None
        decade = False
        if last == "ay" or last == "ad":
            am, ad, ay = m.group(4, 5, 6)
            year, month, day = int(ay) if ay else None, _MONTH_NUM[am], int(ad)
        elif last == "y":
            year, month = int(m[14]), None
        elif last == "id":
            year, month, day = int(m[1]), int(m[2]), int(m[3])
        elif last == "bm" or last == "by":
            bd, bm, by = m.group(7, 8, 9)
            year, month, day = int(by) if by else None, _MONTH_NUM[bm], int(bd)
        elif last == "cy":
            year, month = int(m[11]), _MONTH_NUM[m[10]]
        else:  # "dc" or "ds"
            year, month, decade = int(m[12]) if last == "dc" else 1900 + int(m[13]), None, True
        if day is not None and not 1 <= day <= 31:
            continue
        start, end = m.span()
        out.append(DateRef(year, month, day, decade, m.group(), start, end))
    return out


def extract_quantities(text: str) -> tuple[list[DateRef], list[Quantity]]:
    """``(extract_dates(text), extract_numbers(text, those dates))``, classifying
    ``text`` once."""
    if text.isascii():
        cls = (b" " + text.encode("ascii")).translate(_CLASS)
        if b"#" not in cls:
            # No digit (most sentences): no date and no digit number, so what `_numbers`
            # does with no runs and no dates — the number words, in text order.
            words: list[Quantity] = []
            for m in _word_matches(text, cls):
                s, e = m.span()
                q = _word_quantity(m, text, s, e)
                if q is not None:
                    words.append(q)
            return [], words
        rare, runs = "", _runs(cls)  # what `_prepare` gives for ASCII text
        digits = True
    else:
        cls, rare, runs = _prepare(text)
        digits = bool(runs) or bool(rare and _DIGIT.search(rare) is not None)
    dates = _dates(text, cls, rare, runs) if digits else []
    return dates, _numbers(text, dates, cls, rare, runs)


def extract_numbers(text: str, dates: Iterable[DateRef] | None = None) -> list[Quantity]:
    """Quantities in ``text`` outside any date span (pass ``dates`` if already found)."""
    cls, rare, runs = _prepare(text)
    if dates is None:
        dates = extract_dates(text) if runs or rare and _DIGIT.search(rare) else ()
    return _numbers(text, dates, cls, rare, runs)


def _numbers(text: str, dates: Iterable[DateRef], cls: bytes, rare: str,
             runs: list[tuple[int, int]]) -> list[Quantity]:
    taken = [(d.start, d.end) for d in dates]
    taken.sort()
    n_taken = len(taken)
    if not rare or _DIGIT.search(rare) is None:
        out = _digit_quantities(text, runs, taken) if runs else []
    else:  # digits beyond ASCII: the scan of old
        out = []
        i = 0  # matches come in text order: walk the date spans alongside (linear)
        for m in _NUMBER_DIGITS.finditer(text):
            s, e = m.span()
            while i < n_taken and taken[i][1] <= s:
                i += 1
            if i < n_taken and taken[i][0] < e:
                continue
            if not _part_of_name(text, s):
                out.append(_digit_quantity(m, text, s, e))
    if not rare or _FOLDS.search(rare) is None:
        word_matches: Iterable[re.Match[str]] = _word_matches(text, cls)
    elif _WORD_HINT.search(text.lower()):
        word_matches = _NUMBER_WORDS.finditer(text)  # the scan of old
    else:
        return out
    words: list[Quantity] = []
    i = 0
    for m in word_matches:
        s, e = m.span()
        while i < n_taken and taken[i][1] <= s:
            i += 1
        if i < n_taken and taken[i][0] < e:
            continue
        # (No `_PART_OF_NAME` check: a word starts after a non-word character, never a
        # letter, digit or "letter-".)
        q = _word_quantity(m, text, s, e)
        if q is not None:
            words.append(q)
    if not words:
        return out
    if not out:
        return words
    # Digit and word matches never start at the same offset; stripping never moves a
    # start (no match begins or ends with whitespace), so ``start`` orders them.
    return sorted(out + words, key=_START)


def _part_of_name(text: str, s: int) -> bool:
    """``"F-35"``, ``"X-Men 2"``: the number at ``s`` belongs to the name before it."""
    # The pattern needs a letter, "-" or digit just before ``s``: test that first.
    return s > 0 and ((c := text[s - 1]).isalnum() or c == "-") and \
        _PART_OF_NAME.search(text, max(0, s - 2), s + 1) is not None


def _digit_quantities(text: str, runs: list[tuple[int, int]],
                      taken: list[tuple[int, int]]) -> list[Quantity]:
    """The kept `_NUMBER_DIGITS` matches, for text whose ``\\d`` digits are all ASCII.

    A match holds a digit, and before its first one come at most a currency sign, one
    space and a point; an ASCII digit always starts a match. So the scanner's next match
    after ``pos`` is the search from 3 before the next digit (or from ``pos``). When what
    follows the run cannot continue a number (no ``",000"``, ``".5"``, scale or percent
    word; a lone ``"%"`` is taken), the match is the run with its prefix (`_num_start`)
    and needs no search: dropped at once when a date holds the digit, built directly
    otherwise.
    """
    out: list[Quantity] = []
    pos = 0
    n_text = len(text)
    n_taken = len(taken)
    i = 0  # first span ending after the run's next digit
    k = 0  # first span ending after the match start (the walk of old)
    search = _NUMBER_DIGITS.search
    for d, e in runs:
        e -= 1
        if e <= pos:
            continue
        d -= 1
        while True:
            if d < pos:
                d = pos  # inside the run: a digit
            # May the match go on after the run? (Then the pattern decides.)
            c = text[e] if e < n_text else ""
            if c == "," or c == ".":
                more = text[e + 1:e + 2] in _ASCII_DIGITS
            elif c.isspace():
                c = text[e + 1:e + 2]
                if c == "p" or c == "P":  # "percent", "per cent", not "people"
                    more = text[e + 2:e + 4].lower() == "er"
                else:
                    more = c in _SUFFIX_INITIALS
                c = ""
            else:
                more = c.isalpha()
            if not more:
                end = e + 1 if c == "%" else e
                while i < n_taken and taken[i][1] <= d:
                    i += 1
                if i < n_taken and taken[i][0] <= d:
                    pos = end  # holds a date's digit: dropped
                    break
                s = _num_start(text, pos, d)
                pos = end
                while k < n_taken and taken[k][1] <= s:
                    k += 1
                if not (k < n_taken and taken[k][0] < end) and not _part_of_name(text, s):
                    out.append(_plain_quantity(text, s, d, e, end))
                break
            m = search(text, d - 3 if d - 3 > pos else pos)
            if m is None:  # cannot happen (a digit always matches)
                return out
            s, pos = m.span()
            while k < n_taken and taken[k][1] <= s:
                k += 1
            if not (k < n_taken and taken[k][0] < pos) and not _part_of_name(text, s):
                out.append(_digit_quantity(m, text, s, pos))
            if pos >= e:
                break
            d = pos
    return out


def _num_start(text: str, pos: int, d: int) -> int:
    """Where the match through digit ``d`` starts: the leftmost of ``"$ .5"``, ``"$ 5"``,
    ``"$.5"``, ``".5"``, ``"$5"``, ``"5"`` that fits after ``pos``."""
    if d <= pos:
        return d
    c = text[d - 1]
    if c == ".":
        if d - 2 >= pos:
            c = text[d - 2]
            if c in _CURRENCY:
                return d - 2
            if c.isspace() and d - 3 >= pos and text[d - 3] in _CURRENCY:
                return d - 3
        return d - 1
    if c in _CURRENCY:
        return d - 1
    if c.isspace() and d - 2 >= pos and text[d - 2] in _CURRENCY:
        return d - 2
    return d


def _plain_quantity(text: str, s: int, d: int, e: int, end: int) -> Quantity:
    """`_digit_quantity` of a match ``text[s:end]`` without scale: currency sign, space
    and point before the digits ``d:e`` (see `_num_start`), ``"%"`` if ``end > e``."""
    num = text[d - 1:e] if s < d and text[d - 1] == "." else text[d:e]
    sig = _sig(num)
    if end > e:
        return Quantity(float(num), "percent", "", text[s:end], s, end, sig)
    if text[s] in _CURRENCY:
        return Quantity(float(num), "currency", "", text[s:e], s, e, sig)
    u = _UNIT_AFTER.match(text, e)
    return Quantity(float(num), "plain", u.group(1).lower() if u else "", text[s:e], s, e, sig)


def _digit_quantity(m: re.Match[str], text: str, s: int, e: int) -> Quantity:
    cur, num, scale, pct = m.groups()
    digits = num.replace(",", "")
    value = float(digits)
    sig = _sig(digits)
    if scale:
        low = scale.lower()
        if cur or not (low == "m" or (low == "k" and scale != low)):
            # Without currency "5M" is ambiguous and "5 m" is metres: the number only.
            factor = _SCALES.get(low)  # None: matched only through case folding ("3 bıllion")
            if factor is not None:
                value *= factor
    kind = "percent" if pct else "currency" if cur else "plain"
    return _make(text, s, e, value, kind, sig)


def _sig(digits: str) -> int:
    """Significant digits stated: ``"1200"`` -> 2, ``"1200.0"`` -> 5, ``"0.05"`` -> 1."""
    if "." in digits:
        return len(digits.replace(".", "").lstrip("0")) or 1
    return len(digits.strip("0")) or 1


def _word_quantity(m: re.Match[str], text: str, s: int, e: int) -> Quantity | None:
    w, half, wscale, wpct = m.groups()
    words = w.lower().replace("-", " ").split()
    wlow = wscale.lower() if wscale else ""
    if wlow and wlow not in _SCALES:
        return None  # matched only through case folding ("bıllion"): not a number
    value: float | None
    if len(words) == 1:
        word = words[0]
        if (word == "one" or word == "a") and not wscale:
            return None  # "one of them", "a house": not quantities
        value = _SMALL.get(word)  # (None: matched only through case folding, "ſix")
    else:
        if words == ["a", "dozen"]:
            words = ["dozen"]
        value = sum(_SMALL[w] for w in words) if all(w in _SMALL for w in words) else None
    if value is None:
        return None
    if half:
        value += 0.5
    if wscale:
        value *= _SCALES[wlow]
    return _make(text, s, e, value, "percent" if wpct else "plain", 2)


def _make(text: str, s: int, e: int, value: float, kind: str, sig: int) -> Quantity:
    unit = ""
    if kind == "plain":
        u = _UNIT_AFTER.match(text, e)
        if u is not None:
            unit = u.group(1).lower()
    raw = text[s:e]
    stripped = raw.strip()
    if len(stripped) != len(raw):  # never for these patterns; kept for safety
        s += len(raw) - len(raw.lstrip())
        e -= len(raw) - len(raw.rstrip())
    return Quantity(value, kind, unit, stripped, s, e, sig)


def number_matches(q: Quantity, values: Iterable[float]) -> bool:
    """Whether ``q`` equals one of ``values`` up to the precision ``q`` was stated with.

    ``"1.2 million"`` (2 significant digits) matches 1,234,567; ``"12"`` matches only
    12 (integers below 1,000 are compared exactly).
    """
    for v in values:
        if v == q.value:
            return True
        if q.value >= 1000 and v > 0 and _round_sig(v, q.sig_digits) == q.value:
            return True
        if abs(v - q.value) <= 1e-9 * max(1.0, abs(v)):
            return True
    return False


def number_in(q: Quantity, sorted_values: Sequence[float]) -> bool:
    """:func:`number_matches` against an ascending list, in O(log n) (bisect)."""
    tol = 1e-9 * max(1.0, abs(q.value))
    if q.value >= 1000 and q.value > 0:
        tol = max(tol, 0.5 * 10 ** (floor(log10(q.value)) - q.sig_digits + 1))
    i = bisect_left(sorted_values, q.value - tol)
    return i < len(sorted_values) and sorted_values[i] <= q.value + tol


def _round_sig(x: float, sig: int) -> float:
    if x == 0:
        return 0.0
    digits = sig - 1 - floor(log10(abs(x)))
    return round(x, digits)


def date_matches(d: DateRef, others: Iterable[DateRef]) -> bool:
    """Whether some date in ``others`` is compatible with ``d``.

    Parts stated on both sides must agree; a part stated on one side only is not a
    conflict (``"1981"`` ~ ``"July 11, 1981"``). A decade matches any year in it.
    """
    for o in others:
        if d.decade or o.decade:
            if d.year is not None and o.year is not None and d.year // 10 == o.year // 10:
                return True
            continue
        if d.year is not None and o.year is not None and d.year != o.year:
            continue
        if d.month is not None and o.month is not None and d.month != o.month:
            continue
        if d.day is not None and o.day is not None and d.day != o.day:
            continue
        if d.year is None and o.year is None and d.month is None:
            continue
        return True
    return False
