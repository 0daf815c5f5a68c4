"""A reply that *corrects* the conversation: "Actually, Neverwhere is a romance novel."

In a knowledge-grounded conversation the user (or an earlier turn) has said something,
and a reply that sets it right — "Actually, …", "In fact, …", "No, actually …",
"… is actually a cookbook" — asserts the contrary of what the conversation holds. That
is the reply's strongest kind of claim: it overrides a statement on the table, so it
needs the knowledge behind it. A faithful correction restates what the knowledge says
("Actually, yes! He starred in The Divide." over "Michael Biehn starred in The
Divide"); a fabricated one brings in what the knowledge lacks ("Actually, it was Fran
Lebowitz who appeared in both").

:func:`correction_marker` finds the marker in one sentence; the grounding layer
(``gateway.layers._grounding_correction``) decides, from that sentence's own check,
whether what it asserts is backed. Markers that do not correct are left out: "I
actually don't know" is about the speaker (the layer skips first-person chit-chat),
"Love Actually" is a title (a capitalised "Actually" after a capitalised word).
"""

from __future__ import annotations

import re

__all__ = ["correction_marker", "may_correct"]

MAX_SENTENCE = 600
"""Only this many characters of a sentence are read (bounded work on hostile input)."""

_MARKER = re.compile(
    r"\b(?:actually|in fact|in reality|as a matter of fact|contrary to)\b", re.IGNORECASE)
_KEYS = ("ctual", "fact", "realit", "contrary")
"""Substrings of every ``_MARKER`` form: a cheap test before the pattern (most sentences)."""
_TITLE_BEFORE = re.compile(r"[A-Z][\w'’-]*[\"”]?\s+$")
"""A capitalised word right before a capitalised marker: "Love Actually" is a name."""


def may_correct(text: str) -> bool:
    """``False`` when no sentence of ``text`` can carry a marker (most answers): one
    look at the whole answer before any sentence is read."""
    low = text.lower()
    return any(k in low for k in _KEYS)


def correction_marker(sentence: str) -> bool:
    """Whether ``sentence`` carries a correction marker ("actually", "in fact", "in
    reality", "as a matter of fact", "contrary to"), not as part of a title."""
    text = sentence[:MAX_SENTENCE]
    low = text.lower()
    if not any(k in low for k in _KEYS):
        return False
    for m in _MARKER.finditer(text):
        if m.group(0)[0].isupper() and m.start() > 0 and _TITLE_BEFORE.search(text[: m.start()]):
            continue  # "Love Actually", "In Fact" inside a name
        return True
    return False
