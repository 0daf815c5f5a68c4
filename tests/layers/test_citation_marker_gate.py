"""``extract_pairs`` looks for citation markers only in an answer with a "[" or "(":
every alternative of ``_MARKER`` must open with one of them (checked on the pattern
itself), and the unconditional scan must find none in a text without them."""

from __future__ import annotations

import random
import re._parser as sre_parse  # the stdlib's own parse of a pattern
from typing import Any

from corpus_texts import real_texts

from gateway.layers import _citation_pairs as C


def _first_char(items: list[Any]) -> int | None:
    for op, arg in items:
        if op in (sre_parse.ASSERT, sre_parse.ASSERT_NOT):
            continue  # a look-around consumes nothing
        return arg if op is sre_parse.LITERAL else None  # type: ignore[no-any-return]
    return None


def test_every_marker_opens_with_a_bracket() -> None:
    tree = list(sre_parse.parse(C._MARKER.pattern, C._MARKER.flags))
    assert len(tree) == 1 and tree[0][0] is sre_parse.BRANCH
    branches = tree[0][1][1]
    assert len(branches) >= 3
    for branch in branches:
        assert _first_char(list(branch)) in (ord("["), ord("("))


def test_no_marker_and_no_pair_without_a_bracket() -> None:
    rng = random.Random(7)
    texts = [t.replace("[", " ").replace("(", " ") for t in list(real_texts())[:600]]
    alphabet = "ab ]) ^:!\n.sourcefSOURCE1-"
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80)))
              for _ in range(2000)]
    for t in texts:
        assert "[" not in t and "(" not in t
        assert not list(C._MARKER.finditer(t)), t[:80]
        assert C.extract_pairs(t) == []


def test_markers_are_still_found() -> None:
    pairs = C.extract_pairs("The bridge opened in 1932 [1]. It is 503 m long "
                            "(source: the city archive).")
    assert [p.ref for p in pairs] == ["#1", "the city archive"]


def test_marker_gate_is_the_pattern_on_parentheses() -> None:
    """Without "[", a marker needs "(" then "s" or "r" ignoring case: the gate says yes
    wherever the unconditional scan finds one, on the labelled texts (their "[" made
    "(") and on random texts dense in the pattern's characters."""
    import re
    import sys

    assert [c for c in map(chr, range(sys.maxunicode + 1))
            if re.match(r"[sr]", c, re.IGNORECASE)] == ["R", "S", "r", "s", "\u017f"]
    rng = random.Random(9)
    texts = [t.replace("[", "(") for t in list(real_texts())[:600]]
    pieces = ["(", "(", ")", " ", ":", "source", "Sources", "\u017fource", "ref", "REFS",
              "references", "Re", "s", "x", "1", "\n", "!", "(source: a)", "(Refs:b)",
              "(\u017fources : c)", "(REFERENCES:d)"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
              for _ in range(5000)]
    found = 0
    for t in texts:
        hit = bool(list(C._MARKER.finditer(t)))
        assert not hit or C._may_mark(t), t[:80]
        found += hit
    assert found > 100


def test_last_sources_heading_is_the_last_match_of_the_scan() -> None:
    """``_last_head`` (the heading tried at each line start, from the last) is the last
    ``_SOURCES_HEAD.finditer`` match, on the labelled texts and on random texts of
    headings, list items and blank lines (few lines and many)."""
    rng = random.Random(11)
    lines = ["Sources:", "## References", "**Citations**: a; b", "  bibliography", "x",
             "works cited", "1. Item one", "- item", "", " \t", "SOURCE: [1] y",
             "The source is here.", "\u017fources", "#### refs", "text sources:"]
    texts = list(real_texts())
    texts += ["\n".join(rng.choice(lines) for _ in range(rng.randint(1, 90)))
              for _ in range(3000)]
    found = 0
    for t in texts:
        heads = list(C._SOURCES_HEAD.finditer(t))
        want = heads[-1].span() if heads else None
        got = C._last_head(t)
        assert (got.span() if got else None) == want, t[:80]
        found += want is not None
    assert found > 1000
