"""Which of the two? An answer to a choice question, checked against what the context
says of each alternative.

"Who is best known as the frontman of the California punk rock band Lagwagon, Joey
Cape or Scott Weiland?" with a context that says "Cape is best known as the frontman of
the California punk rock band Lagwagon" and "Weiland was best known as the lead singer
of the band Stone Temple Pilots": the answer "Scott Weiland was the frontman." uses only
words the context has, so no word, value or name check sees anything wrong — the error
is which alternative it picked. This module reads such a question (two alternatives "A
or B" set off by a comma, colon or dash, or ending the question), takes the question's
other content words as its *predicate* ("best known frontman California punk rock band
Lagwagon"), and for each alternative the context sentences that name it (and a
following sentence that opens with a pronoun: "He …"). When the answer picks one
alternative and the context's sentences about the *other* carry at least half of the
predicate (and at least ``MIN_SHARED`` of its words) while those about the picked one
carry at most half as many, the context gives the predicate to the other one.

It stays silent when anything is unclear: a comparison ("more", "first", "older" …:
which one wins needs numbers, :mod:`gateway.text.comparison` reads years), an answer
that names neither or both, or hedges or negates ("not", "both", "neither"), a context
sentence that names both alternatives, an alternative the context does not name, or a
predicate of fewer than ``MIN_SHARED`` words. Bounded: the question's last
``MAX_QUESTION`` characters, the first ``MAX_SENTENCES`` context sentences.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from itertools import islice

__all__ = ["choice_conflict"]

MAX_QUESTION = 400
MAX_SENTENCES = 200
MAX_ALTERNATIVE_WORDS = 8
MIN_OVERLAP = 0.5
"""Share of an alternative's words a sentence (or the answer) must have to name it."""
MIN_SHARED = 2
"""Predicate words the other alternative's sentences must carry, at least."""

_WORD = re.compile(r"[^\W_]+")
_SPLIT = re.compile(r"(?<=[.!?])\s*(?=[A-Z\"'])")
_PRONOUN = re.compile(r"^\W*(he|she|it|they|his|her|its|their)\b", re.IGNORECASE)
_SEGMENT = re.compile(r"\s*(?:,|:|--|\s[–—]\s|\?)\s*")
_COMPARATIVE = re.compile(
    r"\b(more|most|less|least|fewer|first|earlier|earliest|later|latest|older|oldest|"
    r"younger|youngest|newer|newest|before|after|longer|longest|shorter|larger|largest|"
    r"smaller|smallest|bigger|biggest|higher|highest|lower|lowest|further|farther|"
    r"closer|taller|tallest|better|best-selling|recent|\w+er than)\b", re.IGNORECASE)
_HEDGE = re.compile(r"\b(not|no|never|both|same|neither|either|nor|unclear|unknown|"
                    r"also|too|and)\b|n't\b", re.IGNORECASE)
_STOP = frozenset({
    "the", "a", "an", "of", "and", "in", "on", "for", "to", "by", "at", "from", "with",
    "as", "is", "was", "are", "were", "be", "been", "has", "have", "had", "do", "does",
    "did", "which", "who", "whom", "whose", "what", "where", "when", "that", "this",
    "these", "those", "one", "two", "or", "it", "its", "he", "she", "his", "her", "they",
    "their", "following", "de", "la", "le", "s", "known", "also", "than", "both"})


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def _stem(word: str) -> str:
    return word[:5]


def _alternatives(question: str) -> tuple[str, str, str] | None:
    """(A, B, the rest of the question) for "…, A or B, …?", "A or B, which …?",
    "Which …: A or B?"; None when no segment is exactly one short "A or B"."""
    segments = [s for s in _SEGMENT.split(question) if s.strip()]
    found = None
    for i, seg in enumerate(segments):
        parts = re.split(r"\s+or\s+", seg)
        if len(parts) != 2:
            continue
        a, b = (p.strip(" \"'") for p in parts)
        a = re.sub(r"^(?:the|either)\s+", "", a, flags=re.IGNORECASE)
        b = re.sub(r"^the\s+", "", b, flags=re.IGNORECASE)
        if not a or not b or not a[0].isupper() or not b[0].isupper():
            continue
        if len(a.split()) > MAX_ALTERNATIVE_WORDS or len(b.split()) > MAX_ALTERNATIVE_WORDS:
            continue
        if found is not None:
            return None  # two "A or B" segments: unclear
        found = (a, b, " ".join(segments[:i] + segments[i + 1:]))
    return found


def _names(words: Sequence[str], alternative: str) -> bool:
    wanted = set(_words(alternative))
    return bool(wanted) and len(wanted & set(words)) / len(wanted) >= MIN_OVERLAP


def _support(predicate: set[str], sentences: Sequence[list[str]], alternative: str,
             other: str) -> int | None:
    """The most predicate stems one context passage about ``alternative`` carries (its
    sentence and a following "He …" one); None when the context never names it alone
    or names both in one sentence."""
    best: int | None = None
    for i, words in enumerate(sentences):
        if not _names(words, alternative):
            continue
        if _names(words, other):
            return None
        block = set(map(_stem, words))
        if i + 1 < len(sentences) and sentences[i + 1] and \
                sentences[i + 1][0] == "\x00pronoun":
            block |= set(map(_stem, sentences[i + 1][1:]))
        best = max(best or 0, len(predicate & block))
    return best


def choice_conflict(question: str, context_sentences: Callable[[], Iterable[str]],
                    answer: str) -> str | None:
    """Why the answer picks the alternative of the question's choice that the context
    does not give the asked property to, or None (no such question, or nothing
    certain). ``context_sentences`` is called only for a choice question."""
    q = question.strip()[-MAX_QUESTION:]
    if " or " not in q or "?" not in q or _COMPARATIVE.search(q):
        return None
    got = _alternatives(q)
    if got is None:
        return None
    first, second, rest = got
    if _HEDGE.search(answer):
        return None
    said = _words(answer)
    picks = [_names(said, first), _names(said, second)]
    if picks[0] == picks[1]:
        return None
    picked, other = (first, second) if picks[0] else (second, first)
    alt_words = set(_words(first)) | set(_words(second))
    predicate = {_stem(w) for w in _words(rest) if w not in alt_words and not w.isdigit()}
    if len(predicate) < MIN_SHARED:
        return None
    sentences: list[list[str]] = []
    for s in islice(context_sentences(), MAX_SENTENCES):
        for part in _SPLIT.split(s):
            if not part.strip():
                continue
            words = _words(part)
            sentences.append((["\x00pronoun"] if _PRONOUN.match(part) else []) + words)
    mine = _support(predicate, sentences, picked, other)
    theirs = _support(predicate, sentences, other, picked)
    if mine is None or theirs is None:
        return None
    if theirs < max(MIN_SHARED, (len(predicate) + 1) // 2) or 2 * mine > theirs:
        return None
    return (f"picks {picked}, but the context says it of {other} "
            f"({theirs} of the question's {len(predicate)} words against {mine})")
