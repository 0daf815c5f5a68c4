"""gateway.text.tokens._ENTITY tests the word boundary after the first capital (for the
regex engine's fast scan); its matches must be those of the pattern as first written
(``_REFERENCE``: the boundary first), on real documents and noise."""

from __future__ import annotations

import random
import re
from pathlib import Path

import orjson

from gateway.text import tokens as T

ROOT = Path(__file__).resolve().parents[2]
_REFERENCE = re.compile(
    rf"\b{T._CAP_WORD}(?:[ \t]+(?:{T._CONNECT}[ \t]+)*{T._CAP_WORD})*(?:[ \t]+[0-9]+\b)?")


def _same(text: str) -> None:
    assert [m.span() for m in T._ENTITY.finditer(text)] == \
        [m.span() for m in _REFERENCE.finditer(text)], text[:80]


def test_real_documents() -> None:
    n = 0
    for name in ("tests/data/rag-dev.jsonl", "tests/data/rag-extra.jsonl",
                 "data/halueval/halueval-dev.jsonl"):
        for line in (ROOT / name).read_bytes().splitlines():
            if line.strip():
                for v in orjson.loads(line).values():
                    if isinstance(v, str):
                        _same(v)
                        n += 1
    assert n > 1000


def test_noise() -> None:
    rng = random.Random(7)
    pieces = ["A", "B.", "Ab", "ab", "X-Men", " ", "\t", "\n", "of", "of the", "van", "1", "23",
              "_", "é", "É", "’", "'", ".", ",", "-", "&", "J.K.", "NFL", "F-35", "İ", "ß", "a"]
    for _ in range(20000):
        _same("".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))))
