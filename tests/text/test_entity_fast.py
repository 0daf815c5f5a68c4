"""gateway.text.tokens._ENTITY tests the word boundary after the first capital (for the
regex engine's fast scan); its matches must be those of the pattern as first written
(``_REFERENCE``: the boundary first), on real documents and noise."""

from __future__ import annotations

import random
import re

from corpus_texts import assert_same_matches, real_texts

from gateway.text import tokens as T

_REFERENCE = re.compile(
    rf"\b{T._CAP_WORD}(?:[ \t]+(?:{T._CONNECT}[ \t]+)*{T._CAP_WORD})*(?:[ \t]+[0-9]+\b)?")


def _same(text: str) -> None:
    assert_same_matches(T._ENTITY, _REFERENCE, text)


def test_real_documents() -> None:
    texts = list(real_texts())
    assert len(texts) > 1000
    for text in texts:
        _same(text)


def test_noise() -> None:
    rng = random.Random(7)
    pieces = ["A", "B.", "Ab", "ab", "X-Men", " ", "\t", "\n", "of", "of the", "van", "1", "23",
              "_", "é", "É", "’", "'", ".", ",", "-", "&", "J.K.", "NFL", "F-35", "İ", "ß", "a"]
    for _ in range(20000):
        _same("".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))))
