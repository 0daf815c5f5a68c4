"""gateway.text.names.proper_words: the capitalized words looked up one by one
(``_proper_fast``) give what one scan of every word gives (``_proper_scan``, the
definition), on real documents and on noise made of the characters that matter."""

from __future__ import annotations

import random
import re

import pytest
from corpus_texts import real_texts

from gateway.text import names


def test_only_the_division_sign_is_a_letter_of_the_class_but_no_word_character() -> None:
    # _proper_fast's premise (see its docstring); "÷" goes to _proper_scan.
    odd = [c for c in map(chr, [*range(ord("a"), ord("z") + 1), *range(0xE0, 0x100)])
           if re.fullmatch(r"\w", c) is None]
    assert odd == ["÷"]


@pytest.mark.parametrize("limit", [0, 10, 10**9])  # the scan, either, the look-ups
def test_real_documents(limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(names, "_MAX_LOOKUPS", limit)
    monkeypatch.setattr(names, "_MAX_FAST_CHARS", 10**9)
    texts = list(real_texts())
    assert len(texts) > 1000
    for text in texts:
        assert names._proper_fast(text) == names._proper_scan(text), text[:80]
        assert names.proper_words(text) == names._proper_scan(text), text[:80]


def test_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(names, "_MAX_LOOKUPS", 10**9)
    rng = random.Random(5)
    pieces = ["Lyon", "lyon", "Paris", "parisian", "The", "the", "Jean-Pierre", "jean", "-",
              "’", "'", " ", "\n", ".", "1", "_", "Éclair", "éclair", "éCLAIR", "ß", "Ab",
              "ab", "abc", "Abc", "ABC", "xAbc", "Abc1", "Abcé", "abcé", "ÿes", "Yes", "İstanbul",
              "istanbul", "Straße", "straße", "Νίκη", "Helix-", "-helix", "Helix", "helix"]
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        assert names._proper_fast(text) == names._proper_scan(text), text


def test_the_division_sign_takes_the_scan() -> None:
    text = "Abc÷def and abc÷ then Def"
    assert names.proper_words(text) == names._proper_scan(text)
