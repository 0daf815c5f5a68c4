"""Names: which capitalized words are names, and when two mentions name the same thing.

:func:`gateway.text.tokens.entity_candidates` drops a single capitalized word that
opens a sentence — out of context "Lyon is the capital" looks like "Despite the
rain". A context can tell: :func:`proper_words` lists the words it only ever writes
capitalized away from a sentence start ("Lyon", "Velmoxin", "Brightway"), and
:func:`names_in` adds such an opener back as a name.

:func:`name_key` is a mention's comparable form (its lower-case words without
possessives, initials and articles) and :func:`same_name` says whether two mentions
may name the same thing: "John Roebling" ~ "John A. Roebling", "Helix" ~ "Helix
Corp"; "Emily Warren Roebling" is not "Washington Roebling".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from gateway.text.tokens import OPENERS, PLACES, STOPWORDS, Span, entity_candidates, tokenize

__all__ = ["ProperWords", "acronym_of", "acronym_shaped", "name_class", "name_key", "names_in", "proper_words",
           "same_name"]

_CAP_OR_LOW = re.compile(r"(?<![\w’'-])(?:([A-Z][a-zà-ÿ]+(?:-[A-Z]?[a-zà-ÿ]+)?)|([a-zà-ÿ]{3,}))\b")
"""A capitalized word (group 1: "Helix", "Jean-Pierre") or a lower-case word of three
letters or more (group 2), each starting a word (:func:`proper_words`)."""
_CAP = re.compile(r"[A-Z](?<![\w’'-].)[a-zà-ÿ]+(?:-[A-Z]?[a-zà-ÿ]+)?\b")
"""The first branch of ``_CAP_OR_LOW`` (its look-behind after the capital: the same
test of the character before it, and a pattern opening with a character class)."""
_LOW_AT = re.compile(r"(?<![\w’'-])[a-zà-ÿ]{3,}\b")
"""The second branch of ``_CAP_OR_LOW``."""
_SENT_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*|[\"“(]\s*)$")
_FIRST = re.compile(r"[\"'“‘(\[]*([A-Z][\w’'-]*)")
_KEY_DROP = frozenset(["s", "the", "a", "an", "of", "and", "de", "la", "le"])


def proper_words(text: str) -> frozenset[str]:
    """Lower-cased words ``text`` only ever writes capitalized ("Velmoxin", "Helix",
    "Marseille"), openers ("However", "The") and stopwords aside."""
    if "\u00f7" in text or len(text) > _MAX_FAST_CHARS:  # see _proper_fast
        return _proper_scan(text)
    return _proper_fast(text)


def _proper_scan(text: str) -> frozenset[str]:
    """:func:`proper_words` by one scan of every word (the definition)."""
    # One scan for both kinds (a word starts with a capital or a lower-case letter, and
    # neither pattern can start inside the other's match), strings instead of match
    # objects: this was a third of a 10,000-word context's cold start.
    caps: set[str] = set()
    lower: set[str] = set()
    for cap, low in set(_CAP_OR_LOW.findall(text)):
        if cap:
            caps.add(cap)
        else:
            lower.add(low)
    return frozenset(w for c in caps if (w := c.lower()) not in lower
                     and w not in OPENERS and w not in STOPWORDS)


_MAX_LOOKUPS = 100
"""Above this many capitalized words to look up, one scan of every word is cheaper (each
look-up searches the text: ~160 of them cost what the scan does)."""
_MAX_FAST_CHARS = 20_000
"""A longer text has more capitalized words than that (a 10,000-word document: ~550):
scanned at once."""


def _proper_fast(text: str) -> frozenset[str]:
    """:func:`_proper_scan` for a text without "÷", the lower-case words looked up only
    for the capitalized ones (a few percent of the words; with more than
    ``_MAX_LOOKUPS`` of them, a long document, the scan).

    Without "÷" every character a match may hold (letters, "-") is one the look-behind
    rejects before, so no match can start inside another: ``findall`` yields exactly the
    matches at each position where the pattern matches. So the capitalized words are the
    matches of the first branch alone (:data:`_CAP`, whose leading capital lets the
    engine skip to capitals), and a lower-case word is among the second branch's matches
    iff that branch (:data:`_LOW_AT`) matches it at one of its occurrences."""
    out: set[str] = set()
    lookup: list[str] = []
    for cap in set(_CAP.findall(text)):
        w = cap.lower()
        if w in OPENERS or w in STOPWORDS:
            continue
        if len(w) < 3 or "-" in w:  # never a match of the second branch
            out.add(w)
        else:
            lookup.append(w)
    lookup = list(dict.fromkeys(lookup))
    if len(lookup) > _MAX_LOOKUPS:
        return _proper_scan(text)
    for w in lookup:
        p = text.find(w)
        while p >= 0:
            m = _LOW_AT.match(text, p)  # the look-behind sees text[p - 1]
            if m is not None and m.end() - p == len(w):
                break
            p = text.find(w, p + 1)
        if p < 0:
            out.add(w)
    return frozenset(out)


_LOWER_ASCII = frozenset("abcdefghijklmnopqrstuvwxyz")


_MAX_KNOWN = 1000
"""Words a :class:`ProperWords` remembers its answer for."""


class ProperWords:
    """:func:`proper_words` of some texts (their union), asked word by word: ``w in
    proper`` and ``bool(proper)`` answer as the set would, each word looked up in the
    texts when first asked (a context is asked about a few sentence openers, not about
    its hundreds of capitalized words). A text with "÷" or longer than
    ``_MAX_FAST_CHARS`` is scanned whole, as :func:`proper_words` does."""

    __slots__ = ("_any", "_known", "_sets", "_texts")

    def __init__(self, texts: Sequence[str]) -> None:
        self._texts = [t for t in texts if "\u00f7" not in t and len(t) <= _MAX_FAST_CHARS]
        self._sets = [proper_words(t) for t in texts
                      if "\u00f7" in t or len(t) > _MAX_FAST_CHARS]
        self._known: dict[str, bool] = {}
        self._any: bool | None = None

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str):
            return False
        got = self._known.get(word)
        if got is None:
            got = any(word in s for s in self._sets) or \
                any(_written_proper(t, word) for t in self._texts)
            # At most _MAX_KNOWN answers kept: a cached context must not grow with every
            # word some answer opens a sentence with.
            if len(self._known) < _MAX_KNOWN:
                self._known[word] = got
        return got

    def __bool__(self) -> bool:
        if self._any is None:
            self._any = any(self._sets) or any(self._has_any(t) for t in self._texts)
        return self._any

    def _has_any(self, text: str) -> bool:
        """Whether the words are not all missing: ``text``'s capitalized words looked up
        in text order until one is a name (past ``_MAX_LOOKUPS`` of them, ``text`` is
        scanned)."""
        seen: set[str] = set()
        for cap in _CAP.finditer(text):
            w = cap.group(0).lower()
            if w in seen or w in OPENERS or w in STOPWORDS:
                continue
            if len(seen) >= _MAX_LOOKUPS:
                return bool(_proper_scan(text))
            seen.add(w)
            if w in self:
                return True
        return False


def _written_proper(text: str, w: str) -> bool:
    """``w in _proper_fast(text)`` for a text without "÷", finding only ``w``: a match of
    ``_CAP`` whose lower case is ``w`` is ``w`` with a capital first letter (and, after
    its hyphen, maybe a second one), so only those spellings are looked for; then, as in
    :func:`_proper_fast`, no lower-case word ``w`` may start at any of its occurrences."""
    if w in OPENERS or w in STOPWORDS or w[:1] not in _LOWER_ASCII:
        return False
    first = w[0].upper() + w[1:]
    spellings = [first]
    hyphen = w.find("-")
    if 0 <= hyphen < len(w) - 1 and w[hyphen + 1] in _LOWER_ASCII:
        spellings.append(first[:hyphen + 1] + w[hyphen + 1].upper() + w[hyphen + 2:])
    if not any(_found_at(text, s, _CAP) for s in spellings):
        return False
    if len(w) < 3 or "-" in w:  # never a match of the second branch
        return True
    return not _found_at(text, w, _LOW_AT)


def _found_at(text: str, word: str, pattern: re.Pattern[str]) -> bool:
    """Whether ``pattern`` matches exactly ``word`` at one of its occurrences in ``text``
    (the pattern's look-behind sees the character before it)."""
    p = text.find(word)
    while p >= 0:
        m = pattern.match(text, p)
        if m is not None and m.end() - p == len(word):
            return True
        p = text.find(word, p + 1)
    return False


def names_in(sentence: str, entities: Sequence[Span],
             proper: frozenset[str] | ProperWords) -> list[Span]:
    """``entities`` (the sentence's entity candidates) plus an opening capitalized word
    that the context writes as a name (``proper``) or that names a place."""
    m = _FIRST.match(sentence)
    if m is None:
        return list(entities)
    word = m.group(1)
    start = m.start(1)
    if any(e.start <= start < e.end for e in entities):
        return list(entities)
    base = word.split("’")[0].split("'")[0]
    low = base.lower()
    if low not in proper and low not in PLACES:
        return list(entities)
    # Extend over following capitalized words ("Lyon Part-Dieu").
    end = start + len(base)
    return [Span(sentence[start:end], start, end), *entities]


@lru_cache(maxsize=1 << 13)
def name_key(text: str) -> frozenset[str]:
    """The comparable words of a mention: lower case, no possessive, initial or article."""
    words = tokenize(re.sub(r"['’]s\b", "", text))  # "SolarGrid" -> solar, grid
    return frozenset(w for w in words if len(w) > 1 and w not in _KEY_DROP)


def same_name(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two mention keys may name the same thing (one's words within the other's)."""
    return bool(a) and bool(b) and (a <= b or b <= a)


def candidates(sentence: str, proper: frozenset[str]) -> list[Span]:
    """:func:`names_in` over :func:`entity_candidates` of ``sentence``."""
    return names_in(sentence, entity_candidates(sentence), proper)


_TIME_NAMES = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april "
    "may june july august september october november december christmas easter "
    "spring summer autumn winter".split())


def name_class(key: frozenset[str]) -> str:
    """``time`` for weekday, month and season names, else ``name``: only names of one
    class can stand in each other's place."""
    return "time" if key and key <= _TIME_NAMES else "name"


def _initials(short: str) -> str | None:
    """The letters of ``short`` when it is shaped like an acronym ("C.P.S." -> "CPS")."""
    s = short.strip(".").replace(".", "")
    return s if 2 <= len(s) <= 6 and s.isupper() else None


def acronym_shaped(short: str) -> bool:
    """Whether ``short`` may be an acronym of something: ``acronym_of(short, long)`` is
    ``False`` for every ``long`` when this is (a name compared with many asks it once)."""
    return _initials(short) is not None


def acronym_of(short: str, long: str) -> bool:
    """Whether ``short`` is the initials of ``long`` ("CPS", "Child Protective Services")."""
    s = _initials(short)
    if s is None:
        return False
    words = [w for w in re.findall(r"[^\W_]+", long) if w.lower() not in _KEY_DROP]
    return "".join(w[0] for w in words).upper() == s
