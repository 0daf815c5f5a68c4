"""Numbers and dates of indexed documents, found when first asked for.

Split out of :mod:`gateway.text.index` (which re-exports :class:`RangeFacts`):
:func:`scan_facts` runs the number and date patterns of :mod:`gateway.text.quantities`
over whole documents, exactly as an up-front scan would, and assigns each value
to the sentence it starts in; the index calls it only when a layer first asks
for a number or a date.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from gateway.text._quantity_scan import _classes, _runs
from gateway.text.quantities import _WORD_HINT, DateRef, Quantity, _dates, _numbers

__all__ = ["NO_FACTS", "DocText", "Facts", "RangeFacts", "scan_facts"]


@dataclass(slots=True)
class DocText:
    """What the lazy per-document work needs: the text and where its sentences are."""

    text: str
    base: int
    """Id of its first sentence."""
    starts: list[int]
    """Offset of each of its sentences in ``text``."""


@dataclass(slots=True)
class Facts:
    """Numbers and dates of every document, found on first use (see ``TextIndex.facts``)."""

    numbers: list[float]
    """Every stated value, ascending (for :meth:`TextIndex.has_number`)."""
    dates: list[DateRef]
    dates_by_decade: dict[int, list[DateRef]]
    """Dates with a year, keyed by ``year // 10``; undated ones (``"May 5"``) under -1."""
    by_sentence: dict[int, tuple[list[Quantity], list[DateRef]]]
    """Sentence id -> its numbers and dates (only sentences that state any)."""


@dataclass(frozen=True, slots=True)
class RangeFacts:
    """Numbers and dates of a range of sentences (e.g. one document)."""

    values: list[float]
    value_set: set[float]
    dates: list[DateRef]
    parts: set[float]
    """Every value, year and day: a claim whose digit runs are all here needs no parse."""


NO_FACTS: tuple[list[Quantity], list[DateRef]] = ([], [])


def scan_facts(docs: list[DocText]) -> Facts:
    """Numbers and dates of whole documents (so patterns see the same text as always),
    each assigned to the sentence it starts in."""
    numbers: list[float] = []
    dates: list[DateRef] = []
    by_sentence: dict[int, tuple[list[Quantity], list[DateRef]]] = {}

    for doc in docs:
        text = doc.text
        cls, rare = _classes(text)  # shared by both scans (see gateway.text.quantities)
        if b"#" in cls or any(ch.isdigit() for ch in rare) or _maybe_spelled(text):
            runs = _runs(cls)
            doc_dates = _dates(text, cls, rare, runs)
            doc_numbers = _numbers(text, doc_dates, cls, rare, runs)
            _assign(doc, doc_dates, 1, by_sentence)
            _assign(doc, doc_numbers, 0, by_sentence)
            dates += doc_dates
            numbers += [q.value for q in doc_numbers]
    by_decade: dict[int, list[DateRef]] = {}
    for d in dates:
        by_decade.setdefault(d.year // 10 if d.year is not None else -1, []).append(d)
    return Facts(sorted(numbers), dates, by_decade, by_sentence)


def _assign(doc: DocText, values: list[Quantity] | list[DateRef], which: int,
            by_sentence: dict[int, tuple[list[Quantity], list[DateRef]]]) -> None:
    """Append each value (in text order) to its sentence's list ``which`` (0: numbers,
    1: dates): the sentence id is ``base + bisect_right(starts, start) - 1``, found by
    walking the sorted sentence starts alongside the values."""
    starts, n, k, base = doc.starts, len(doc.starts), 0, doc.base
    last_sid = None
    got: list[Any] = []
    for v in values:
        start = v.start
        while k < n and starts[k] <= start:
            k += 1
        sid = base + k - 1
        if sid != last_sid:
            slot = by_sentence.get(sid)
            if slot is None:
                slot = by_sentence[sid] = ([], [])
            got, last_sid = cast(list[Any], slot[which]), sid
        got.append(v)


def _maybe_spelled(text: str) -> bool:
    """Whether ``text`` may hold a spelled-out number: every number word the scan keeps
    contains one of the quantities module's hints ("thirt", "fort", "eleven", …)."""
    return _WORD_HINT.search(text.lower()) is not None
