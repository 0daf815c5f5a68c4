"""``polarity.clause_polarity``'s fast form (an ASCII sentence with no rejected
alternative and no glued "wordWord": each clause's words read by a scan of its own span)
must give the clauses its plain form gives (one word scan of the whole sentence, a bisect
per clause: ``polarity._clause_polarity_plain``), on every sentence of the repository's
labelled texts, from each offset a leading particle may leave, and on noise built to hit
the edges (a cut that ends inside a word: ", orange", ", whose", ", andrew")."""

from __future__ import annotations

import random

from corpus_texts import real_texts

from gateway.text import polarity as P
from gateway.text.tokens import split_sentences

_PIECES = [" ", "  ", ",", ", ", ";", ":", "(", ")", " - ", " but ", " and ", " and The",
           ", and", ", or", ", orange", ", which", ", whose", ", who", ", andrew", ", so",
           ", sofa", "not", " not ", "n't", "no", "non ", "non-", "unbreakable", "unsolved",
           "rise", " rose ", " up ", "down", "increase", "fell", "more", "fewer", "3", "12%",
           "word", "Name", "it's", "the", "a", "x", "is", "may not ", "never", "refundable",
           "higher", "lower", "Revenue", "profit"]


def _fast_applies(text: str) -> bool:
    return text.isascii() and not P.has_camel_glue(text)


def _check(text: str, start: int = 0) -> bool:
    got = P.clause_polarity(text, [], start)
    assert got == P._clause_polarity_plain(text, [], start), (text[:80], start)
    assert P.clause_polarity(text, None, start) == got
    return _fast_applies(text)


def test_fast_clauses_are_the_plain_ones_on_labelled_sentences() -> None:
    texts = [s.text for t in real_texts() for s in split_sentences(t)]
    fast = 0
    for text in texts:
        fast += _check(text)
        particle = P.leading_particle(text)[1]
        if particle:
            _check(text, particle)
        for start in (1, 3, len(text) // 2):  # any offset, inside a word too
            if start < len(text):
                _check(text, start)
    assert len(texts) > 5000 and fast > 4000  # the fast form is the common one


def test_fast_clauses_are_the_plain_ones_on_noise() -> None:
    rng = random.Random(12)
    dropped = 0
    for _ in range(20000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 14)))
        _check(text)
        _check(text, rng.randint(0, len(text)))
        dropped += ", orange" in text or ", whose" in text or ", andrew" in text
    assert dropped > 1000  # the cut-inside-a-word edge was tried


def test_the_cut_inside_a_word_leaves_its_tail_out() -> None:
    # ", orange" cuts after "or": the clause starts at "ange", which is no word of it.
    got = P.clause_polarity("Prices rose sharply, orange juice did not")
    assert got == P._clause_polarity_plain("Prices rose sharply, orange juice did not", [], 0)
    assert all("ange" not in c.words for c in got)


def test_ascii_words_by_translate_are_the_patterns() -> None:
    """The fast form reads a clause's words as its text translated (``_ASCII_GAPS``) and
    split: ``_ASCII_PART.findall``'s words, on every ASCII labelled sentence, every ASCII
    character between letters, and random ASCII."""
    texts = [s.text for t in real_texts() for s in split_sentences(t) if s.text.isascii()]
    texts += [f"ab{chr(c)}cd{chr(c)}" for c in range(128)]
    rng = random.Random(7)
    texts += ["".join(chr(rng.randrange(128)) for _ in range(rng.randint(0, 40)))
              for _ in range(5000)]
    for text in texts:
        assert text.translate(P._ASCII_GAPS).split() == P._ASCII_PART.findall(text), text[:80]
    assert len(texts) > 10000
