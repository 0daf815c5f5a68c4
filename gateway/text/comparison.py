"""Which came first? An answer to a date comparison, checked against the context's years.

"Who was born first, Kenneth Webb or Victor Fleming?" with a context that gives
"Kenneth S. Webb (October 16, 1892 – …)" and "Victor Lonzo Fleming (February 23, 1889 –
…)": the answer "Kenneth Webb was born first." uses only words the context has, so no
word, value or name check sees anything wrong — the error is the comparison. This
module reads such a question (two alternatives after a comma or colon, "A or B?", and
an unambiguous direction: *first, earlier, older, before* or *more recent, newer,
younger, later*), finds the year the context states for each alternative (the first
year of the context sentence that names it near its start — a biography's birth
year, a film's release year, a university's founding year), sees which alternative
the answer picks, and says when it picks the one the years rule out.

It stays silent when anything is unclear: no year for one side, equal years, an
answer that names neither or both without the question's own direction word, or one
that hedges or rejects ("both", "neither", "not", "same"). Bounded: the question's
last ``MAX_QUESTION`` characters, the first ``MAX_SENTENCES`` context sentences.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from itertools import islice

__all__ = ["comparison_conflict"]

MAX_QUESTION = 400
MAX_SENTENCES = 200
MENTION_CHARS = 120
"""An alternative is the subject of a context sentence that names it this near its start."""
MIN_OVERLAP = 0.5
"""Share of an alternative's words a mention must have."""

_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_EARLY = re.compile(r"\b(first|earlier|earliest|older|oldest|before)\b", re.IGNORECASE)
_LATE = re.compile(r"\b(more recent|most recent|newer|newest|younger|youngest|later|latest)\b",
                   re.IGNORECASE)
_HEDGE = re.compile(r"\b(not|no|both|same|neither|either|unclear|unknown)\b|n't\b",
                    re.IGNORECASE)
_ITEM = r"(?:[^,:?]|(?<=\d),(?=\d))+?"   # "20,000 Leagues Under the Sea" is one item
_ALTERNATIVES = re.compile(rf"(?:(?<!\d),|:)\s*({_ITEM})\s*,?\s+or\s+({_ITEM})\s*\?\s*$")
_SPLIT = re.compile(r"(?<=[.!?])\s*(?=[A-Z\"'])")
_WORD = re.compile(r"[^\W_]+")
_STOP = frozenset({"the", "a", "an", "of", "and", "in", "on", "for", "to", "by", "de", "la",
                   "le"})


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def _direction(text: str) -> str | None:
    early, late = bool(_EARLY.search(text)), bool(_LATE.search(text))
    return None if early == late else ("early" if early else "late")


def _year_of(name: str, sentences: Sequence[str]) -> int | None:
    wanted = set(_words(name))
    if not wanted:
        return None
    best: tuple[float, int] | None = None
    for sentence in sentences:
        hit = len(wanted & set(_words(sentence[:MENTION_CHARS]))) / len(wanted)
        if hit < MIN_OVERLAP:
            continue
        m = _YEAR.search(sentence)
        if m and (best is None or hit > best[0]):
            best = (hit, int(m.group(1)))
    return best[1] if best else None


def _mention(answer: list[str], name: str) -> int | None:
    """Position of the alternative's first word in the answer, if the answer names it."""
    wanted = set(_words(name))
    at = [i for i, w in enumerate(answer) if w in wanted]
    if not wanted or len(wanted & set(answer)) / len(wanted) < MIN_OVERLAP:
        return None
    return min(at)


def _picked(answer: str, first: str, second: str, direction: str) -> int | None:
    """0 or 1: the alternative the answer picks; None when it is unclear."""
    if _HEDGE.search(answer):
        return None
    words = _words(answer)
    a, b = _mention(words, first), _mention(words, second)
    if a is None and b is None:
        return None
    if a is not None and b is not None:
        # "B was created before A": the first named is picked only when the answer
        # repeats the question's direction, never the opposite one.
        if _direction(answer) != direction:
            return None
        return 0 if a < b else 1
    return 0 if a is not None else 1


def comparison_conflict(question: str, context_sentences: Callable[[], Iterable[str]],
                        answer: str) -> str | None:
    """Why the answer picks the wrong alternative of the question's date comparison, or
    None (no such question, or nothing certain). ``context_sentences`` is called only
    when the question is a date comparison (most requests cost one substring test)."""
    q = question.strip()[-MAX_QUESTION:]
    if " or " not in q or not q.endswith("?"):
        return None
    m = _ALTERNATIVES.search(q)
    if m is None:
        return None
    direction = _direction(q[: m.start()])
    if direction is None:
        return None
    first, second = m.group(1).strip(" \"'"), m.group(2).strip(" \"'")
    sentences = [part for s in islice(context_sentences(), MAX_SENTENCES)
                 for part in _SPLIT.split(s) if part.strip()]
    years = _year_of(first, sentences), _year_of(second, sentences)
    if years[0] is None or years[1] is None or years[0] == years[1]:
        return None
    picked = _picked(answer, first, second, direction)
    if picked is None:
        return None
    right = 0 if (years[0] < years[1]) == (direction == "early") else 1
    if picked == right:
        return None
    names = (first, second)
    return (f"picks {names[picked]} ({years[picked]}) over {names[right]} "
            f"({years[right]}): the context's years say otherwise")
