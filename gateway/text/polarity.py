"""Polarity: which parts of a sentence are negated, and which "no"/"not" are not.

A negation cue says the opposite of a proposition only inside its own clause, and not
every "no" or "not" is one:

- :func:`leading_particle` — an answer opening with "Yes," / "No," / "Not really:" /
  "He didn't:" replies to the user's question; the particle is a stance on the
  question's premise (:mod:`gateway.text.premise`), not a negation of the rest;
- :func:`contrast_spans` — "600 V, *not 1000 V*", "only for dishwasher models, *not
  washing machines*", "*rather than* ten": a rejected alternative states nothing, its
  "not" negates nothing and its values and names are no claims;
- :func:`clause_polarity` — the clauses of a sentence (:func:`gateway.text.frames.clauses`)
  with their content stems and whether each asserts a negation (hedged "may not" does
  not), so "It has two USB-C ports, but no HDMI port" negates the second clause only;
- :func:`prefix_negated` — "unbraked" is "not braked", "non-refundable" "not
  refundable": a word on one side that the other side has with a negating prefix
  flips the proposition.

Pure functions; patterns compiled at import.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from functools import lru_cache

from gateway.text.antonyms import (
    direction_sides,
    direction_words,
    directions,
    may_have_direction,
    may_oppose,
)
from gateway.text.frames import clauses
from gateway.text.stem import stem
from gateway.text.tokens import (
    NON_CONTENT,
    NUMBER_WORDS,
    STOPWORDS,
    has_camel_glue,
    negation_cues,
)

__all__ = ["Clause", "FlipCues", "clause_polarity", "contrast_spans", "flip_by_prefix",
           "flip_cues", "leading_particle", "may_flip", "polar", "prefix_negated"]

_YES = re.compile(
    r"^[\s\"“'‘(]*(?:yes|yeah|yep|yup|correct|that(?:['’]s|\s+is)\s+(?:right|correct|true)|"
    r"right|indeed|sure|absolutely|exactly|true|of\s+course|certainly|definitely)\b"
    r"\s*(?:[,.!:;—–-]+\s*|$)", re.IGNORECASE)
_NO = re.compile(
    r"^[\s\"“'‘(]*(?:no|nope|nah|not\s+(?:really|quite|exactly|at\s+all|necessarily)|"
    r"incorrect|that(?:['’]s|\s+is)\s+(?:not\s+(?:right|correct|true)|incorrect|wrong)|"
    r"(?:unfortunately|sadly|actually|afraid)\s*,?\s*(?:not|no)|"
    r"i['’]m\s+afraid\s+not|not\s+so)\b\s*(?:[,.!:;—–-]+\s*|$)", re.IGNORECASE)
# "He didn't:", "It doesn't —", "They weren't;" — a correction's opening clause.
_CORRECTION = re.compile(
    r"^[\s\"“'‘(]*(?:it|he|she|they|this|that|you|we|i|there)\s+"
    r"(?:did|does|do|is|was|are|were|has|have|had|can|could|will|would|should|must)"
    r"(?:\s*n[’']t|\s+not)(?:\s+\w+){0,2}\s*(?:[:;—–]|\s-\s|,\s*(?=(?:it|he|she|they|the)\b))\s*",
    re.IGNORECASE)
# Rejected alternatives: ", not 1000 V", ", not washing machines", "rather than X",
# "instead of X", "(not X)".
_CONTRAST = re.compile(
    r",[’'\"”]?\s*(?:and\s+|but\s+)?not\s+(?!only\b|just\b|even\b|all\b|every\b|always\b|to\b|be\b)"
    r"[^,;.!?:]+|\(\s*not\s+[^)]*\)|\b(?:rather\s+than|instead\s+of)\s+[^,;.!?:]+",
    re.IGNORECASE)
_HEDGE_BEFORE = re.compile(r"\b(?:may|might|could)\s+$", re.IGNORECASE)
_NEG_PREFIXES = ("non", "un", "in", "im", "il", "ir", "dis")
_NEG_SUFFIX_OK = ("ed", "able", "ible", "ful", "ing", "al", "ive", "ent", "ant", "ary")


_PARTICLE_PREFIX = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\"'("
"""The ASCII characters of the patterns' opening ``[\\s"“'‘(]*``."""
_PARTICLE_STARTS = (
    "yes", "yeah", "yep", "yup", "correct", "that", "right", "indeed", "sure", "absolutely",
    "exactly", "true", "of", "certainly", "definitely", "no", "nah", "incorrect",
    "unfortunately", "sadly", "actually", "afraid", "i", "it", "he", "she", "they", "this",
    "you", "we", "there")
"""How every alternative of ``_YES``, ``_NO`` and ``_CORRECTION`` starts."""


def leading_particle(text: str) -> tuple[str | None, int]:
    """``("yes" | "no" | None, offset where the claim starts)`` of an answer sentence."""
    if text.isascii() and not text.lstrip(_PARTICLE_PREFIX)[:13].lower().startswith(
            _PARTICLE_STARTS):
        return None, 0  # (ASCII: case is ignored letter by letter) most sentences
    for stance, pat in (("no", _NO), ("no", _CORRECTION), ("yes", _YES)):
        m = pat.match(text)
        if m is not None:
            return stance, m.end()
    return None, 0


def contrast_spans(text: str) -> list[tuple[int, int]]:
    """Spans of rejected alternatives (``", not 1000 V"``), from their "not"."""
    low = text.lower()
    if "not" not in low and "rather" not in low and "instead" not in low:
        return []  # most sentences: the pattern cannot match
    out = []
    for m in _CONTRAST.finditer(text):
        s = m.start()
        while s < m.end() and text[s] in ", ":
            s += 1
        out.append((s, m.end()))
    return out


@dataclass(slots=True)
class Clause:
    start: int
    end: int
    stems: frozenset[str]
    """Content-word stems (numbers, stopwords left out)."""
    plain: frozenset[str]
    """The stems of its words written in lower case (names left out)."""
    words: frozenset[str]
    """Its content words as written (lower case), for prefix negation."""
    negated: bool
    """It asserts a negation cue (hedged "may not" and rejected alternatives aside)."""
    neg_stems: frozenset[str]
    """Stems negated by a prefix: "unbraked" -> "brak", "non-refundable" -> "refund"."""
    dirs: frozenset[tuple[str, int]] = frozenset()
    """Which side of each opposition it takes (:func:`gateway.text.antonyms.directions`)."""
    dir_stems: frozenset[str] = frozenset()
    """Stems of its direction words (a reversed direction is no missing word)."""


_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")


def _content(tokens: list[str]) -> list[str]:
    return [t for t in tokens if t not in STOPWORDS and t not in NUMBER_WORDS and len(t) > 1
            and not t[0].isdigit()]


def clause_polarity(text: str, skip: list[tuple[int, int]] | None = None,
                    start: int = 0) -> list[Clause]:
    """The clauses of ``text[start:]`` with their stems and asserted negation; cues
    inside ``skip`` spans (contrasts) do not count."""
    if skip or not text.isascii() or has_camel_glue(text):
        return _clause_polarity_plain(text, skip or [], start)
    # (Most sentences: ASCII, no rejected alternative, no glued "wordWord".) Each clause's
    # words read by one scan of its own span, not one scan of the sentence and a bisect
    # per clause; the same clauses as the plain form (tests/text/test_clause_polarity_fast.py).
    cues = [m.start() for m in negation_cues(text)
            if m.start() >= start
            and not _HEDGE_BEFORE.search(text, max(0, m.start() - 12), m.start())]
    lowtext = text.lower()  # (ASCII: the same length, the same word characters)
    out = []
    for a, b in clauses(text[start:]):
        a += start
        b += start
        low = lowtext[a:b].translate(_ASCII_GAPS).split()  # (_ASCII_PART's words)
        if a > start and low and lowtext[a - 1].isalnum() and lowtext[a].isalnum():
            del low[0]  # the tail of a word a cut ends in (", orange"): the plain form's
            # bisect leaves that word out, it starts before the clause
            drop = 1
        else:
            drop = 0
        wset = frozenset([w for w in low if w not in NON_CONTENT and len(w) > 1
                          and not w[0].isdigit()])
        if not wset:
            continue
        stems = dict(zip(wset, map(stem, wset), strict=True))
        stem_set = frozenset(stems.values())
        if _ASCII_UPPER.search(text, a, b) is None:
            plain = stem_set  # written as read: every content word is in lower case
        else:
            raw = text[a:b].translate(_ASCII_GAPS).split()
            plain = frozenset([stems[w] for w in raw[drop:] if w in stems])
        neg = _negated_stems(low, wset)
        dir_words = wset & _DIRECTION_WORDS
        has_dir = bool(dir_words) or not _DIR_OR_UPDOWN.isdisjoint(low)
        c = bisect_left(cues, a)
        out.append(Clause(a, b, stem_set, plain, wset,
                          c < len(cues) and cues[c] < b, neg,
                          directions(text[a:b]) if has_dir else frozenset(),
                          frozenset([stems[w] for w in dir_words])))
    return out



def _negated_stems(low: list[str], wset: frozenset[str]) -> frozenset[str]:
    """The stems a clause's words negate: the word after "non", and the base of a
    prefix-negated word ("unsafe" → "safe")."""
    neg: set[str] = set()
    if "non" in low:
        for i in range(len(low) - 1):
            if low[i] == "non":
                neg.add(stem(low[i + 1]))
    for w in wset:
        if w[0] in "uindI" and len(w) > 5 and w.endswith(_NEG_SUFFIX_OK):
            base = _prefix_base(w)
            if base is not None:
                neg.add(base)
    return frozenset(neg)

def _clause_polarity_plain(text: str, skip: list[tuple[int, int]],
                           start: int) -> list[Clause]:
    """:func:`clause_polarity` read from one word scan of the whole sentence (the reference
    of its fast form; any sentence, contrasts and glued words included)."""
    cues = [m.start() for m in negation_cues(text)
            if m.start() >= start
            and not _HEDGE_BEFORE.search(text, max(0, m.start() - 12), m.start())
            and not any(a <= m.start() < b for a, b in skip)]
    # Words once for the sentence (letters and digits; "-" and "'" split, as tokenize):
    # (offset, as written).
    found = [(m.start(), m.group(0)) for m in _PART.finditer(text, start)]
    if skip:
        found = [(o, w) for o, w in found if not any(a <= o < b for a, b in skip)]
    if has_camel_glue(text):  # "SolarGrid" is two words, as tokenize() has it
        split: list[tuple[int, str]] = []
        for off, w in found:
            cuts = [0, *(p.start() for p in _GLUE.finditer(w)), len(w)]
            split += [(off + x, w[x:y]) for x, y in zip(cuts, cuts[1:], strict=False) if y > x]
        found = split
    out = []
    # The words' offsets apart, for bisecting each clause's words out; and their lower case.
    offsets = [o for o, _ in found]
    written = [w for _, w in found]
    lowered = [w.lower() for w in written]
    k = 0
    for a, b in clauses(text[start:]):
        a += start
        b += start
        k = bisect_left(offsets, a, k)
        j = bisect_left(offsets, b, k)
        raw = written[k:j]
        low = lowered[k:j]
        k = j
        words = [w for w in low if w not in STOPWORDS and w not in NUMBER_WORDS
                 and len(w) > 1 and not w[0].isdigit()]
        if not words:
            continue
        wset = frozenset(words)
        stems = {w: stem(w) for w in wset}
        plain = frozenset(stems[w] for w in raw if w in stems)  # lower-case as written
        neg = _negated_stems(low, wset)
        dir_words = wset & _DIRECTION_WORDS  # (is_direction_word, as one set operation)
        has_dir = bool(dir_words) or not _DIR_OR_UPDOWN.isdisjoint(low)
        c = bisect_left(cues, a)  # (cues ascend: a cue in [a, b) is the first from a)
        out.append(Clause(a, b, frozenset(stems.values()), plain, wset,
                          c < len(cues) and cues[c] < b, neg,
                          directions(_blank(text, a, b, skip)) if has_dir else frozenset(),
                          frozenset(stems[w] for w in dir_words)))
    return out


_PART = re.compile(r"[^\W_]+")
_ASCII_PART = re.compile(r"[a-zA-Z0-9]+")
"""``_PART`` in ASCII text: a range test per character, not a Unicode category look-up."""
_ASCII_UPPER = re.compile(r"[A-Z]")
_ASCII_GAPS = {c: " " for c in range(128) if not chr(c).isalnum()}
"""Every ASCII character but a letter or digit, to a space: an ASCII text translated and
split gives ``_ASCII_PART.findall``'s words without a regex step per character
(tests/text/test_clause_polarity_fast.py)."""
_DIRECTION_WORDS = direction_words()
_DIR_OR_UPDOWN = _DIRECTION_WORDS | {"up", "down"}
"""A clause with none of these words takes no direction (a set test, not a word loop)."""
_GLUE = re.compile(r"(?<=[a-z])(?=[A-Z][a-z])")


def _blank(text: str, a: int, b: int, skip: list[tuple[int, int]]) -> str:
    piece = text[a:b]
    for s, e in skip:  # a rejected alternative's words are no part of the claim
        if a <= s < b:
            piece = piece[: s - a] + " " * (min(b, e) - s) + piece[min(b, e) - a:]
    return piece


# The first letter read by a case-sensitive class (the engine's fast scan skips to those
# letters; a look-ahead gets none), the rest case-insensitive; "(?<!\w.)" is the "\b"
# before that letter. The same matches as the look-ahead form (tests/text/
# test_answer_pass_fast.py).
_POLAR = re.compile(r"[ncwuNCWU](?i:(?<!\w.)(?:(?<=n)(?:ot|o|ever|one|obody|othing|either|or|on)\b"
                    r"|(?<=c)annot\b|(?<=w)ithout\b|(?<=u)n\w{4,}(?:ed|able|ible)\b)"
                    r"|(?<=n)[’']t\b)")


def polar(text: str) -> bool:
    """Whether ``text`` may take a polarity or a direction at all (a negation cue, a
    "non-"/"un…" word, a direction word): a cheap test before the clause analysis."""
    return _POLAR.search(text) is not None or (may_have_direction(text)
                                               and bool(directions(text)))


@lru_cache(maxsize=1 << 14)
def _prefix_base(word: str) -> str | None:
    """The stem a negating prefix applies to ("unbraked" -> "brak"), or ``None``."""
    for p in _NEG_PREFIXES:
        if word.startswith(p) and len(word) - len(p) >= 4 and word.endswith(_NEG_SUFFIX_OK):
            return stem(word[len(p):])
    return None


def flip_by_prefix(a: Clause, c: Clause) -> bool:
    """A word one clause has plainly and the other with a negating prefix ("braked" /
    "unbraked", "refundable" / "non-refundable"): one more negation on the prefixed side."""
    one = bool((c.neg_stems & a.stems) - a.neg_stems)
    other = bool((a.neg_stems & c.stems) - c.neg_stems)
    return one != other


def prefix_negated(word: str, other_stems: frozenset[str]) -> bool:
    """Whether ``word`` is a prefix negation of one of ``other_stems``."""
    base = _prefix_base(word)
    return base is not None and base in other_stems


_NEG_TOKENS = frozenset(
    "not no never none nobody nothing neither nor cannot without t fail fails failed".split())
"""The tokens of every negation cue (``n't`` tokenizes as "…n" and "t"; "failed to" as "failed")."""


@dataclass(slots=True)
class FlipCues:
    """What a whole sentence could flip a clause with, read from its tokens: a superset of
    what any of its clauses has, so two sentences whose cues cannot flip
    (:func:`may_flip`) need no clause analysis at all."""

    neg: bool
    """Some negation cue (hedged, rejected or not)."""
    prefixed: frozenset[str]
    """Stems negated by a prefix anywhere ("unbraked" -> "brak", "non refundable")."""
    sides: frozenset[tuple[str, int]]
    """:func:`gateway.text.antonyms.direction_sides` of its words."""


def flip_cues(words: Set[str], tokens: Callable[[], Sequence[str]]) -> FlipCues:
    """The :class:`FlipCues` of a sentence from its set of tokens; ``tokens`` gives them
    in order, asked for only when "non" is among them ("non refundable")."""
    # (What _prefix_base needs first: a prefix's letter, four letters after the shortest
    # prefix, a suffix it accepts — string tests before the cached call.)
    prefixed = {b for w in words if w[0] in "uind" and len(w) > 5
                and w.endswith(_NEG_SUFFIX_OK) and (b := _prefix_base(w)) is not None}
    if "non" in words:
        seq = tokens()
        prefixed.update(stem(seq[i + 1]) for i in range(len(seq) - 1) if seq[i] == "non")
    return FlipCues(not _NEG_TOKENS.isdisjoint(words), frozenset(prefixed),
                    direction_sides(words))


def may_flip(a: FlipCues, c: FlipCues, a_has: Callable[[frozenset[str]], bool],
             c_has: Callable[[frozenset[str]], bool]) -> bool:
    """Whether some clause of one sentence can flip some clause of the other: a negation
    on either side, a word one side negates by prefix that the other has (``a_has`` /
    ``c_has``: whether that side has any of these stems, asked only then), or opposite
    sides of a direction. ``False`` is certain; ``True`` asks for the clause analysis."""
    if a.neg or c.neg or (a.sides and c.sides and may_oppose(a.sides, c.sides)):
        return True  # (most sentences take no direction: no call then)
    return bool((a.prefixed and c_has(a.prefixed)) or (c.prefixed and a_has(c.prefixed)))
