"""gateway.text.tokens._SENT_END opens with one character class (for the regex
engine's fast scan); its matches must be those of the pattern as first written
(``_REFERENCE``), on real documents and noise."""

from __future__ import annotations

import random
import re
from pathlib import Path

import orjson

from gateway.text import tokens as T

ROOT = Path(__file__).resolve().parents[2]
_REFERENCE = re.compile(r"[.!?](?:[\"')\]’”]*\s+|(?<=[a-z]{2}[.!?])(?=[A-Z][a-z]))|\n\s*")


def _same(text: str) -> None:
    assert [m.span() for m in T._SENT_END.finditer(text)] == \
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
    rng = random.Random(11)
    pieces = [".", "!", "?", "\n", " ", "\t", "\u00a0", "\"", "'", ")", "]", "’", "”", "ab",
              "Ab", "A", "b", "Game", "Andre", "U.S.", "\r\n", "1", "é", "É"]
    for _ in range(20000):
        _same("".join(rng.choice(pieces) for _ in range(rng.randint(0, 14))))
