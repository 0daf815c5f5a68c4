"""gateway.text.tokens._SENT_END opens with one character class (for the regex
engine's fast scan); its matches must be those of the pattern as first written
(``_REFERENCE``), on real documents and noise."""

from __future__ import annotations

import random
import re

from corpus_texts import assert_same_matches, real_texts

from gateway.text import tokens as T

_REFERENCE = re.compile(r"[.!?](?:[\"')\]’”]*\s+|(?<=[a-z]{2}[.!?])(?=[A-Z][a-z]))|\n\s*")


def _same(text: str) -> None:
    assert_same_matches(T._SENT_END, _REFERENCE, text)


def test_real_documents() -> None:
    texts = list(real_texts())
    assert len(texts) > 1000
    for text in texts:
        _same(text)


def test_noise() -> None:
    rng = random.Random(11)
    pieces = [".", "!", "?", "\n", " ", "\t", "\u00a0", "\"", "'", ")", "]", "’", "”", "ab",
              "Ab", "A", "b", "Game", "Andre", "U.S.", "\r\n", "1", "é", "É"]
    for _ in range(20000):
        _same("".join(rng.choice(pieces) for _ in range(rng.randint(0, 14))))
