"""An answer that does not fill the slot its question asks for: a vague amount, or no
year for "in what year".

"Who has recorded more albums, Dennis Agajanian or Mike Connors?" — "Mike Connors has
recorded a few albums."; "The father of Pietro de' Medici was the Duke of Florence
between what years?" — "… for many years."; "In what year was the writer of 'I'll Try
Something New' born?" — "Smokey Robinson was born in February." Every word of these
answers may be in the context; what is wrong is that the asked slot is filled with a
vague amount the context never states ("a few", "many", "numerous"), or that a question
asking for a year gets none. A faithful answer to a question on a passage gives what
the passage says: its count, its year — or the passage's own vague word.

:func:`vague_answer` reads a question on a passage (a wh-question, question mark) and
its answer; silent when the answer enumerates what its vague word counts ("several
tools: a hammer, a saw and pliers"), when it negates or says the sources do not tell (those are
:func:`gateway.layers._grounding_novelty.denies_the_asked`'s), and when the context or
the question uses the vague word itself. Bounded: the question's last
``MAX_QUESTION`` characters; the context is read only when the answer has a vague word.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["vague_answer"]

MAX_QUESTION = 400

_WH = re.compile(r"\b(what|which|who|whom|whose|when|where|how)\b", re.IGNORECASE)
_VAGUE = re.compile(r"\b(many|several|numerous|a few|various|multiple|countless|"
                    r"a number of|a couple of)\b", re.IGNORECASE)
_KEYS = ("many", "several", "numerous", "few", "various", "multiple", "countless",
         "number of", "couple of")
"""Substrings of every ``_VAGUE`` word: a cheap test before the pattern (most answers)."""
_LISTED = re.compile(r"\b(including|includes|include|such as|like|for example|e\.g)\b|:|"
                     r",[^,.;]+\band\b", re.IGNORECASE)
"""After the vague word: the answer enumerates what it counts ("several tools: a hammer,
a saw and pliers") — a summary of a list, not a vague amount."""
_YEAR_ASKED = re.compile(r"\b(?:what|which) years?\b", re.IGNORECASE)
_YEAR = re.compile(r"(?<![\d,.])(?:1[0-9]{3}|20[0-9]{2})s?(?![\d,])|'\d0s\b|\b\d0s\b")
_NEGATED = re.compile(r"\b(not|no|never|none|nobody|unknown|unclear|cannot)\b|n't\b",
                      re.IGNORECASE)


def vague_answer(question: str, context_text: Callable[[], str], answer: str) -> str | None:
    """Why ``answer`` leaves the wh-``question``'s slot unfilled — a vague amount neither
    the context nor the question uses, or no year for a question asking for one — or
    None. ``context_text`` is called only when the answer has a vague word."""
    q = question.strip()[-MAX_QUESTION:]
    year_asked = "year" in q.lower() and _YEAR_ASKED.search(q) is not None
    low = answer.lower()
    m = _VAGUE.search(answer) if any(k in low for k in _KEYS) else None
    if not (year_asked or m) or "?" not in q or not _WH.search(q) or _NEGATED.search(answer):
        return None  # the usual answer: two searches
    if year_asked and not _YEAR.search(answer):
        return "gives no year, where the question asks for one"
    if m is None:
        return None
    if _LISTED.search(answer, m.end()):
        return None
    word = m.group(1).lower()
    said = re.compile(rf"\b{re.escape(word)}\b", re.IGNORECASE)
    if said.search(q) or said.search(context_text()):
        return None
    return f"answers with a vague amount ('{word}') the context does not give"
