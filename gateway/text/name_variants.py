"""A name the context lacks that varies one word of a name the context has.

"Tom *Hanks*" where the context names Tom *Cruise*, the Kansas City *Royals* for its
Kansas City *Chiefs*, "AFC *East*" for "AFC *South*", "Pan's *Restaurant*" for "Pan's
*Labyrinth*": the answer keeps all but one word of a context name and puts a word the
context (and the question) never uses in place of the last one. A faithful answer that
renames something shortens it ("Helix" for "Helix Corp"), spells it differently
("Söderling", "Scoot" for "Scott") or uses another inflection ("Romantic Film" for
"Romance Film"); those are no variants here. A variant is a *substituted* name, as
strong evidence as one put into a copied sentence
(:mod:`gateway.layers._grounding_names`).

Only names of two or more comparable words (:func:`gateway.text.names.name_key`) are
compared, and only with the names of the context sentences the answer sentence aligns
with — the caller passes them — so the check is a few set operations per name the
context lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

__all__ = ["name_variant", "near_spelling"]

MIN_WORDS = 2
"""Both names have at least this many comparable words."""
SAME_PREFIX = 4
"""Two words that share this many first letters are spellings or inflections of one."""
MAX_EDITS = 2
"""Two words this many edits apart (or fewer) are spellings of one ("Scoot", "Scott")."""


def near_spelling(a: str, b: str) -> bool:
    """Whether two lower-case words may be spellings or inflections of one word."""
    if a[:SAME_PREFIX] == b[:SAME_PREFIX]:
        return True
    if abs(len(a) - len(b)) > MAX_EDITS:
        return False
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        if min(cur) > MAX_EDITS:
            return False
        prev = cur
    return prev[-1] <= MAX_EDITS


def name_variant(key: frozenset[str], others: Iterable[frozenset[str]],
                 known: Callable[[str], bool]) -> frozenset[str] | None:
    """The first of ``others`` (keys of context names) that ``key`` (the key of an answer
    name the context lacks) varies in exactly one word, that word unknown to the context
    and the question (``known``) and no spelling of the word it replaces."""
    if len(key) < MIN_WORDS:
        return None
    for other in others:
        if len(other) != len(key):
            continue
        new = key - other
        if len(new) != 1:
            continue
        (word,) = new
        (old,) = other - key
        if known(word) or near_spelling(word, old):
            continue
        return other
    return None
