"""The ``grounding`` layer's check of a conversational correction the knowledge lacks.

In the ``conversation`` shape (a reply in a dialogue over a knowledge snippet) a
sentence that corrects the conversation ("Actually, …", "… is in fact …": see
``gateway.text.correction``) and asserts what the knowledge does not hold — names,
numbers or dates the context lacks, or at least ``MIN_WORDS`` content words found
neither in the context nor in the dialogue — makes the reply unsupported with at least
``correction_boost`` of evidence: a disclaimer, never a block on its own.

Why only corrections: a dialogue reply brings in words and names of its own (the shape's
evidence scale is low for that reason, so ordinary unsupported words do not flag it),
but a reply that overrides what was said claims to know better, and a faithful one gets
that from the knowledge. A correction whose content the context holds passes ("Actually,
yes! He starred in The Divide."); first-person chit-chat ("I actually don't know") is
no claim (the sentence check's ``opinion``, in the first person: a fact-free
sentence addressed to the user, "you crush it into juice", still asserts), nor is a question ("Did you know it is
actually banned in Canada?").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gateway.layers._grounding_sentence import SentenceCheck
from gateway.text.correction import MAX_SENTENCE, correction_marker

__all__ = ["MIN_WORDS", "unsupported_correction"]

MIN_WORDS = 3
"""Content words absent from the context and the dialogue that make a correction's
assertion unsupported: one or two are often a paraphrase ("the warranty *lasts* two
years from when you *bought* it", "take each one with a *meal*")."""
MARKER_WORDS = frozenset(["actually", "fact", "reality", "matter", "contrary"])
"""The markers' own words are no part of what the correction asserts."""
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|me|my|we|our|us)\b", re.IGNORECASE)
SHORT = 3
"""A marker sentence of at most this many words ("Actually, no.") corrects with the next
sentence: that one is checked too."""


def unsupported_correction(checks: Sequence[SentenceCheck]) -> SentenceCheck | None:
    """The first sentence check that corrects the conversation and asserts what the
    context lacks (see the module docstring), or ``None``."""
    for i, c in enumerate(checks):
        if c.status == "contradicted" or c.text.rstrip().endswith("?") or \
                not correction_marker(c.text):
            continue
        said = [c]
        if len(c.text.split()) <= SHORT and i + 1 < len(checks):
            said.append(checks[i + 1])
        for s in said:
            if s.opinion and _FIRST_PERSON.search(s.text[:MAX_SENTENCE]):
                continue  # about the speaker: "I actually don't know"
            words = [w for w in s.unsupported_words if w not in MARKER_WORDS]
            if s.unsupported_entities or s.unsupported_values or len(words) >= MIN_WORDS:
                return s
    return None
