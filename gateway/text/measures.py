"""Measures: numbers read with their unit, dimension and qualifier, and compared.

:mod:`gateway.text.quantities` finds numbers (``Quantity``: a value and a kind).
Here each one becomes a :class:`Measure` by reading what surrounds it in its text:

- the **unit** after it (:func:`gateway.text.units.read_unit`): ``330 m`` and
  ``330 metres`` are one length, ``1,083 feet`` another way to write it, ``330 feet``
  a different one; a word that is not a unit makes the value a *count* of that noun
  (``15 patients``), and ``15 %`` is a percentage — neither supports the other;
- a **range** partner's unit (``1.5 to 13 mm``, ``2 °C to 8 °C``);
- the **qualifier** before it: a hedge (``about``, ``roughly``, ``nearly`` — rounding
  allowed) or a bound (``more than``, ``over``, ``at least`` / ``up to``, ``under``,
  ``below``, ``no more than``): ``over $50`` and ``under $50`` contradict;
- ordinals (``the 5th``) and clock times (``10:05``, ``2 pm``) as their own kinds.

:func:`sentence_measures` also reads values that are no ``Quantity``: ``an hour``,
``half an hour``, ``a month and a half``, and fractions (``a tenth`` = 10 %).
:mod:`gateway.text.measure_relation` compares an answer's measure with a context one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass

from gateway.text.quantities import DateRef, Quantity
from gateway.text.units import Unit, factors_of, read_unit, unit_named, unit_words

__all__ = ["COUNT", "Measure", "NumberMeasures", "measure_of", "sentence_measures",
           "years_as_measures"]

COUNT = "count"
"""Dimension of a number without a unit ("15 patients", "3 of them")."""


@dataclass(slots=True)
class Measure:
    """A stated value with what it measures. ``base`` is in the dimension's base unit."""

    value: float
    base: float
    dim: str
    """``length``, ``time``, ``volume/time``, ``percent``, ``currency:$``, ``count``,
    ``ordinal``, ``clock``…"""
    unit: Unit | None
    noun: str
    """A count's noun ("patients"), else ``""``."""
    text: str
    start: int
    end: int
    """Span of the number and its unit in the text it was read from."""
    sig: int
    approx: bool = False
    bound: int = 0
    """+1: a lower bound ("more than", "over", "at least"); -1: an upper bound ("up to",
    "under", "no more than"); 0: the value itself."""
    ceiling: bool = False
    """An upper bound that states the maximum itself ("up to", "a maximum of")."""

    @property
    def base_dim(self) -> str:
        return self.dim.split("/", 1)[0]

    @property
    def per(self) -> str | None:
        return self.dim.split("/", 1)[1] if "/" in self.dim else None


_HEDGE = re.compile(
    r"(?:\b(?:about|approximately|approx\.?|around|roughly|nearly|almost|some|circa|"
    r"close\s+to|an\s+estimated|estimated|just\s+(?:over|under|below|above)|"
    r"getting\s+on\s+for|the\s+best\s+part\s+of)|~|≈)\s*$", re.IGNORECASE)
_LOWER = re.compile(
    r"(?:\b(?:(?<!not\s)(?<!no\s)more\s+than|over|above|at\s+least|exceeding|in\s+excess\s+of|"
    r"upwards\s+of|a\s+minimum\s+of|minimum(?:\s+of)?|min\.?|greater\s+than|"
    r"higher\s+than|longer\s+than|beyond)|>|≥|>=)\s*$", re.IGNORECASE)
_UPPER = re.compile(
    r"(?:\b(?:(?:no|not)\s+more\s+than|up\s+to|under|below|less\s+than|fewer\s+than|"
    r"at\s+most|within|inside|a\s+maximum\s+of|maximum(?:\s+of)?|max\.?|no\s+later\s+than|"
    r"shorter\s+than|lower\s+than|not\s+exceeding|a\s+max(?:imum)?\s+of)|<|≤|<=)\s*$",
    re.IGNORECASE)
_NOT_MORE = re.compile(r"\b(?:not|never|no)\b(?:\s+\w+){0,2}\s+(?:more|over|above|exceed\w*|"
                       r"longer|later)\b[^.;]*$|n[’']t(?:\s+\w+){0,2}\s+(?:more|over|above|"
                       r"exceed\w*)\b[^.;]*$", re.IGNORECASE)
_CEILING = re.compile(r"\b(?:up\s+to|a\s+maximum\s+of|maximum(?:\s+of)?|max\.?)\s*$",
                      re.IGNORECASE)
_AFTER_LOWER = re.compile(r"\s*(?:or\s+more|and\s+(?:above|over|up)|or\s+longer|\+)", re.I)
_AFTER_UPPER = re.compile(r"\s*(?:or\s+(?:less|fewer|under|below)|at\s+most|max(?:imum)?\b)",
                          re.IGNORECASE)
_NUM_PART = re.compile(r"[$£€¥]?\s?\.?\d[\d,]*(?:\.\d+)?")
_ORDINAL = re.compile(r"(?:st|nd|rd|th)\b", re.IGNORECASE)
_CLOCK = re.compile(r"\b([01]?\d|2[0-3])(?::([0-5]\d)\s*([ap]\.?m\.?)?|\.([0-5]\d)\s*([ap]\.?m\.?))"
                    r"(?![\d.,]*\d)|"
                    r"\b(1[0-2]|0?[1-9])\s*([ap]\.?m\.?)(?=\W|$)|\b(noon|midnight)\b",
                    re.IGNORECASE)
# Groups: 1 hour, 2 minutes, 3 am/pm (h:mm); 1, 4 minutes, 5 am/pm (h.mm am); 6 hour,
# 7 am/pm (h am); 8 noon/midnight.
_CLOCK_HINT = re.compile(r"[\dnNmM](?i:(?<=\d)\s*[ap]\.?m|(?<=n)oon|(?<=m)idnight)")
"""What every ``_CLOCK`` match without a ":" has (a digit before "am"/"pm", "noon",
"midnight"): a search that opens with a case-sensitive character class runs the
engine's fast scan (a case-insensitive one gets none), ``_CLOCK`` (``\b`` first) is
tried at every position; the rest of the hint is case-insensitive."""
_ASCII_CLOCK_HINT = re.compile(r"[0-9]\s*[apAP]\.?[mM]")
"""``_CLOCK_HINT``'s digit branch on ASCII text (where ``\\d`` is ``[0-9]`` and case
folds only ASCII letters)."""
_RANGE_TO = re.compile(r"\s*(?:to|-|–|—|and|or)\s*$")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_ARTICLE_UNIT = re.compile(  # the look-ahead: the letters a match can start with
    r"(?=[aefhlnortw])\b(?:(half)\s+(?:(?:an?|one)\s+)?|(?:an?|one)\s+(?=\w+\s+and\s+a\s+half)|"
    r"(?:for|within|over|after|than|about|around|nearly|almost|roughly|lasts|lasted|"
    r"takes|took|another|least|once|every)\s+(?:an?)\s+)"
    r"(\w+)(\s+and\s+a\s+half)?\b", re.IGNORECASE)
_ARTICLE = re.compile(r"\b(?:half|an?|one)\b", re.IGNORECASE)
_ARTICLE_NEXT = re.compile(r"(?:an?|one|half)\s+(?=(\w+))")
"""On lower-cased ASCII text, the word after each "a", "an", "one" or "half" and its
spaces: every word ``_ARTICLE_UNIT`` reads as a unit is one of them (a necessary test,
5x cheaper than that pattern, which tries a score of openers at every word)."""
_CLOCK_DIGITS = re.compile(r"\d(?:[:.]\d|\s*[ap]\.?m)", re.IGNORECASE)
"""Where ``_CLOCK`` can match a digit time ("10:05", "10.05 pm", "2 pm"): on ASCII text
(where ``IGNORECASE`` folds only ASCII letters) no match here and no "noon" or
"midnight" means no clock time (a necessary test, 7x cheaper than the pattern)."""
_ARTICLE_UNITS = unit_words(("time", "length", "mass", "volume"))
"""The units ``_ARTICLE_UNIT`` reads ("an *hour*", "half a *mile*"): without one of them
among a sentence's words the pattern is not tried."""
_DIGIT = re.compile(r"\d")
_ASCII_DIGIT = re.compile(r"[0-9]")
"""``_DIGIT`` for ASCII text (where ``\\d`` is these ten)."""
_FRACTIONS: dict[str, float] = {
    "half": 0.5, "third": 1 / 3, "quarter": 0.25, "fifth": 0.2, "tenth": 0.1,
    "sixth": 1 / 6, "eighth": 0.125, "hundredth": 0.01,
}
_FRACTION = re.compile(
    r"\b(a|one|two|three|four|nine)\s+(half|third|quarter|fifth|tenth|sixth|eighth|"
    r"hundredth)s?\b(?!\s+(?:an?\b|of\s+an?\b))", re.IGNORECASE)


def _fraction_hint(low: str) -> bool:
    """A substring test before ``_FRACTION`` (eight ``in`` tests: each a fast scan, where
    a pattern of the eight words is tried at every position, three times slower)."""
    return ("half" in low or "third" in low or "quarter" in low or "fifth" in low
            or "tenth" in low or "sixth" in low or "eighth" in low or "hundredth" in low)


_FRACTION_COUNT = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "nine": 9}
_CURRENCY_DIM = {"$": "currency:$", "£": "currency:£", "€": "currency:€", "¥": "currency:¥"}


def _ceiling(text: str, start: int) -> bool:
    return _CEILING.search(text[max(0, start - 20):start]) is not None


# What the text before a value must end with (trailing whitespace aside, lower-cased)
# for _HEDGE / _LOWER / _UPPER to match there: each pattern ends in ``\s*$`` after a
# word or symbol, and these are the last words and symbols of its alternatives (a
# necessary condition on ASCII text; other text goes to the pattern).
_HEDGE_ENDS = ("about", "approximately", "approx", "approx.", "around", "roughly", "nearly",
               "almost", "some", "circa", "to", "estimated", "over", "under", "below",
               "above", "for", "of", "~")
_LOWER_ENDS = ("than", "over", "above", "least", "exceeding", "of", "minimum", "min", "min.",
               "beyond", ">", ">=")
_UPPER_ENDS = ("than", "to", "under", "below", "most", "within", "inside", "of", "maximum",
               "max", "max.", "exceeding", "<", "<=")


def _qualifier(text: str, start: int, end: int) -> tuple[bool, int]:
    """(hedged, bound) from the words right before ``start`` and right after ``end``."""
    before = text[max(0, start - 30):start]
    # Most values follow a word no qualifier ends with ("the", "in", "was", "$"): the
    # three patterns, tried at every position of ``before``, are then skipped.
    tail = before.rstrip()[-16:]
    plain = tail.isascii()
    low = tail.lower()
    approx = (not plain or low.endswith(_HEDGE_ENDS)) and _HEDGE.search(before) is not None
    bound = 1 if (not plain or low.endswith(_LOWER_ENDS)) and _LOWER.search(before) else \
        -1 if (not plain or low.endswith(_UPPER_ENDS)) and _UPPER.search(before) else 0
    if bound == 1 and _NOT_MORE.search(before):
        bound = -1  # "do not take more than 10 mg": an upper bound
    if not bound:
        if _AFTER_LOWER.match(text, end):
            bound = 1
        elif _AFTER_UPPER.match(text, end):
            bound = -1
    return approx, bound


def measure_of(text: str, q: Quantity) -> Measure:
    """``q`` (found in ``text``) read with its unit and qualifier."""
    m = _bare_measure(text, q)
    m.approx, m.bound = _qualifier(text, q.start, q.end)
    return m


def _bare_measure(text: str, q: Quantity) -> Measure:
    """``q`` read with its unit, without its qualifier (which changes neither its value
    nor its dimension): :func:`measure_of` sets ``approx`` and ``bound``."""
    start = q.start
    num = _NUM_PART.match(text, start) if not q.text[:1].isalpha() else None
    unit_at = q.end
    if num is not None and q.kind == "plain" and num.end() < q.end and \
            _digits_value(num.group(0)) == q.value:
        # "330 m": the scale pattern took a unit letter it did not apply.
        unit_at = num.end()
    approx, bound = False, 0
    if q.kind == "percent":
        return Measure(q.value, q.value, "percent", unit_named("%"), "", q.text, start, q.end,
                       q.sig_digits, approx, bound)
    if q.kind == "currency":
        dim = _CURRENCY_DIM.get(q.text[:1], "currency:$")
        return Measure(q.value, q.value, dim, None, "", q.text, start, q.end, q.sig_digits,
                       approx, bound)
    if num is not None and _ORDINAL.match(text, num.end()):
        return Measure(q.value, q.value, "ordinal", None, "", q.text, start, num.end() + 2,
                       q.sig_digits, approx, bound)
    got = read_unit(text, unit_at)
    if got is not None:
        unit, end = got
        if unit.dim.startswith("currency"):
            return Measure(q.value, q.value * unit.factor, unit.dim.split("/")[0], unit, "",
                           text[start:end], start, end, q.sig_digits, approx, bound)
        if unit.dim == "percent":
            return Measure(q.value, q.value, "percent", unit, "", text[start:end], start, end,
                           q.sig_digits, approx, bound)
        return Measure(q.value, q.value * unit.factor, unit.dim, unit, "", text[start:end],
                       start, end, q.sig_digits, approx, bound)
    noun = _WORD.match(text, unit_at + 1) if unit_at < len(text) and text[unit_at] == " " \
        else None
    return Measure(q.value, q.value, COUNT, None, noun.group(0).lower() if noun else "",
                   q.text, start, q.end, q.sig_digits, approx, bound)


def _digits_value(num: str) -> float | None:
    try:
        return float(num.lstrip("$£€¥ ").replace(",", ""))
    except ValueError:
        return None


def _inherit_ranges(text: str, out: list[Measure]) -> None:
    """``1.5 to 13 mm``: the first number of a range takes the second one's unit."""
    for i in range(len(out) - 1):
        a, b = out[i], out[i + 1]
        if _opens_range(a) and _range_unit(text, a, b):
            out[i] = _inherited(a, b)


def _opens_range(a: Measure) -> bool:
    """A count with no noun after it, or "to" / "and" / "or": it may take the unit of
    the value after it (read only from ``a``'s unit and noun: no qualifier needed)."""
    return a.dim == COUNT and (not a.noun.isalpha() or a.noun in ("to", "and", "or"))


def _range_unit(text: str, a: Measure, b: Measure) -> bool:
    """Whether ``a`` (:func:`_opens_range`) takes ``b``'s unit: ``b`` has one and follows
    a short range word ("to", "-", "and", "or")."""
    if b.unit is None or b.dim in (COUNT, "ordinal", "clock"):
        return False
    gap = text[a.end:b.start]
    return len(gap) <= 6 and _RANGE_TO.match(" " + gap) is not None


def _inherited(a: Measure, b: Measure) -> Measure:
    assert b.unit is not None
    return Measure(a.value, a.value * b.unit.factor, b.dim, b.unit, "", a.text, a.start,
                   a.end, a.sig, a.approx or b.approx, a.bound)


def _clocks(text: str) -> list[Measure]:
    if text.isascii() and _CLOCK_DIGITS.search(text) is None:
        low = text.lower()
        if "noon" not in low and "midnight" not in low:
            return []
    out = []
    for m in _CLOCK.finditer(text):
        if m.group(8):
            value = 12.0 if m.group(8).lower() == "noon" else 0.0
        elif m.group(6):
            h = int(m.group(6)) % 12
            value = float(h + (12 if m.group(7)[0].lower() == "p" else 0))
        else:
            h = int(m.group(1))
            mi = int(m.group(2) or m.group(4))
            ampm = m.group(3) or m.group(5)
            if ampm and ampm[0].lower() == "p" and h < 12:
                h += 12
            value = h + mi / 60
        got = m.group(0).rstrip()
        out.append(Measure(value, value, "clock", None, "", got, m.start(), m.start() + len(got),
                           4))
    return out


def _extras(text: str, taken: Sequence[tuple[int, int]],
            words: Set[str] | None = None, low: str | None = None) -> list[Measure]:
    """Values written without digits or number words: "an hour", "half an hour", "a
    month and a half", "a tenth". ``words``: the text's tokens, when the caller has them
    (a sentence naming no unit of time, length, mass or volume skips the first pattern);
    ``low``: ``text.lower()``, when the caller has it."""
    out: list[Measure] = []

    def free(s: int, e: int) -> bool:
        return all(e <= a or b <= s for a, b in taken)

    if low is None:
        low = text.lower()
    if (" a" in low or "half" in low or low.startswith(("a", "half", "one"))) and (
            words is None or not _ARTICLE_UNITS.isdisjoint(words)) and (
            not text.isascii() or not _ARTICLE_UNITS.isdisjoint(_ARTICLE_NEXT.findall(low))):
        for m in _ARTICLE_UNIT.finditer(text):
            half, word, and_half = m.group(1), m.group(2), m.group(3)
            unit = unit_named(word.lower())
            if unit is None or unit.dim not in ("time", "length", "mass", "volume") or \
                    not free(m.start(), m.end()):
                continue
            value = 0.5 if half else 1.5 if and_half else 1.0
            art = _ARTICLE.search(text, m.start(), m.end())
            s = art.start() if art is not None else m.start()
            approx, bound = _qualifier(text, s, m.end())
            out.append(Measure(value, value * unit.factor, unit.dim, unit, "", text[s:m.end()],
                               s, m.end(), 1 if value != 1.5 else 2, approx, bound))
            taken = [*taken, (s, m.end())]
    if _fraction_hint(low):
        for m in _FRACTION.finditer(text):
            if not free(m.start(), m.end()):
                continue
            count = _FRACTION_COUNT[m.group(1).lower()]
            value = 100 * count * _FRACTIONS[m.group(2).lower()]
            approx, bound = _qualifier(text, m.start(), m.end())
            out.append(Measure(value, value, "percent", None, "", m.group(0), m.start(),
                               m.end(), 2, approx, bound))
    return out


def years_as_measures(text: str, dates: Sequence[DateRef]) -> tuple[list[DateRef],
                                                                     list[Measure]]:
    """A bare "year" followed by a unit is a quantity: "up to 1000 V", "1500 kg"."""
    kept: list[DateRef] = []
    out: list[Measure] = []
    for d in dates:
        if d.month is None and d.day is None and not d.decade and d.year is not None:
            got = read_unit(text, d.end)
            if got is not None and not got[0].dim.startswith("time"):
                unit, end = got
                approx, bound = _qualifier(text, d.start, end)
                v = float(d.year)
                out.append(Measure(v, v * unit.factor, unit.dim, unit, "", text[d.start:end],
                                   d.start, end, _sig_int(d.year), approx, bound))
                continue
        kept.append(d)
    return kept, out


def _sig_int(n: int) -> int:
    return len(str(abs(n)).strip("0")) or 1


def sentence_measures(text: str, numbers: Iterable[Quantity],
                      dates: Iterable[DateRef] = (),
                      words: Set[str] | None = None) -> list[Measure]:
    """Every measure of ``text`` (whose ``numbers`` and ``dates`` were found in it), in
    text order: clock times replace the numbers they are written with; a "year" with a
    unit after it (:func:`years_as_measures`) is a measure, the caller drops it as a date.
    ``words``: the text's tokens when the caller has them (they only skip patterns that
    cannot match)."""
    low = text.lower()  # read by the clock and the "an hour" tests: lower-cased once
    clocks = _sentence_clocks(text, low)
    out: list[Measure] = []
    for q in numbers:
        if clocks and any(c.start <= q.start < c.end for c in clocks):
            continue
        out.append(measure_of(text, q))
    if len(out) > 1:
        _inherit_ranges(text, out)
    if dates:
        dates, years = years_as_measures(text, list(dates))
    else:  # no dates (most sentences): what years_as_measures gives for none
        dates, years = [], []
    return _finish(text, out, dates, years, clocks, words, low)


def _finish(text: str, out: list[Measure], dates: list[DateRef], years: list[Measure],
            clocks: list[Measure], words: Set[str] | None,
            low: str | None = None) -> list[Measure]:
    """:func:`sentence_measures` after its numbers' measures (``out``, extended here):
    the years that are quantities, values without digits, clock times, ceilings.
    ``low``: ``text.lower()``, when the caller has it."""
    out += years
    taken = [(m.start, m.end) for m in out] + [(d.start, d.end) for d in dates] + \
        [(c.start, c.end) for c in clocks] if out or dates or clocks else []
    extra = _extras(text, taken, words, low) + clocks
    if extra or years:
        out = sorted(out + extra, key=lambda m: m.start)
    for m in out:
        if m.bound == -1 and _ceiling(text, m.start):
            m.ceiling = True
    return out


def _sentence_clocks(text: str, low: str | None = None) -> list[Measure]:
    """:func:`_clocks` of a sentence that may have one (``_sentence_clocks_plain`` in
    tests/text/test_answer_pass_fast.py is this with ``\\d`` for every text): in ASCII
    text the digit scan is ``[0-9]`` (a range test per character, not a Unicode
    category look-up: ≈ 35 % fewer instructions on a sentence without digits, most).
    ``low``: ``text.lower()``, when the caller has it (read only without a digit)."""
    if not (":" in text or "m" in text or "noon" in text):  # ("midnight" holds an "m")
        return []
    if text.isascii():
        # There the hint is a digit with "am"/"pm" (`_ASCII_CLOCK_HINT`, scanning to the
        # digits only) or "noon" / "midnight" in any case; with a ":", a digit or those.
        if (_ASCII_DIGIT if ":" in text else _ASCII_CLOCK_HINT).search(text) is None:
            if low is None:
                low = text.lower()
            if "noon" not in low and "midnight" not in low:
                return []
        return _clocks(text)
    if _DIGIT.search(text) is None:
        if low is None:
            low = text.lower()
        if "noon" not in low and "midnight" not in low:
            return []
    return _clocks(text) if ":" in text or _CLOCK_HINT.search(text) is not None else []


def _round9(x: float) -> float:
    return float(f"{x:.9g}")


_EXTRA_BASES: dict[str, frozenset[float]] = {
    **{dim: frozenset(_round9(v * f) for f in factors_of(dim) for v in (0.5, 1.0, 1.5))
       for dim in ("time", "length", "mass", "volume")},
    "percent": frozenset(_round9(100 * c * f) for c in _FRACTION_COUNT.values()
                         for f in _FRACTIONS.values()),
}
"""The base values :func:`_extras` can read ("half an hour", "a tenth") by dimension, to
9 significant digits (so a value within rounding of one is left to the full read)."""


class NumberMeasures:
    """The measures of one sentence's numbers and years by base value, each qualifier
    read only when a measure is asked for: ``with_base(d, b)`` is ``[m for m in
    sentence_measures(text, numbers, dates) if m.base_dim == d and m.base == b]`` (or
    None when it cannot tell: a clock time, a base a value without digits such as "half
    an hour" can have, numbers out of text order — read them all)."""

    __slots__ = ("_text", "_nums", "_bare", "_ranged", "_years", "_done", "_ordered",
                 "_clocks", "_dates")

    def __init__(self, text: str, numbers: Sequence[Quantity], dates: Sequence[DateRef]) -> None:
        self._clocks = clocks = _sentence_clocks(text)
        nums = [q for q in numbers if not any(c.start <= q.start < c.end for c in clocks)] \
            if clocks else list(numbers)
        bare = [_bare_measure(text, q) for q in nums]
        self._ranged = [i + 1 < len(bare) and _opens_range(m) and _range_unit(text, m, bare[i + 1])
                        for i, m in enumerate(bare)]
        self._bare = [_inherited(m, bare[i + 1]) if r else m
                      for i, (m, r) in enumerate(zip(bare, self._ranged, strict=True))]
        self._text, self._nums, self._done = text, nums, [False] * len(nums)
        self._ordered = all(a.start < b.start for a, b in zip(nums, nums[1:], strict=False))
        self._dates, self._years = years_as_measures(text, list(dates))

    def every(self, words: Set[str] | None = None) -> list[Measure]:
        """``sentence_measures(text, numbers, dates, words)``, the units already read."""
        return _finish(self._text, [self._qualified(i) for i in range(len(self._bare))],
                       self._dates, self._years, self._clocks, words)

    def with_base(self, base_dim: str, base: float) -> list[Measure] | None:
        if base_dim == "clock" or not self._ordered or (
                base_dim in _EXTRA_BASES and _round9(base) in _EXTRA_BASES[base_dim]):
            return None
        out = [self._qualified(i) for i, m in enumerate(self._bare)
               if m.base == base and m.base_dim == base_dim]
        if self._years:  # then sentence_measures sorts (its numbers are in text order)
            out = sorted(out + [m for m in self._years
                                if m.base == base and m.base_dim == base_dim],
                         key=lambda m: m.start)
        for m in out:
            if m.bound == -1 and _ceiling(self._text, m.start):
                m.ceiling = True
        return out

    def _qualified(self, i: int) -> Measure:
        m = self._bare[i]
        if not self._done[i]:
            q = self._nums[i]
            m.approx, m.bound = _qualifier(self._text, q.start, q.end)
            if self._ranged[i]:  # as _inherited: either side's hedge, the first one's bound
                b = self._nums[i + 1]
                m.approx = m.approx or _qualifier(self._text, b.start, b.end)[0]
            self._done[i] = True
        return m
