"""The context side answered lazily equals the eager computation it replaces, on the
repository's labelled documents: proper names asked word by word
(``names.ProperWords``), the words of a stem found in the sorted vocabulary
(``stem.words_with_stem``), and the measures with a given base value read only in the
sentences that state it (``ContextFacts.same_base`` before ``by_dim``)."""

from __future__ import annotations

import gc
import re
import weakref
from itertools import islice

import pytest
from corpus_texts import real_texts

from gateway.text import names
from gateway.text.context_facts import ContextFacts, context_facts
from gateway.text.index import TextIndex, build_index
from gateway.text.names import ProperWords, proper_words
from gateway.text.stem import stem, words_with_stem
from gateway.text.tokens import STOPWORDS, tokenize

TEXTS = list(real_texts())
_WORDS = re.compile(r"[\w’'-]+")


def _asked(text: str) -> set[str]:
    """Words worth asking about ``text``: its words lower-cased (capitalized or not),
    their pieces around apostrophes, hyphen spellings, and a few never in it."""
    words = {w.lower() for w in _WORDS.findall(text)}
    words |= {p for w in list(words) for p in re.split(r"[’']", w) if p}
    words |= {w.replace("-", "") for w in words if "-" in w}
    return words | {"", "zzzq", "the", "-", "a-b", "jean-pierre", "éclair", "1999"}


def test_corpus_is_large() -> None:
    assert len(TEXTS) > 1000


@pytest.mark.parametrize("limit", [2, 10**9])  # bool(): the scan after 2 look-ups, or none
def test_proper_words_asked_word_by_word_equal_the_set(
        limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(names, "_MAX_LOOKUPS", limit)
    seen_true = seen_false = 0
    for text in TEXTS:
        full = proper_words(text)
        lazy = ProperWords([text])
        assert bool(lazy) == bool(full), text[:80]
        for w in sorted(_asked(text)):
            got = w in lazy
            assert got == (w in full), (w, text[:80])
            seen_true += got
            seen_false += not got
    assert seen_true > 1000 and seen_false > 1000


def test_proper_words_of_several_documents_are_their_union() -> None:
    for a, b in zip(TEXTS[::7], TEXTS[3::7], strict=False):
        union = proper_words(a) | proper_words(b)
        lazy = ProperWords([a, b])
        assert bool(lazy) == bool(union)
        for w in sorted(_asked(a) | _asked(b)):
            assert (w in lazy) == (w in union), (w, a[:40], b[:40])
    assert not ProperWords([]) and not ProperWords(["the cat sat. it ran."])


def test_proper_words_of_long_or_odd_texts_take_the_scan(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(names, "_MAX_FAST_CHARS", 50)
    text = "Yes, Lyon is far. We saw lyon and Paris, then Abc÷def."
    for texts in ([text], [text[:40]], ["Abc÷def and Def went. Helix"]):
        union = frozenset().union(*(proper_words(t) for t in texts))
        lazy = ProperWords(texts)
        assert bool(lazy) == bool(union)
        for w in sorted(set().union(*(_asked(t) for t in texts))):
            assert (w in lazy) == (w in union), w


def test_answers_do_not_grow_a_cached_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(names, "_MAX_KNOWN", 3)
    lazy = ProperWords(["In Paris, Helix sold lamps. Paris is big."])
    assert "paris" in lazy and "helix" in lazy and "lamps" not in lazy
    assert "velmoxin" not in lazy and "zzzq" not in lazy and "paris" in lazy
    assert lazy._known == {"paris": True, "helix": True, "lamps": False}


def test_words_of_a_stem_equal_stemming_every_word() -> None:
    vocab = sorted({t for text in TEXTS for t in tokenize(text)} - STOPWORDS)
    assert len(vocab) > 5000
    by: dict[str, list[str]] = {}
    for w in vocab:  # the definition: every word stemmed
        by.setdefault(stem(w), []).append(w)
    keys = set(by) | {"go", "person", "day", "year", "child", "die", "zzzq", "a", ""}
    for key in sorted(keys):
        assert words_with_stem(key, vocab) == by.get(key, []), key
    small = vocab[::50]  # a context's vocabulary: most stems have no word there
    for key in sorted(keys):
        assert words_with_stem(key, small) == [w for w in small if stem(w) == key], key


def test_same_base_before_by_dim_is_a_subset_of_it() -> None:
    """Read lazily, ``same_base`` gives only measures ``by_dim`` has with that base (the
    caller looks at the whole dimension after it): every match it finds is a true one;
    once ``by_dim`` is read, it gives all of them, as before."""
    checked = found = 0
    for text in islice((t for t in TEXTS if any(c.isdigit() for c in t)), 400):
        index = build_index([("c", text)])
        eager = ContextFacts(index)
        stated = {(m.base_dim, m.base) for ms in eager.by_dim().values() for _, m in ms}
        queries = sorted(stated | {("count", 1.0), ("length", 1000.0), ("time", 3600.0)})
        lazy = ContextFacts(build_index([("c", text)]))
        for dim, base in queries:
            want = [m for _, m in eager.by_dim().get(dim, ()) if m.base == base]
            assert eager.same_base(dim, base) == want
            got = lazy.same_base(dim, base)
            assert all(m in want for m in got), (dim, base, text[:60])
            if (dim, base) in stated:  # found where stated, bar rates and word values
                checked += 1
                found += bool(got)
        assert lazy._by_dim is None  # no query read the whole context
        lazy.by_dim()
        for dim, base in queries:
            assert lazy.same_base(dim, base) == eager.same_base(dim, base)
    assert checked > 500 and found > 0.9 * checked


def test_an_index_and_its_context_facts_are_freed_without_the_cyclic_gc() -> None:
    """``context_facts`` memoizes its findings on the index, not itself (it refers to the
    index): the last reference dropped frees both at once (a reference cycle left every
    context indexed for one request, or evicted from the cache, to the cyclic GC); while
    held it is one object, and a later one shares what the first found."""
    def indexes() -> int:
        return sum(isinstance(o, TextIndex) for o in gc.get_objects())

    gc.collect()
    gc.disable()
    try:
        before = indexes()
        index = build_index([("c", "The bridge is 330 m long. Gustave Eiffel opened it "
                                   "in 1889, not 1890.")])
        cf = context_facts(index)
        assert cf.same_base("length", 330.0) and cf.names(1) and cf.slots(1)
        assert cf.clauses(1) and context_facts(index) is cf
        ref = weakref.ref(cf)
        del cf
        assert ref() is None and indexes() == before + 1
        again = context_facts(index)
        assert 1 in again._slots and again.slots(1)  # the first one's findings
        del index, again
        assert indexes() == before
    finally:
        gc.enable()
