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

The patterns below define what matches; how they are run is a speed matter with the
same results as ``finditer`` over the whole text. A pattern that starts with a
look-ahead or ``\\b`` is tried by sre at every position (~15 ns each, 1 ms per
60 KB), but one that starts with a single literal is scanned for in a tight C loop. So
each text gets a class string (`_classes`: one byte per character, ASCII digits ``#``,
ASCII letters lower-cased, anything else a space) and literal-first patterns over it
find the only places a match can start: ASCII digit runs (`_RUNS`) for dates and digit
numbers, and a space before the first letters of a number word (`_WORD_AT`). The real
patterns then run at those places only (`_date_matches`, `_digit_quantities`,
`_word_matches`; each docstring says why no match is missed). Texts with non-ASCII
``\\d`` digits (dates, digit numbers) or with ``İ ı ſ K`` (number words, see `_FOLDS`)
take the whole-text scan instead. The class string of the last short text is kept
(`_prepare`): ``extract_numbers(s, extract_dates(s))`` classifies ``s`` once.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import floor, log10
from operator import attrgetter

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
"""Groups by number (`_dates` reads them so): iy 1, im 2, id 3, am 4, ad 5, ay 6, bd 7,
bm 8, by 9, cm 10, cy 11, dc 12, ds 13, y 14."""

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
# Two passes, each behind a one-character look-ahead (cheaper when a whole text is
# scanned); the candidate scans run them only where a match can start.
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

# Candidate scan (see the module docstring). The class string maps ASCII digit -> ``#``,
# ASCII letter -> lower case, ``_`` kept, anything else (non-ASCII included) -> space,
# with a space prepended: text offset ``i`` is class offset ``i + 1``.
_CLASS = bytes(
    0x23 if 0x30 <= b <= 0x39 else b + 32 if 0x41 <= b <= 0x5A
    else b if 0x61 <= b <= 0x7A or b == 0x5F else 0x20
    for b in range(256)
)
_ASCII = bytes(range(128))
_RUNS = re.compile(rb"##*")
"""ASCII digit runs. Every date and digit number contains an ASCII digit unless the text
holds other ``\\d`` digits (then the patterns scan the whole text, as before)."""
_WORD_AT = re.compile(
    rb" (?:t(?:w[eo]|h(?:re|irt)|en)|f(?:o(?:ur|rt)|i[vf])|s(?:ix|ev)|e(?:ig|le)|nin|zer|doz"
    rb"|one|a(?= +(?:hun|tho|mil|bil|tri|doz)))"
)
"""Where a `_NUMBER_WORDS` match can start: after a non-word character (or anything
non-ASCII) and with the first letters of one of its alternatives. Only letters are
consumed, so no candidate hides the next one's space."""
_FOLDS = re.compile("[\u0130\u0131\u017f\u212a]")
"""The non-ASCII characters that match an ASCII letter when case is ignored (``İ ı ſ K``;
``tests/layers/test_quantities_fast.py`` derives the set). Without them, an
IGNORECASE match of `_NUMBER_WORDS` spells its words in ASCII letters, which the class
string keeps."""
_MONTH_NAMES = frozenset(name.capitalize() for name in _MONTHS)
"""The month alternatives of `_MONTH` (without its ``"."``), as stated."""
_MONTH_NUM: dict[str, int] = {
    form: n for name, n in _MONTHS.items() for form in (name.capitalize(), name.capitalize() + ".")
}
"""A matched month (``"Sept."``) -> its number."""
_MONTH_INITIALS = ("J", "F", "M", "A", "S", "O", "N", "D", "of")
_ORDINALS = frozenset(("st", "nd", "rd", "th"))
_ASCII_DIGITS = frozenset("0123456789")
_SUFFIX_INITIALS = frozenset("hHtTmMbBkK%\u212a")
"""What a scale or percent after one space starts with, case ignored (K: Kelvin sign;
"p" is looked at further)."""
_CURRENCY = frozenset("$£€¥")
_START = attrgetter("start")


def _classes(text: str) -> tuple[bytes, str]:
    """The class string of ``text`` (see `_CLASS`) and its non-ASCII characters."""
    if text.isascii():
        return (b" " + text.encode("ascii")).translate(_CLASS), ""
    rare = (text.encode("utf-8", "surrogatepass").translate(None, _ASCII)
            .decode("utf-8", "surrogatepass"))
    # "replace" turns each non-ASCII character into one "?": offsets are kept.
    return (b" " + text.encode("ascii", "replace")).translate(_CLASS), rare


def _runs(cls: bytes) -> list[tuple[int, int]]:
    """The ASCII digit runs, as class offsets (text offsets + 1)."""
    return [r.span() for r in _RUNS.finditer(cls)] if b"#" in cls else []


_SHORT = 2000
_last: tuple[str, bytes, str, list[tuple[int, int]]] = ("", b" ", "", [])
"""`_prepare` of the last short text: ``extract_numbers(s, extract_dates(s))`` per answer
sentence classifies each sentence once."""


def _prepare(text: str) -> tuple[bytes, str, list[tuple[int, int]]]:
    """`_classes` and `_runs` of ``text`` (remembered for the last short text)."""
    global _last
    last = _last
    if last[0] is text:
        return last[1], last[2], last[3]
    cls, rare = _classes(text)
    runs = _runs(cls)
    if len(text) <= _SHORT:
        _last = (text, cls, rare, runs)
    return cls, rare, runs


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


def _date_matches(text: str, cls: bytes, runs: list[tuple[int, int]]) -> list[re.Match[str]]:
    """``list(_DATE.finditer(text))`` for text whose ``\\d`` digits are all ASCII.

    A date holds a digit; before its first one there is nothing, an apostrophe (``'90s``)
    or ``Month.,? `` (the only branches that do not start with a digit), so each digit
    run's candidates are tried in text order and the first match is the one the scanner
    would find. The run's length rules branches out (a day has 1-2 digits, a year 4),
    and a day without a month before it needs ``(st|nd|rd|th)? (of )?`` and a month after.
    """
    out: list[re.Match[str]] = []
    pos = 0
    n_text = len(text)
    match = _DATE.match
    for d, e in runs:
        d -= 1
        if d < pos:
            continue
        e -= 1
        n = e - d
        if n == 3 or n > 4:
            continue
        m = None
        if d > pos:
            prev = text[d - 1]
            if prev.isspace():  # "July 11": the word before the whitespace a month?
                k = d - 1
                while k > pos and text[k - 1].isspace():
                    k -= 1
                if k > pos and text[k - 1] == ",":
                    k -= 1
                if k > pos and text[k - 1] == ".":
                    k -= 1
                w = cls.rfind(b" ", pos, k + 1)  # class offset of the space = word start
                if w >= 0 and k - w <= 9 and text[w:k] in _MONTH_NAMES:
                    m = match(text, w)
            elif n == 2 and (prev == "'" or prev == "’"):
                m = match(text, d - 1)
        if m is None:
            if n != 4:  # a day: "11th of July"?
                k = e + 2 if text[e:e + 2] in _ORDINALS else e
                if k >= n_text or not text[k].isspace():
                    continue
                k += 1
                while k < n_text and text[k].isspace():
                    k += 1
                if not text.startswith(_MONTH_INITIALS, k):
                    continue
            m = match(text, d)
        if m is not None:
            out.append(m)
            pos = m.end()
    return out


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


def _word_matches(text: str, cls: bytes) -> list[re.Match[str]]:
    """``list(_NUMBER_WORDS.finditer(text))`` for text without `_FOLDS` characters.

    A match starts after a non-word character (``\\b``) with ASCII letters (no
    `_FOLDS`: only ASCII letters match the pattern's letters, case ignored), which the
    class string keeps lower-cased, so `_WORD_AT` finds every start; the pattern is
    tried at each in text order, skipping those inside the last match.
    """
    out: list[re.Match[str]] = []
    pos = 0
    match = _NUMBER_WORDS.match
    for c in _WORD_AT.finditer(cls):
        p = c.start()  # class offset of the space before = text offset of the word
        if p >= pos and (m := match(text, p)) is not None:
            out.append(m)
            pos = m.end()
    return out


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
