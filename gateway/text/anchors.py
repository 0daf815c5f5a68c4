"""Anchors: the words right next to a name, compared position by position.

A name put in another's place in a copied sentence keeps that sentence's words on
at least one side: "*Lyon* is the capital of France" / "*Paris* is the capital and
largest city"; "will join *Bluefin's* board" / "will join *Northwind's* board".
:func:`anchor` counts, for the ``WIDTH`` tokens on each side of two mentions, the
positions where both texts have the same word (stemmed; function words included,
since "of" and "is the" carry the structure; punctuation left out, so an apposition's
comma does not shift the rest), and
:func:`anchored` says whether that is a copy rather than chance: two matched content
words, or three matched positions of which one holds a content word. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gateway.text.stem import stem
from gateway.text.tokens import STOPWORDS

__all__ = ["WIDTH", "Anchor", "Sides", "anchor", "anchor_sides", "anchored", "sides"]

WIDTH = 3
_TOK = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Anchor:
    left: int
    right: int
    content: int
    """Matched positions holding a content word."""
    whole: bool = False
    """Every word on one side of the answer's mention matched, at least two ("Hein
    Jacobsson *completed it*." against "…Hybertsson *completed it*.")."""


def _side(text: str, start: int, end: int, left: bool) -> list[str]:
    if left:
        toks = _TOK.findall(text[max(0, start - 80):start])
        toks = toks[-WIDTH:][::-1]
    else:
        rest = text[end:end + 80]
        if rest[:2] in ("'s", "’s"):
            rest = rest[2:]
        toks = _TOK.findall(rest)[:WIDTH]
    return [stem(t.lower()) if t[0].isalnum() else t for t in toks]


Sides = tuple[list[str], list[str]]
"""The ``WIDTH`` words left of a mention (nearest first) and right of it, stemmed."""


def sides(text: str, start: int, end: int) -> Sides:
    """The words around the mention ``text[start:end]`` that :func:`anchor` compares."""
    return _side(text, start, end, True), _side(text, start, end, False)


def anchor(a_text: str, a_start: int, a_end: int,
           c_text: str, c_start: int, c_end: int) -> Anchor:
    """Position-wise matches around mention ``a`` (in ``a_text``) and ``c``."""
    return anchor_sides(sides(a_text, a_start, a_end), sides(c_text, c_start, c_end))


def anchor_sides(a: Sides, c: Sides) -> Anchor:
    """:func:`anchor` of two mentions' :func:`sides` (a mention compared with many others
    reads its own words once)."""
    left = right = content = 0
    whole = False
    for is_left in (True, False):
        xs = a[0] if is_left else a[1]
        ys = c[0] if is_left else c[1]
        hits = 0
        for x, y in zip(xs, ys, strict=False):
            if x == y:
                hits += 1
                if x[0].isalnum() and x not in STOPWORDS and not x.isdigit():
                    content += 1
        if is_left:
            left = hits
        else:
            right = hits
        if len(xs) >= 2 and hits == len(xs) and len(xs) < WIDTH:
            whole = True
    return Anchor(left, right, content, whole)


def anchored(a: Anchor) -> bool:
    """A copy's anchor: two content words, three positions with one content word, or a
    whole side of the answer (two words or more, one of them content) copied."""
    return a.content >= 2 or (a.content >= 1 and (a.left + a.right >= 3 or a.whole))
