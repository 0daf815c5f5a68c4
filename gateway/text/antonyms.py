"""Opposite directions: "rose" / "fell", "above" / "below", "preceding" / "after",
"only" / "either".

A paraphrase that reverses a direction keeps almost every word of its source: "revenue
*fell* 8 %" against "revenue …, *up* 8 %", "uptime stays *above* 99.9 %" against "falls
*below* 99.9 %", "the 12 months *after* the claim" against "*preceding* the claim",
"*only* the employer" against "*either* party". :func:`directions` reads which side
of each opposition a clause takes (function words included: "up", "after", "only" are
stopwords elsewhere), and :func:`opposed` finds an opposition two clauses take opposite
sides of — and neither takes both. Pure; word lists general English, not tuned to any text.
"""

from __future__ import annotations

import re
from collections.abc import Set

__all__ = ["direction_sides", "direction_words", "directions", "is_direction_word",
           "may_have_direction", "may_oppose", "opposed"]

# group -> (one side's words, the other side's words); words matched in lower case.
_GROUPS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "change": (frozenset("rise rises rising rose risen increase increased increases increasing "
                         "grow grows grew grown growing gain gains gained climb climbed "
                         "climbs jump jumped jumps surge surged soar soared".split()),
               frozenset("fall falls falling fell fallen decrease decreased decreases "
                         "decreasing decline declined declines declining drop dropped drops "
                         "dropping slip slipped slips shrink shrank shrunk plunge plunged "
                         "sink sank slump slumped".split())),
    "level": (frozenset("above over exceed exceeds exceeded exceeding higher greater "
                        "more".split()),
              frozenset("below under beneath lower less fewer".split())),
    "time": (frozenset("before preceding prior earlier previous".split()),
             frozenset("after following later subsequent next".split())),
    "scope": (frozenset("only solely exclusively".split()),
              frozenset("either both all any every each".split())),
    "limit": (frozenset("maximum max most".split()),
              frozenset("minimum min least".split())),
    "permission": (frozenset("allowed permitted allow allows permit permits accept accepts "
                             "accepted".split()),
                   frozenset("prohibited forbidden banned prohibit forbid ban refuse refused "
                             "rejected reject".split())),
    "inclusion": (frozenset("include includes included including".split()),
                  frozenset("exclude excludes excluded excluding except".split())),
}
# Not here: win/lose, buy/sell, lend/borrow — "X lost to Y" is "Y won": the roles swap.
_INDEX: dict[str, tuple[str, int]] = {
    w: (g, side) for g, sides in _GROUPS.items() for side, words in enumerate(sides)
    for w in words}
_WORD = re.compile(r"[a-z]+")
_DIGIT = re.compile(r"\d")
# "up 8 %" / "down 3 %": only before a number (elsewhere "up" is "set up", "up to").
_UPDOWN = re.compile(r"\b(up|down)\s+(?=[$£€¥]?\d)")
# Words of a group that are no direction in these phrases.
_NOT_DIRECTION = re.compile(
    r"\b(?:more\s+or\s+less|all\s+the\s+same|at\s+least|at\s+most|first\s+and\s+only|"
    r"not\s+only|over\s+the\s+(?:years?|weekend|past|course|phone)|all\s+of\s+them|"
    r"each\s+other|no\s+more\s+than|not\s+more\s+than)\b")


_NEEDS_NUMBER = frozenset(["change", "level"])
"""Oppositions that count only in a clause stating a number ("fell 8 %", "above 99.9 %"):
elsewhere "over" and "under", "rose" and "fell" have many other senses."""


_INDEX_WORDS = frozenset(_INDEX)
_NOT_DIRECTION_HINTS = ("less", "same", "least", "most", "only", "year", "weekend", "past",
                        "course", "phone", "them", "other", "than")
"""A word every match of ``_NOT_DIRECTION`` holds ("more or less", "at least", "over the
years", "each other", "no more than", …; tests/text/test_directions_fast.py)."""
_CUE_WORDS = _INDEX_WORDS | {"up", "down"}
"""Every word :func:`directions` can read a side from."""


def may_have_direction(text: str) -> bool:
    """A cheap test: whether :func:`directions` can find anything in ``text`` (one word
    scan and a set test; an alternation of all the words, tried at every position, cost
    ten times more)."""
    return not _CUE_WORDS.isdisjoint(_WORD.findall(text.lower()))


def direction_sides(words: Set[str]) -> frozenset[tuple[str, int]]:
    """The (group, side) pairs these words could take, context aside (a superset of what
    :func:`directions` reads from a text of them: "up" and "down" count either way)."""
    out = {_INDEX[w] for w in _INDEX_WORDS.intersection(words)}  # the set operation in C
    for w, side in (("up", 0), ("down", 1)):
        if w in words:
            out.add(("change", side))
    return frozenset(out)


def may_oppose(a: frozenset[tuple[str, int]], c: frozenset[tuple[str, int]]) -> bool:
    """Whether two sets of :func:`direction_sides` hold opposite sides of a group (a
    superset of :func:`opposed` over the directions read from them)."""
    return any((g, 1 - side) in c for g, side in a)


def direction_words() -> frozenset[str]:
    """Every word that takes a side of some group."""
    return frozenset(_INDEX)


def is_direction_word(word: str) -> bool:
    return word in _INDEX


def directions(text: str) -> frozenset[tuple[str, int]]:
    """The (group, side) pairs a clause's words take."""
    low = text.lower()
    # (The patterns' \b alternations are tried at every position: each runs only when a
    # word every match of it holds is in the text — substring tests.)
    if any(h in low for h in _NOT_DIRECTION_HINTS):
        low = _NOT_DIRECTION.sub(" ", low)
    numeric = _DIGIT.search(low) is not None
    out = {_INDEX[w] for w in _INDEX_WORDS.intersection(_WORD.findall(low))
           if numeric or _INDEX[w][0] not in _NEEDS_NUMBER}
    if numeric and ("up" in low or "down" in low):
        for m in _UPDOWN.finditer(low):
            out.add(("change", 0 if m.group(1) == "up" else 1))
    return frozenset(out)


def opposed(a: frozenset[tuple[str, int]], c: frozenset[tuple[str, int]]) -> str | None:
    """A group the two take opposite sides of (each side taken by one only), else None."""
    for g, side in a:
        if (g, 1 - side) in c and (g, 1 - side) not in a and (g, side) not in c:
            return g
    return None
