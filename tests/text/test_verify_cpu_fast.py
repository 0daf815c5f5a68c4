"""Session 6's cheaper verification steps must give what their definitions give: each
shortcut against a reference written the plain way (``_reference_*`` here), on the
repository's labelled texts and on noise.

- ``polarity.leading_particle``: a prefix test before the three anchored patterns;
- ``tokens.entity_candidates``: a one-word match takes a short path, and no connector
  test on a capitalized last word;
- ``tokens.punct_to_space``: ASCII text through ``bytes.translate``;
- ``TextIndex.resolve`` / ``resolve_all``: a word none of whose forms is known is found
  missing by one ``isdisjoint``;
- ``IndexCache``: an ordered-dict LRU bounded by indexed characters.
"""

from __future__ import annotations

import random
import re

from corpus_texts import real_texts

from gateway.text import polarity as P
from gateway.text import tokens as T
from gateway.text.index import IndexCache, build_index
from gateway.text.tokens import Span, split_sentences, tokenize, variants

_PARTICLES = ["Yes", "yeah", "Yep", "yup", "Correct", "That's right", "that is true",
              "Right", "Indeed", "Sure", "Absolutely", "Exactly", "True", "Of course",
              "Certainly", "Definitely", "No", "NOPE", "Nah", "Not really", "not quite",
              "Incorrect", "That's not right", "That is wrong", "Unfortunately not",
              "Sadly, no", "Actually no", "afraid not", "I'm afraid not", "Not so",
              "It didn't", "He doesn't", "They weren't", "This is not", "You can't",
              "We did not", "There wasn't", "afraidnot", "Yesterday", "Nobody", "The",
              "In", "Noah", "Surely", "Its", "Theyre"]
_AFTER = ["", ",", ":", " -", " —", ";", ".", "!", " it", " the tower", "n't:", " not",
          " 330 m", "'s", "’s", " (", "\t"]
_BEFORE = ["", " ", "  ", "\"", "'", "(", "“", "‘", "\n", "\x1c", "\u00a0", "É"]


def _reference_particle(text: str) -> tuple[str | None, int]:
    for stance, pat in (("no", P._NO), ("no", P._CORRECTION), ("yes", P._YES)):
        m = pat.match(text)
        if m is not None:
            return stance, m.end()
    return None, 0


def _sentences() -> list[str]:
    return [s.text for t in real_texts() for s in split_sentences(t)]


def test_leading_particle_is_the_patterns() -> None:
    rng = random.Random(6)
    made = ["".join((rng.choice(_BEFORE), rng.choice(_PARTICLES), rng.choice(_AFTER),
                     rng.choice(_PARTICLES).lower(), rng.choice(_AFTER)))
            for _ in range(30000)]
    found = 0
    for text in _sentences() + made:
        got = P.leading_particle(text)
        assert got == _reference_particle(text), text[:80]
        found += got[0] is not None
    assert found > 1000  # the table opens many sentences with a particle


_NONSPACE = re.compile(r"\S+")


def _reference_entities(sentence: str) -> list[Span]:
    """``entity_candidates`` as written before session 6 (every match as a word list)."""
    out: list[Span] = []
    lead = len(sentence) - len(sentence.lstrip(T._LEADING_PUNCT))
    for m in T._ENTITY.finditer(sentence):
        g, base = m.group(0), m.start()
        if " " in g or "\t" in g:
            words = [(w.start() + base, w.end() + base) for w in _NONSPACE.finditer(g)]
        else:
            words = [(base, m.end())]
        at_start = opening = base <= lead
        while words:
            first = sentence[words[0][0]:words[0][1]].lower()
            if first in T.STOPWORDS or (at_start and first in T.OPENERS):
                words.pop(0)
                at_start = False
                continue
            break
        if opening and len(words) == 1 and words[0][0] == m.start():
            word = sentence[words[0][0]:words[0][1]]
            if not (word.isupper() and len(word) > 1) and not any(map(str.isdigit, word)):
                continue
        while words and T._CONNECT_RE.fullmatch(sentence[words[-1][0]:words[-1][1]]):
            words.pop()
        if not words or not sentence[words[0][0]].isupper():
            continue
        start, end = words[0][0], words[-1][1]
        while end > start and sentence[end - 1] in ".,":
            end -= 1
        text = sentence[start:end]
        if len(text) < 2 and not text.isupper():
            continue
        out.append(Span(text, start, end))
    return out


def test_entity_candidates_are_the_reference() -> None:
    rng = random.Random(8)
    words = ["The", "Of", "of", "of the", "I", "A", "A.", "X-Men", "2", "NFL", "U.S.", "Mr.",
             "de", "Gladly", "Yes", "Paris", "J.", "K.", "Rowling", ",", ".", "the", "\"",
             "(", "5", "It's", "O'Neil", "Über", "ÉCOLE", "van", "Despite", "F-35", "I.",
             "Al", "al", "Bin", "YES", "THE", "GLADLY", "NASA", "OF"]
    made = [rng.choice(["", " ", "\"", "("]) + rng.choice([" ", " ", " ", "\t", " \t "]).join(
        rng.choice(words) for _ in range(rng.randint(1, 7))) for _ in range(30000)]
    texts = _sentences() + made
    assert len(texts) > 30000
    for text in texts:
        assert T.entity_candidates(text) == _reference_entities(text), text[:80]


def test_punct_to_space_is_the_table() -> None:
    rng = random.Random(9)
    noise = ["".join(chr(rng.randrange(128)) for _ in range(rng.randint(0, 40)))
             for _ in range(5000)]
    for text in list(real_texts()) + noise + ["".join(map(chr, range(128)))]:
        assert T.punct_to_space(text) == text.translate(T.TO_SPACE)


def test_resolve_is_the_first_known_variant() -> None:
    texts = list(real_texts())
    index = build_index([("d", " ".join(texts[:40]))])
    words = {w for t in texts[40:3000] for w in tokenize(t)}
    assert len(words) > 1000
    missing = 0
    for word in words:
        expected = next((f for f in variants(word) if f in index.vocab), None)
        assert index.resolve(word) == expected, word
        missing += expected is None
    assert missing > 100 and len(words) - missing > 100
    assert index.resolve_all(words) == {w: index.resolve(w) for w in words}


def test_index_cache_evicts_the_least_recently_used() -> None:
    a, b, c = ("a", "Alpha is first. " * 10), ("b", "Beta is second. " * 10), \
        ("c", "Gamma is third. " * 10)
    size = len(build_index([a]).sentences) * len("Alpha is first.")
    cache = IndexCache(max_chars=2 * size + 5)  # room for two of the three
    ia = cache.get((a,))
    cache.get((b,))
    assert cache.get((a,)) is ia  # a hit, and now the most recent
    cache.get((c,))  # evicts b, the least recently used
    assert cache.get((a,)) is ia
    assert (cache.hits, cache.misses) == (2, 3)
    cache.get((b,))
    assert cache.misses == 4  # b was gone
    big = IndexCache(max_chars=10)  # too large to keep: built every time
    assert big.get((a,)) is not big.get((a,))
    assert big.misses == 2
    # A list of pairs finds what the tuple key stored.
    assert cache.get([b]) is cache.get((b,))
