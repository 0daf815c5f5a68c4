"""Numbers and dates found in text, normalized so they can be compared.

Pure functions; patterns compiled once at import.

- :func:`extract_dates` finds ``"July 11, 1981"``, ``"11 July 1981"``,
  ``"1981-07-11"``, ``"July 1981"``, ``"July 11"``, bare years (``"in 1981"``) and
  decades (``"the 1990s"``, ``"'90s"``) and returns :class:`DateRef` values with the
  parts that were stated (``None`` for the rest).
- :func:`extract_numbers` finds quantities that are *not* part of a date: digits
  with separators and decimals (``"1,200.5"``), scale words (``"1.2 million"``,
  ``"$3bn"``), percentages (``"12%"``, ``"12 percent"``), currency (``"£300"``) and
  spelled-out numbers (``"three"``, ``"twenty-five"``, ``"two and a half"``,
  ``"a dozen"``). The bare word ``"one"`` is not a number (it is usually a pronoun).
- :func:`number_matches` / :func:`date_matches` decide whether a stated value is
  backed by another one, allowing rounding (``"1.2 million"`` is backed by
  ``1,234,567``) and partial dates (``"1981"`` is backed by ``"July 11, 1981"``).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import floor, log10

__all__ = [
    "DateRef",
    "Quantity",
    "date_matches",
    "extract_dates",
    "extract_numbers",
    "number_in",
    "number_matches",
]

_MONTHS: dict[str, int] = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}
_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?"
)
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"(?:1[0-9]{3}|20[0-9]{2})"
_DATE = re.compile(  # the look-ahead lets the scanner skip most positions cheaply
    rf"(?=[0-9JFMASOND'’])(?:\b(?P<iy>{_YEAR})-(?P<im>[01]?\d)-(?P<id>[0-3]?\d)\b"
    rf"|\b(?P<am>{_MONTH})\s+(?P<ad>[0-3]?\d)(?!\d){_ORD}(?:,?\s+(?P<ay>{_YEAR})\b)?"
    rf"|\b(?P<bd>[0-3]?\d)(?!\d){_ORD}\s+(?:of\s+)?(?P<bm>{_MONTH})(?:,?\s+(?P<by>{_YEAR})\b)?"
    rf"|\b(?P<cm>{_MONTH}),?\s+(?P<cy>{_YEAR})\b"
    rf"|(?:\b(?P<dc>[12][0-9]{{2}}0)|['’](?P<ds>[0-9]0))s\b"
    rf"|\b(?P<y>{_YEAR})\b(?!\s*(?:%|percent|per cent|million|billion|thousand)|[.,]\d))"
)

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
_UNITWORD = (
    r"zero|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    r"fifteen|sixteen|seventeen|eighteen|nineteen"
)
_TENS = r"twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety"
# Two passes, each behind a one-character look-ahead so the scanner skips most
# positions cheaply (about 6x faster than one alternation over long contexts).
_NUMBER_DIGITS = re.compile(
    r"(?=[$£€¥0-9.])(?P<cur>[$£€¥])?\s?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:\s?(?P<scale>hundred|thousand|million|billion|trillion|bn|mn|tn|m|k)\b)?"
    r"(?P<pct>\s?%|\s?percent\b|\s?per cent\b)?",
    re.IGNORECASE,
)
# The look-ahead holds exactly the letters a number word can start with (case-folded
# like the rest), so most words are rejected before the alternation is tried.
_NUMBER_WORDS = re.compile(
    rf"\b(?=[adefnostz])(?P<w>(?:{_TENS})(?:[-\s](?:one|{_UNITWORD}))?|{_UNITWORD}|a dozen|dozen|one|"
    r"a(?=\s+(?:hundred|thousand|million|billion|trillion)\b))"
    r"(?P<half>\s+and\s+a\s+half)?"
    r"(?:\s+(?P<wscale>hundred|thousand|million|billion|trillion)\b)?"
    r"(?P<wpct>\s+percent\b|\s+per cent\b)?\b",
    re.IGNORECASE,
)
_NUMBER_WORDS_ASCII = re.compile(_NUMBER_WORDS.pattern)
"""The same pattern, case-sensitive, for lower-cased ASCII text: on ASCII, ignoring case
is exactly lower-casing both sides (the pattern is lower case already), and the
engine matches about 2.5x faster without IGNORECASE."""
_WORD_HINTS = ("zero", "two", "thre", "four", "five", "six", "seven", "eight", "nine", "ten",
               "eleven", "twel", "fift", "twent", "thirt", "fort", "eight", "dozen", "hundred",
               "thousand", "million", "billion", "trillion", "one")
_WORD_HINT = re.compile("|".join(_WORD_HINTS))
"""``any(h in low for h in _WORD_HINTS)`` as one scan (literal-first: fast)."""
_UNIT_AFTER = re.compile(r"\s*([A-Za-z]+)")
_DIGIT = re.compile(r"\d")
"""Every date form and every non-word number contains one (same ``\\d`` as the patterns)."""
_PART_OF_NAME = re.compile(r"[A-Za-z]-\s?\d|[A-Za-z]\d")


@dataclass(frozen=True, slots=True)
class DateRef:
    """A date with only the stated parts set. ``decade`` marks ``"the 1990s"``."""

    year: int | None
    month: int | None = None
    day: int | None = None
    decade: bool = False
    text: str = ""
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Quantity:
    """A number with its kind: ``percent``, ``currency`` or ``plain``; ``unit`` is the next word."""

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
    out: list[DateRef] = []
    if _DIGIT.search(text) is None:
        return out  # cheap prefilter: most sentences state no date
    for m in _DATE.finditer(text):
        # The last group that matched names the branch (groups never nest).
        last = m.lastgroup
        year: int | None
        month: int | None
        day: int | None = None
        decade = False
        if last == "id":
            year, month, day = int(m["iy"]), int(m["im"]), int(m["id"])
        elif last == "ad" or last == "ay":
            year, month, day = _year(m["ay"]), _month(m["am"]), int(m["ad"])
        elif last == "bm" or last == "by":
            year, month, day = _year(m["by"]), _month(m["bm"]), int(m["bd"])
        elif last == "cy":
            year, month = int(m["cy"]), _month(m["cm"])
        elif last == "dc" or last == "ds":
            year, month, decade = int(m["dc"]) if last == "dc" else 1900 + int(m["ds"]), None, True
        else:
            year, month = int(m["y"]), None
        if day is not None and not 1 <= day <= 31:
            continue
        out.append(DateRef(year, month, day, decade, m.group(0), m.start(), m.end()))
    return out


def _year(s: str | None) -> int | None:
    return int(s) if s else None


def _month(s: str) -> int:
    return _MONTHS[s.rstrip(".").lower()]


def extract_numbers(text: str, dates: Iterable[DateRef] | None = None) -> list[Quantity]:
    """Quantities in ``text`` outside any date span (pass ``dates`` if already found)."""
    digits = _DIGIT.search(text) is not None
    if dates is None:
        dates = extract_dates(text) if digits else ()
    taken = sorted((d.start, d.end) for d in dates)
    out: list[Quantity] = []
    i = 0  # matches come in text order: walk the date spans alongside (linear, not O(n*m))
    matches = list(_NUMBER_DIGITS.finditer(text)) if digits else []
    low = text.lower()
    if _WORD_HINT.search(low):
        if text.isascii():
            matches += _NUMBER_WORDS_ASCII.finditer(low)  # same offsets: lower() keeps length
        else:
            matches += _NUMBER_WORDS.finditer(text)
        matches.sort(key=lambda m: m.start())
    for m in matches:
        while i < len(taken) and taken[i][1] <= m.start():
            i += 1
        if i < len(taken) and taken[i][0] < m.end():
            continue
        if _PART_OF_NAME.search(text, max(0, m.start() - 2), m.start() + 1):
            continue  # "F-35", "X-Men 2" keeps its number inside the name
        q = _quantity(m, text)
        if q is not None:
            out.append(q)
    return out


def _quantity(m: re.Match[str], text: str) -> Quantity | None:
    g = m.groupdict()
    if g.get("num") is not None:
        digits = g["num"].replace(",", "")
        value = float(digits)
        sig = len(digits.replace(".", "").lstrip("0").rstrip("0")) or 1
        if "." in digits:
            sig = len(digits.replace(".", "").lstrip("0")) or 1
        scale = g["scale"]
        if scale:
            low = scale.lower()
            if low in ("m", "k") and scale != low and not g["cur"]:
                scale = None  # "5M" without currency is ambiguous; keep the number only
            elif low == "m" and not g["cur"]:
                scale = None  # "5 m" is metres, not millions
        if scale and scale.lower() not in _SCALES:
            scale = None  # matched only through case folding ("3 bıllion")
        if scale:
            value *= _SCALES[scale.lower()]
        kind = "percent" if g["pct"] else "currency" if g["cur"] else "plain"
    else:
        words = g["w"].lower().replace("-", " ").split()
        if words in (["one"], ["a"]) and not g["wscale"]:
            return None  # "one of them", "a house": not quantities
        if words == ["a", "dozen"]:
            words = ["dozen"]
        wscale = (g["wscale"] or "").lower()
        if not all(w in _SMALL for w in words) or (wscale and wscale not in _SCALES):
            return None  # matched only through case folding ("ſix", "bıllion"): not a number
        value = sum(_SMALL[w] for w in words)
        if g["half"]:
            value += 0.5
        if g["wscale"]:
            value *= _SCALES[g["wscale"].lower()]
        sig = 2
        kind = "percent" if g["wpct"] else "plain"
    u = _UNIT_AFTER.match(text, m.end())
    unit = u.group(1).lower() if u and kind == "plain" else ""
    raw = text[m.start():m.end()]  # the stated form (``m`` may run over lower-cased text)
    start = m.start() + len(raw) - len(raw.lstrip())
    end = m.end() - (len(raw) - len(raw.rstrip()))
    return Quantity(value, kind, unit, raw.strip(), start, end, sig)


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
