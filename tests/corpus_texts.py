"""The strings of the repository's labelled cases, for tests that check a faster
rewrite of a text routine against its definition on real documents.

Import from here (``from corpus_texts import real_texts``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import orjson

from gateway.text import measures as _measures
from gateway.text.measures import Measure

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("tests/data/rag-dev.jsonl", "tests/data/rag-extra.jsonl",
           "data/halueval/halueval-dev.jsonl")


def real_texts() -> Iterator[str]:
    """Every string field of every case in ``SOURCES`` (well over 1,000 strings)."""
    for name in SOURCES:
        for line in (ROOT / name).read_bytes().splitlines():
            if line.strip():
                yield from (v for v in orjson.loads(line).values() if isinstance(v, str))


def assert_same_matches(fast: re.Pattern[str], reference: re.Pattern[str], text: str) -> None:
    """``fast`` finds exactly the spans ``reference`` finds in ``text``."""
    assert [m.span() for m in fast.finditer(text)] == \
        [m.span() for m in reference.finditer(text)], text[:80]


def sentence_clocks_plain(text: str) -> list[Measure]:
    """``measures._sentence_clocks`` in its plain form: the one condition, with ``\\d``
    for every text (the fast form's ASCII scans are checked against it)."""
    low = text.lower()
    maybe = ":" in text or "m" in text or "noon" in text or "midnight" in text
    near = _measures._DIGIT.search(text) is not None or "noon" in low or "midnight" in low
    hint = ":" in text or _measures._CLOCK_HINT.search(text) is not None
    return _measures._clocks(text) if maybe and near and hint else []
