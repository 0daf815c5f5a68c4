"""A light suffix-stripping stemmer for comparing the words around a fact.

:func:`stem` maps inflected and derived forms to one key: ``designed`` /
``designer`` / ``design``, ``invest`` / ``investment``, ``refunded`` /
``refundable``, ``launch`` / ``launched``, ``began`` / ``begun`` / ``begin``,
``monthly`` / ``month``, ``completed`` / ``completion``. Over-stemming is
acceptable (it is only used to find the same word in two texts, never shown),
under-stemming only loses a match. Memoized; pure.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from functools import lru_cache

from gateway.text.tokens import _IRREGULAR, irregular_group

__all__ = ["stem", "words_with_stem"]

# Longest first within each rule; (suffix, minimum stem length left, replacement).
_SUFFIXES: tuple[tuple[str, int, str], ...] = (
    ("ization", 3, "iz"), ("isation", 3, "iz"), ("ational", 3, "at"), ("fulness", 3, ""),
    ("iveness", 3, ""), ("ousness", 3, ""), ("ements", 3, ""), ("ations", 3, "at"),
    ("ement", 3, ""), ("ments", 3, ""), ("ation", 3, "at"), ("ingly", 3, ""),
    ("ities", 3, ""), ("ables", 3, ""), ("ibles", 3, ""), ("ments", 3, ""),
    ("ment", 3, ""), ("ness", 3, ""), ("able", 3, ""), ("ible", 3, ""), ("ions", 3, ""),
    ("ings", 3, ""), ("edly", 3, ""), ("ally", 3, ""), ("ers", 3, ""), ("ies", 2, "y"),
    ("ied", 2, "y"), ("ion", 3, ""), ("ing", 3, ""), ("ity", 3, ""), ("ive", 3, ""),
    ("ful", 3, ""), ("ly", 3, ""), ("ed", 3, ""), ("er", 3, ""), ("es", 3, ""),
    ("al", 4, ""), ("s", 3, ""),
)
_BY_SUFFIX: dict[str, tuple[int, str]] = {}
for _suffix, _keep, _repl in _SUFFIXES:
    _BY_SUFFIX.setdefault(_suffix, (_keep, _repl))
_LONGEST = max(len(x) for x in _BY_SUFFIX)
_KEEP = frozenset("news series species always perhaps bus gas yes this was has is its "
                  "thus plus less unless across princess business process".split())
_IRREGULAR_EXTRA = {"daily": "day", "annually": "year", "annual": "year", "weekly": "week",
                    "hourly": "hour", "yearly": "year", "monthly": "month", "children": "child",
                    "feet": "foot", "mice": "mouse", "teeth": "tooth", "geese": "goose",
                    "lives": "life", "wives": "wife", "knives": "knife", "leaves": "leaf",
                    "persons": "person", "people": "person"}


@lru_cache(maxsize=1 << 15)
def stem(word: str) -> str:
    """The comparison key of a lower-case word (see the module docstring)."""
    w = word.lower()
    if len(w) <= 3 or w in _KEEP:
        return w
    extra = _IRREGULAR_EXTRA.get(w)
    if extra is not None:
        return extra
    group = irregular_group(w)
    if group is not None:
        return group
    n = len(w)
    for size in range(min(_LONGEST, n - 1), 0, -1):  # longest suffix first, dict look-ups
        rule = _BY_SUFFIX.get(w[-size:])
        if rule is None:
            continue
        keep, repl = rule
        if n - size < keep:
            continue
        suffix = w[-size:]
        if suffix == "s" and w.endswith(("ss", "us", "is")):
            continue
        if suffix == "es" and not w.endswith(("ses", "xes", "zes", "ches", "shes", "oes")):
            w = w[:-1]  # "closes" -> "close" -> "clos"
            break
        w = w[: n - size] + repl
        break
    if len(w) > 4 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]  # "stopped" -> "stopp" -> "stop"
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return w


def _table_forms() -> dict[str, tuple[str, ...]]:
    """Stem -> the words a table gives it (irregular forms, "daily" -> "day"): the only
    words whose stem is not a prefix of them, give or take its last two letters."""
    by: dict[str, list[str]] = {}
    for form, group in _IRREGULAR.items():
        by.setdefault(group.split(None, 1)[0], []).append(form)
    for form, key in _IRREGULAR_EXTRA.items():
        by.setdefault(key, []).append(form)
    return {key: tuple(dict.fromkeys(forms)) for key, forms in by.items()}


_TABLE_FORMS = _table_forms()


def words_with_stem(key: str, words: Sequence[str]) -> list[str]:
    """The words of ``words`` (sorted, lower case) whose :func:`stem` is ``key``, in order,
    found without stemming every word: a stem is a beginning of its word (a suffix cut,
    a doubled or final letter dropped) plus what a suffix rule puts back (``"y"``,
    ``"at"``, ``"iz"``, and nothing is dropped after those), so such a word starts with
    ``key`` less that ending; the others come from the tables (``"went"`` -> ``"go"``)."""
    prefix = key[:-2] if key.endswith(("at", "iz")) else key[:-1] if key.endswith("y") \
        else key
    out: list[str] = []
    i = bisect_left(words, prefix)
    n = len(words)
    while i < n and words[i].startswith(prefix):
        w = words[i]
        if stem(w) == key:
            out.append(w)
        i += 1
    extra = _TABLE_FORMS.get(key)
    if extra:
        for form in extra:
            if not form.startswith(prefix) and stem(form) == key:
                j = bisect_left(words, form)
                if j < n and words[j] == form:
                    out.append(form)
        out.sort()
    return out
