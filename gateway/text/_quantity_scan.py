"""Where the number and date patterns of :mod:`gateway.text.quantities` can match, found
without running them over the whole text.

Private to :mod:`gateway.text.quantities`, which turns the matches into values (and
re-exports the names its tests read). It holds the patterns (``_DATE``,
``_NUMBER_DIGITS``, ``_NUMBER_WORDS``), the class string and digit runs of a text and the candidate scans that return the matches of ``_DATE``
and ``_NUMBER_WORDS``. The digit-number scan, ``_digit_quantities``, stays in
``quantities``: it builds :class:`~gateway.text.quantities.Quantity` values directly.

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
take the whole-text scan instead. Nothing is kept between calls: a caller that wants
both dates and numbers of one text asks ``extract_quantities``, which classifies it
once.
"""

from __future__ import annotations

import re

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
_MONTH_INITIALS = ("J", "F", "M", "A", "S", "O", "N", "D", "of")
_ORDINALS = frozenset(("st", "nd", "rd", "th"))


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


def _prepare(text: str) -> tuple[bytes, str, list[tuple[int, int]]]:
    """`_classes` and `_runs` of ``text``."""
    cls, rare = _classes(text)
    return cls, rare, _runs(cls)


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
