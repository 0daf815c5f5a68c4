"""``antonyms.directions`` runs its two ``\\b`` alternations only behind substring
tests (a word every match holds; "up"/"down" and a digit) and reads its words by one
set intersection: it must give what the plain form (``_reference`` here: both patterns
always, a word loop) gives, on every sentence and clause of the repository's labelled
texts and on noise built from the patterns' own phrases."""

from __future__ import annotations

import random

from corpus_texts import real_texts

from gateway.text import antonyms as A
from gateway.text.frames import clauses
from gateway.text.tokens import split_sentences

_PIECES = ["more or less", "more  or\tless", "all the same", "at least", "at most",
           "first and only", "not only", "over the years", "over the year", "over the weekend",
           "over the past", "over the course", "over the phone", "all of them", "each other",
           "no more than", "not more than", "more", "less", "only", "up", "down", "up 8 %",
           "down $3", "up to", "rose", "fell", "above", "below", "after", "before", "allowed",
           "banned", "5", "12.5", " ", "  ", ",", "the", "Up", "DOWN", "ONLY", "x", "é",
           "backup", "countdown", "thanks", "years", "mother", "samex"]


def _reference(text: str) -> frozenset[tuple[str, int]]:
    low = A._NOT_DIRECTION.sub(" ", text.lower())
    numeric = A._DIGIT.search(low) is not None
    out = {A._INDEX[w] for w in A._WORD.findall(low) if w in A._INDEX
           and (numeric or A._INDEX[w][0] not in A._NEEDS_NUMBER)}
    for m in A._UPDOWN.finditer(low):
        out.add(("change", 0 if m.group(1) == "up" else 1))
    return frozenset(out)


def test_directions_is_the_plain_form_on_labelled_sentences_and_clauses() -> None:
    texts = [s.text for t in real_texts() for s in split_sentences(t)]
    taken = 0
    for text in texts:
        got = A.directions(text)
        assert got == _reference(text), text[:80]
        taken += bool(got)
        for a, b in clauses(text):
            assert A.directions(text[a:b]) == _reference(text[a:b]), text[a:b][:80]
    assert len(texts) > 5000 and taken > 500


def test_directions_is_the_plain_form_on_noise() -> None:
    rng = random.Random(7)
    left_out = updown = 0
    for _ in range(30000):
        text = " ".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 8)))
        assert A.directions(text) == _reference(text), text
        left_out += A._NOT_DIRECTION.search(text.lower()) is not None
        updown += A._UPDOWN.search(text.lower()) is not None
    assert left_out > 5000 and updown > 2000  # both patterns' matches were tried


def test_every_phrase_left_out_holds_a_hint() -> None:
    # Each branch of _NOT_DIRECTION, written out: a hint must be in it, or the gate
    # would skip a phrase the pattern removes.
    for phrase in _PIECES[:17]:
        assert A._NOT_DIRECTION.search(phrase) is not None, phrase
        assert any(h in phrase for h in A._NOT_DIRECTION_HINTS), phrase
