"""Numbers and dates of indexed documents, found when first asked for.

Split out of :mod:`gateway.textindex` (which re-exports :class:`RangeFacts`):
:func:`scan_facts` runs the number and date patterns of :mod:`gateway.quantities`
over whole documents, exactly as an up-front scan would, and assigns each value
to the sentence it starts in; the index calls it only when a layer first asks
for a number or a date.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from gateway.quantities import DateRef, Quantity, extract_dates, extract_numbers

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

    def slot(doc: DocText, start: int) -> tuple[list[Quantity], list[DateRef]]:
        sid = doc.base + bisect_right(doc.starts, start) - 1
        got = by_sentence.get(sid)
        if got is None:
            got = by_sentence[sid] = ([], [])
        return got

    for doc in docs:
        text = doc.text
        if any(ch.isdigit() for ch in text) or _maybe_spelled(text):
            doc_dates = extract_dates(text)
            for d in doc_dates:
                slot(doc, d.start)[1].append(d)
            dates += doc_dates
            for q in extract_numbers(text, doc_dates):
                slot(doc, q.start)[0].append(q)
                numbers.append(q.value)
    by_decade: dict[int, list[DateRef]] = {}
    for d in dates:
        by_decade.setdefault(d.year // 10 if d.year is not None else -1, []).append(d)
    return Facts(sorted(numbers), dates, by_decade, by_sentence)


def _maybe_spelled(text: str) -> bool:
    low = text.lower()
    return any(w in low for w in ("two", "three", "four", "five", "six", "seven", "eight",
                                   "nine", "ten", "twelve", "twenty", "dozen", "hundred",
                                   "thousand", "million", "billion"))
