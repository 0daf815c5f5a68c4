"""Slots: each value or name in a sentence with the words that frame it.

In "Construction began on 28 January 1887 and was completed on 31 March 1889" the
first date is framed by *construction*, *began*, the second by *completed*; in
"Lyon is the capital of France" *Lyon* is followed by *capital*, *France*. A
:class:`Slot` is one such *filler* (a value, date or name) with the stems of the
words on its left and on its right, weighted by closeness: each word in between
multiplies by ``DECAY`` and each clause boundary crossed (comma, "and", "while",
";", …) by its own factor, so a date binds to its own verb, not to the next
clause's.

:func:`slot_similarity` scores how well two slots share a frame (IDF-weighted,
words on the same side count fully, on the other side half): the grounding layer
compares an answer's slot with every context slot holding the *same* filler and
with those holding *another* filler of the same kind — the "wrong event" for a
right date, the swapped name in a copied sentence. Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gateway.text.stem import stem
from gateway.text.tokens import NUMBER_WORDS, STOPWORDS

__all__ = ["DECAY", "Filler", "Framed", "Slot", "clauses", "frame_words", "make_frames",
           "make_slots", "slot_similarity"]

DECAY = 0.85
"""Weight kept per word between a value or date and a frame word."""
NAME_DECAY = 0.6
"""The same for a name: its argument place is the words right next to it."""
MAX_REACH = 12
"""Words further away than this are not in a frame."""
_MIN_WEIGHT = 0.05

_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)?|[;:,()\[\]—–]|\s-\s", re.UNICODE)
_BOUNDARY: dict[str, float] = {
    ",": 0.55, ";": 0.3, ":": 0.35, "(": 0.6, ")": 0.6, "[": 0.6, "]": 0.6, "—": 0.45,
    "–": 0.45, " - ": 0.45,
    "and": 0.6, "or": 0.6, "but": 0.35, "while": 0.35, "whereas": 0.35, "although": 0.35,
    "though": 0.35, "however": 0.35, "because": 0.45, "unless": 0.35, "after": 0.7,
    "before": 0.7, "which": 0.7, "who": 0.7, "whose": 0.75, "where": 0.7, "when": 0.7,
    "whom": 0.7, "then": 0.5, "so": 0.5,
}
# Stopwords that still say which event a value belongs to ("before construction").
_RELATION_WORDS = frozenset(
    "before after during until since up down over under above below first last "
    "between against without".split())


@dataclass(slots=True)
class Filler:
    """A value or a name occupying ``start:end`` of the sentence text."""

    start: int
    end: int
    kind: str
    """``value``, ``date`` or ``entity``."""
    key: str = ""
    """Frame token standing for it inside *other* fillers' frames ("" = its words)."""


@dataclass(slots=True)
class Slot:
    filler: Filler
    left: dict[str, float] = field(default_factory=dict)
    right: dict[str, float] = field(default_factory=dict)


class Framed(Protocol):
    """Anything with a frame: a :class:`Slot`, a :class:`gateway.text.slots.Fact`."""

    @property
    def left(self) -> Mapping[str, float]: ...

    @property
    def right(self) -> Mapping[str, float]: ...


def frame_words(word: str) -> str | None:
    """The frame key of a lower-case token, or ``None`` when it frames nothing."""
    if word in _RELATION_WORDS:
        return word
    if word.endswith(("'s", "’s")):
        word = word[:-2]
    if word in STOPWORDS or word in NUMBER_WORDS or len(word) < 2:
        return None
    if word[0].isdigit():
        return None
    return stem(word)


def make_slots(text: str, fillers: Sequence[Filler]) -> list[Slot]:
    """The slot of each filler of ``text`` (fillers must not overlap; any order)."""
    return [Slot(f, left, right) for f, (left, right) in zip(fillers, make_frames(text, fillers),
                                                              strict=True)]


def make_frames(text: str, fillers: Sequence[Filler]
                ) -> list[tuple[dict[str, float], dict[str, float]]]:
    """The frame (left, right) of each filler of ``text``: :func:`make_slots` without
    the :class:`Slot` objects."""
    if not fillers:
        return []
    # Tokens: (start, end, frame key or None, boundary factor or 1.0, filler index or -1)
    toks: list[tuple[str | None, float, int]] = []
    order = sorted(range(len(fillers)), key=lambda i: fillers[i].start)
    fi = 0
    n_f = len(order)
    owner_of: list[int] = []
    for m in _TOKEN.finditer(text):
        s, e = m.span()
        while fi < n_f and fillers[order[fi]].end <= s:
            fi += 1
        owner = -1
        if fi < n_f and fillers[order[fi]].start <= s < fillers[order[fi]].end:
            owner = order[fi]
        tok = m.group(0)
        low = tok.lower()
        b = _BOUNDARY.get(low if tok.isalpha() else tok, 1.0)
        key = None if b < 1.0 and not tok.isalpha() else frame_words(low)
        if b < 1.0 and tok.isalpha() and low not in _RELATION_WORDS:
            key = None
        toks.append((key, b, owner))
        owner_of.append(owner)
    # "and"/"or" right before a name or value separates two fillers' clauses more
    # than it joins two words ("Marseille is second and Lyon third").
    for k in range(len(toks) - 1):
        key, b, owner = toks[k]
        if b == _BOUNDARY["and"] and owner < 0 and owner_of[k + 1] >= 0:
            toks[k] = (key, 0.35, owner)
    frames: list[tuple[dict[str, float], dict[str, float]]] = []
    for i in range(len(fillers)):
        idx = [k for k, o in enumerate(owner_of) if o == i]
        left: dict[str, float] = {}
        right: dict[str, float] = {}
        if idx:
            _spread(toks, fillers, idx[0] - 1, -1, i, left)
            _spread(toks, fillers, idx[-1] + 1, 1, i, right)
        frames.append((left, right))
    return frames


def _spread(toks: list[tuple[str | None, float, int]], fillers: Sequence[Filler], k: int,
            step: int, me: int, out: dict[str, float]) -> None:
    w = 1.0
    seen_owner = -1
    reach = 0
    n = len(toks)
    decay = NAME_DECAY if fillers[me].kind == "entity" else DECAY
    while 0 <= k < n and reach < MAX_REACH and w >= _MIN_WEIGHT:
        key, b, owner = toks[k]
        if b < 1.0:
            w *= b
        if owner >= 0 and owner != me:
            if owner != seen_owner:
                seen_owner = owner
                other = fillers[owner]
                okey = other.key
                if okey and okey not in out:
                    out[okey] = w
                if other.kind == fillers[me].kind and other.kind != "entity":
                    w *= 0.5  # another value of its kind: its own frame starts here
            if not fillers[owner].key and key is not None and key not in out:
                out[key] = w
        elif key is not None:
            if key not in out:
                out[key] = w
            w *= decay
            reach += 1
        k += step


def slot_similarity(a: Framed, c: Framed, idf: Callable[[str], float],
                    extra: Iterable[tuple[str, float]] = (), min_weight: float = 0.0) -> float:
    """How much frame ``a`` (the answer's) and ``c`` (the context's) share: for each
    shared key ``idf(key)`` times the smaller of the two weights, full on the same
    side, half across sides. ``extra`` are side-free (key, weight) pairs added to
    ``a`` (the question's words, for an answer too short to have a frame)."""
    total = 0.0
    cl, cr = c.left, c.right
    for key, wa in a.left.items():
        same = cl.get(key, 0.0)
        cross = cr.get(key, 0.0) * 0.5
        best = max(min(wa, same), min(wa, cross) if cross else 0.0)
        if best > min_weight:
            total += idf(key) * best
    for key, wa in a.right.items():
        same = cr.get(key, 0.0)
        cross = cl.get(key, 0.0) * 0.5
        best = max(min(wa, same), min(wa, cross) if cross else 0.0)
        if best > min_weight:
            total += idf(key) * best
    for key, wa in extra:
        if key in a.left or key in a.right:
            continue
        got = max(cl.get(key, 0.0), cr.get(key, 0.0))
        if got:
            total += idf(key) * min(wa, got)
    return total


# Every cut starts at its punctuation mark or at whitespace. The pattern opens with the
# class of those characters (not an alternation of branches), so the regex engine skips
# to them instead of trying each branch at each position (≈ 30 % faster on the labelled
# sentences); a look-behind picks the branch of the character just read (the plain
# alternation is the reference in tests/text/test_answer_pass_fast.py). A mark's leading
# whitespace is given back to the clause before it below.
_CLAUSE_CUT = re.compile(
    r"[;:(),\s](?:(?<=[;:()])\s*|"
    r"(?<=,)\s+(?:(?:and|but|while|whereas|or|so|although|though|which|who|whose)\s*)?|"
    r"(?<=\s)\s*(?:(?:but|while|whereas|although|though|because|unless)\s+|and\s+(?=[A-Z])|"
    r"[—–-]\s+))")


def clauses(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the clauses of a sentence: cut at ``; : ( ) , — `` and at
    conjunctions that open a clause ("but", "while", "and" before a name)."""
    out = []
    start = 0
    for m in _CLAUSE_CUT.finditer(text):
        cut = m.start()
        if text[cut] in ";:()":  # the whitespace before a mark belongs to the cut
            while cut > start and text[cut - 1].isspace():
                cut -= 1
        if cut > start:
            out.append((start, cut))
        start = m.end()
    if start < len(text):
        out.append((start, len(text)))
    return out or [(0, len(text))]
