"""Session 5's cheaper answer-side scans must give what the plain forms give: each
shortcut against its definition (``_reference_*`` here), on real documents and noise.

- ``measures``: the clock pattern is tried only where ``_CLOCK_HINT`` (or a ":") finds
  what it needs; the article-unit pattern opens with a letter look-ahead; the fraction
  hint is eight substring tests;
- ``polarity``: a clause's words bisected out by offset; prefix negation tried only on
  words that can carry one; no opposition test when a side takes no direction;
- ``antonyms.direction_sides`` by one set intersection; ``phatic.is_phatic`` on a set;
- ``_grounding_names._copy_anchor`` skips the compare when no position matches;
- ``TextIndex.holds_all`` (a name check's "named anywhere") is ``bool(name_sids(key))``;
- ``TextIndex.best_matches`` the same whether the words' IDF infos are new or known.
"""

from __future__ import annotations

import random
import re
from operator import eq

from corpus_texts import assert_same_matches, real_texts

from gateway.layers._grounding_names import _copy_anchor
from gateway.text import antonyms as A
from gateway.text import measures as M
from gateway.text import polarity as P
from gateway.text.anchors import anchor_sides, anchored, sides
from gateway.text.context_facts import context_facts
from gateway.text.index import build_index
from gateway.text.names import acronym_of, acronym_shaped, name_key
from gateway.text.phatic import is_phatic
from gateway.text.quantities import extract_quantities
from gateway.text.tokens import entity_candidates, split_sentences, tokenize

_NOISE = ["5", "12", ":", "30", " ", "pm", "P.M.", "a.m.", "am", "noon", "Midnight", ".",
          "half", "an", "a", "hour", "for", "every", "once", "week", "and a half", "third",
          "two", "thirds", "not", "un", "unbraked", "non", "refundable", "rose", "fell",
          "up", "8 %", ",", "İ", "ı", "’", "-", "\n", "Then", "but", "while"]


def _noise(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_NOISE) for _ in range(rng.randint(0, 14))) for _ in range(n)]


def _sentences() -> list[str]:
    return [s.text for t in real_texts() for s in split_sentences(t)]


def test_clock_hint_holds_wherever_a_clock_is() -> None:
    texts = _sentences() + _noise(1, 20000) + [
        "at 5 pm", "5.30 p.m. today", "12:30", "at NOON", "midnight.", "7AM", "10 a.m",
        "from 9:15 to 17:45", "0.30 pm"]
    hits = 0
    for text in texts:
        if M._CLOCK.search(text) is not None:
            hits += 1
            assert ":" in text or M._CLOCK_HINT.search(text) is not None, text
    assert hits > 20
    assert [m.text for m in M.sentence_measures("Doors open at 7 pm and at noon.", [])] == \
        ["7 pm", "noon"]


_REFERENCE_ARTICLE_UNIT = re.compile(M._ARTICLE_UNIT.pattern.replace("(?=[aefhlnortw])", "", 1),
                                     re.IGNORECASE)


def test_article_unit_lookahead_keeps_every_match() -> None:
    assert _REFERENCE_ARTICLE_UNIT.pattern != M._ARTICLE_UNIT.pattern
    for text in _sentences() + _noise(2, 20000):
        assert_same_matches(M._ARTICLE_UNIT, _REFERENCE_ARTICLE_UNIT, text)
    # Each word that can open a match (the look-ahead names their first letters).
    for lead in ("for", "within", "over", "after", "than", "about", "around", "nearly",
                 "almost", "roughly", "lasts", "lasted", "takes", "took", "another", "least",
                 "once", "every"):
        got = M._extras(f"It ran {lead} a week.", [])
        assert [(m.value, m.dim) for m in got] == [(1.0, "time")], lead
    assert [m.value for m in M._extras("Half an hour, then a day and a half.", [])] == \
        [0.5, 1.5]


_REFERENCE_FRACTION_HINT = re.compile("half|third|quarter|fifth|tenth|sixth|eighth|hundredth")


def test_fraction_hint_is_the_substring_test() -> None:
    for text in _sentences() + _noise(3, 5000) + ["two thirds", "a tenth", "eighths"]:
        low = text.lower()
        assert M._fraction_hint(low) == (_REFERENCE_FRACTION_HINT.search(low) is not None)


def _reference_clauses(text: str, skip: list[tuple[int, int]], start: int) -> list[P.Clause]:
    """``clause_polarity`` with each clause's words walked out one by one (as first
    written), against the bisected ones."""
    old_bisect = P.bisect_left

    def walk(offsets: list[int], x: int, lo: int = 0) -> int:
        while lo < len(offsets) and offsets[lo] < x:
            lo += 1
        return lo

    P.bisect_left = walk  # type: ignore[assignment]
    try:
        return P.clause_polarity(text, skip, start)
    finally:
        P.bisect_left = old_bisect


def test_clause_words_bisected() -> None:
    for text in _sentences()[:20000] + _noise(4, 5000) + [
            "Not unbraked, but non refundable: revenue rose 8 %, not 7 %."]:
        skip = P.contrast_spans(text)
        start = P.leading_particle(text)[1]
        assert P.clause_polarity(text, skip, start) == _reference_clauses(text, skip, start)


def _reference_prefixed(words: set[str]) -> set[str]:
    return {b for w in words if w[0] in "uind" and (b := P._prefix_base(w)) is not None}


def test_prefix_and_direction_pretests() -> None:
    texts = _sentences()[:20000] + _noise(5, 5000)
    for text in texts:
        tokens = tokenize(text)
        words = set(tokens)
        if not words:
            continue
        cues = P.flip_cues(words, lambda: tokens)  # noqa: B023
        assert set(cues.prefixed) - {P.stem(tokens[i + 1]) for i in range(len(tokens) - 1)
                                     if tokens[i] == "non"} <= _reference_prefixed(words)
        assert _reference_prefixed(words) <= set(cues.prefixed)
        assert A.direction_sides(words) == frozenset(
            {A._INDEX[w] for w in words if w in A._INDEX}
            | {("change", s) for w, s in (("up", 0), ("down", 1)) if w in words})
        assert is_phatic(words) == is_phatic(sorted(words))
    none = P.FlipCues(False, frozenset(), frozenset())
    rises = P.FlipCues(False, frozenset(), A.direction_sides({"rose"}))
    falls = P.FlipCues(False, frozenset(), A.direction_sides({"fell"}))
    never = lambda stems: False  # noqa: E731
    assert not P.may_flip(none, rises, never, never)
    assert not P.may_flip(rises, none, never, never)
    assert P.may_flip(rises, falls, never, never)


def test_holds_all_is_name_sids() -> None:
    # Every labelled string's names, and the next string's (mostly the same case's:
    # found, missing, found as a variant), asked before and after prefetch_all.
    texts = [t for t in real_texts() if t.strip()]
    asked = 0
    for text, other in zip(texts, texts[1:] + texts[:1], strict=True):
        index = build_index([("d", text)])
        if not index:
            continue
        cf = context_facts(index)
        keys = {name_key(e.text) for s in split_sentences(text + "\n" + other)
                for e in entity_candidates(s.text)}
        keys |= {frozenset({"nowhere", "zzz"}), frozenset(), frozenset({"the"})}
        keys |= {frozenset(tokenize(s.text)[:n]) for s in split_sentences(other)
                 for n in (1, 2, 3, 4)}
        for key in sorted(keys, key=sorted):
            assert index.holds_all(key) == bool(cf.name_sids(key)), key
            asked += 1
        index.prefetch_all()
        for key in keys:
            assert index.holds_all(key) == bool(cf.name_sids(key)), key
    assert asked > 10000


def test_best_matches_new_and_known_words_alike() -> None:
    texts = [t for t in real_texts() if len(t) > 2000][:20]
    assert texts
    for text in texts:
        answer = set(tokenize(text[:400])) | {"zzzz", "the"}
        first = build_index([("d", text)]).best_matches(answer, 3)
        index = build_index([("d", text)])
        index.best_matches(set(list(answer)[:5]), 1)  # some infos known, the rest new
        assert index.best_matches(answer, 3) == first
        assert index.best_matches(answer, 3) == first  # all known


def test_measures_unchanged_on_answers() -> None:
    """The whole reading of a sentence's measures, on a few phrasings of each shortcut."""
    for text, want in [("The meeting lasted half an hour at 5 pm.", ["half an hour", "5 pm."]),
                       ("About a tenth of 300 voters came.", ["a tenth", "300"]),
                       ("It weighs 5 kg and costs $4.", ["5 kg", "$4"])]:
        dates, numbers = extract_quantities(text)
        got = M.sentence_measures(text, numbers, dates, set(tokenize(text)))
        assert [m.text for m in got] == want


def test_citation_pair_gates_are_necessary() -> None:
    """``extract_pairs`` tries its code, footnote and sources-heading patterns only where
    their literal is (a heading's words as lower-case substrings of ASCII text)."""
    from gateway.layers import _citation_pairs as C

    texts = list(real_texts()) + _noise(6, 2000) + [
        "See `code`.", "A claim [^1].\n[^1]: The source.", "Text.\n\nSources:\n1. Report",
        "x\n**References**\n- A", "Works Cited: A; B", "BIBLIOGRAPHY\n1. Z"]
    for text in texts:
        if C._CODE.search(text):
            assert "`" in text
        if C._FOOTDEF.search(text):
            assert "[^" in text
        if text.isascii() and C._SOURCES_HEAD.search(text):
            low = text.lower()
            assert any(w in low for w in ("source", "reference", "citation", "bibliography",
                                          "works cited")), text[:80]
    assert C._sources_list("Text.\n\nSources:\n1. Report")[1] == [(1, "Report")]
    assert [p.ref for p in C.extract_pairs("A claim [^1].\n[^1]: The source.")] == \
        ["The source."]


def test_copy_anchor_gate_is_anchored_anchor_sides() -> None:
    # Every mention of a labelled string against every mention of the next string (mostly
    # the same case's: copied sentences anchor, the rest mostly match no position).
    texts = [t for t in real_texts() if t.strip()]
    found = gated = 0
    for text, other in zip(texts, texts[1:] + texts[:1], strict=True):
        a_sides = [sides(s.text, e.start, e.end) for s in split_sentences(text)
                   for e in entity_candidates(s.text)]
        b_sides = [sides(s.text, e.start, e.end) for s in split_sentences(other)
                   for e in entity_candidates(s.text)]
        for a in a_sides[:40]:
            for b in b_sides[:40]:
                plain = anchor_sides(a, b)
                got = _copy_anchor(a, b)
                assert got == (plain if anchored(plain) else None), (a, b)
                found += got is not None
                gated += not any(map(eq, a[0], b[0])) and not any(map(eq, a[1], b[1]))
    assert found > 100 and gated > 10000


def test_acronym_shaped_gate_is_acronym_of() -> None:
    # Every labelled string's mentions against the next string's (and their own).
    texts = [t for t in real_texts() if t.strip()]
    shaped = found = 0
    for text, other in zip(texts, texts[1:] + texts[:1], strict=True):
        names = [e.text for s in split_sentences(text) for e in entity_candidates(s.text)]
        longs = names + [e.text for s in split_sentences(other)
                         for e in entity_candidates(s.text)]
        for short in names[:30]:
            ok = acronym_shaped(short)
            shaped += ok
            for long in longs[:60]:
                got = acronym_of(short, long)
                assert not got or ok, (short, long)
                found += got
    assert shaped > 100 and found > 10
