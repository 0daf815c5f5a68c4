"""A name the context lacks that varies one word of a name the context has.

"Tom *Hanks*" where the context names Tom *Cruise*, the Kansas City *Royals* for its
Kansas City *Chiefs*, "AFC *East*" for "AFC *South*", "Pan's *Restaurant*" for "Pan's
*Labyrinth*": the answer keeps all but one word of a context name and puts a word the
context (and the question) never uses in place of the last one. A faithful answer that
renames something shortens it ("Helix" for "Helix Corp"), spells it differently
("Söderling", "Scoot" for "Scott") or uses another inflection ("Romantic Film" for
"Romance Film") or writes a number another way ("World War *Two*" for the Second
World War, "Henry *8*" for Henry VIII); those are no variants here. A variant is a *substituted* name, as
strong evidence as one put into a copied sentence
(:mod:`gateway.layers._grounding_names`).

Only names of two or more comparable words (:func:`gateway.text.names.name_key`) are
compared, and only with the names of the context sentences the answer sentence aligns
with — the caller passes them — so the check is a few set operations per name the
context lacks.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable

__all__ = ["name_variant", "near_spelling", "numeral_value", "spelled_alike"]

MIN_WORDS = 2
"""Both names have at least this many comparable words."""
SAME_PREFIX = 4
"""Two words that share this many first letters are spellings or inflections of one."""
MAX_EDITS = 2
"""Two words this many edits apart (or fewer) are spellings of one ("Scoot", "Scott")."""
SPELLING_MIN = 5
"""A word of a name spelt another way (:func:`spelled_alike`) has at least this many
letters: one letter changes a short word into another ("Hogs", "Dogs")."""


_CARDINALS = ("one two three four five six seven eight nine ten eleven twelve thirteen "
              "fourteen fifteen sixteen seventeen eighteen nineteen twenty").split()
_ORDINAL_WORDS = ("first second third fourth fifth sixth seventh eighth ninth tenth eleventh "
                  "twelfth thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth "
                  "nineteenth twentieth").split()
_NUMERALS: dict[str, int] = {
    **{w: i for i, w in enumerate(_CARDINALS, 1)},
    **{w: i for i, w in enumerate(_ORDINAL_WORDS, 1)},
}
_ROMAN = {"i": 1, "v": 5, "x": 10, "l": 50}


def numeral_value(word: str) -> int | None:
    """The number a lower-case word writes, as a cardinal or ordinal word ("two",
    "second"), digits with or without an ordinal ending ("2", "2nd") or a Roman numeral up
    to 89 ("ii", "viii"); ``None`` for any other word."""
    if word in _NUMERALS:
        return _NUMERALS[word]
    digits = word[:-2] if word[-2:] in ("st", "nd", "rd", "th") else word
    if digits.isascii() and digits.isdigit():
        return int(digits)
    if not word or len(word) > 7 or any(c not in _ROMAN for c in word):
        return None
    total = 0
    for i, c in enumerate(word):
        v = _ROMAN[c]
        total += -v if i + 1 < len(word) and _ROMAN[word[i + 1]] > v else v
    return total


_LIGATURES = str.maketrans({"æ": "ae", "œ": "oe", "ø": "o", "ß": "ss", "ł": "l", "đ": "d"})


def fold(word: str) -> str:
    """A lower-case word without accents or ligatures ("æon" -> "aeon", "söderling" ->
    "soderling")."""
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word.translate(_LIGATURES))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _edits_at_most(a: str, b: str, limit: int) -> bool:
    if abs(len(a) - len(b)) > limit:
        return False
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        if min(cur) > limit:
            return False
        prev = cur
    return prev[-1] <= limit


def near_spelling(a: str, b: str) -> bool:
    """Whether two lower-case words may be spellings or inflections of one word (accents
    and ligatures aside; one inside the other, "aeon" in a glued "fluxæon", counts)."""
    if a[:SAME_PREFIX] == b[:SAME_PREFIX]:
        return True
    a, b = fold(a), fold(b)
    if a[:SAME_PREFIX] == b[:SAME_PREFIX]:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) >= SAME_PREFIX and short in long_:
        return True
    return _edits_at_most(a, b, MAX_EDITS)


def spelled_alike(key: frozenset[str], other: frozenset[str]) -> bool:
    """Whether two name keys of the same words but one are one edit apart in that word,
    of at least ``SPELLING_MIN`` letters and the same first letter ("Scarlett Letter",
    "Scarlet Letter"; accents and ligatures aside): one name spelt two ways, not a
    substitute."""
    if len(key) != len(other) or len(key) < MIN_WORDS:
        return False
    new, old = key - other, other - key
    if len(new) != 1:
        return False
    (a,), (b,) = new, old
    a, b = fold(a), fold(b)
    return (min(len(a), len(b)) >= SPELLING_MIN and a[0] == b[0]
            and _edits_at_most(a, b, 1))


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
        value = numeral_value(word)
        if value is not None and value == numeral_value(old):
            continue  # the same number written another way
        return other
    return None
