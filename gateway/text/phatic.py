"""Phatic talk: the friendly formulas of a conversation, which state nothing checkable.

"Glad it helped!", "You're welcome!", "Take care, and feel better soon.", "Sounds good.
Happy shopping!", "Cheers! Safe travels." — a reply may carry them beside (or instead
of) an answer. Their words are no claims about the context, so the grounding layer
must not count them as unsupported. :data:`PHATIC_WORDS` is a small list of general
conversational English (greetings, thanks, wishes, sympathy, agreement), not tuned to
any text; :func:`is_phatic` says whether a fact-free sentence is mostly made of them.
Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["PHATIC_WORDS", "is_phatic"]

PHATIC_WORDS: frozenset[str] = frozenset("""
glad happy happily pleased delighted welcome thanks thank thankful grateful appreciate
appreciated cheers luck lucky enjoy enjoyed enjoying enjoyable care careful hope hoping
hopefully wish wishes sorry apologies apologize apologise pleasure anytime bye goodbye
farewell congratulations congrats safe travels travel trip journey feel feeling better
soon nice day days evening morning afternoon night weekend week great idea sounds sound
help helped helps helping helpful problem problems worries worry fine perfect awesome
wonderful lovely fantastic excellent brilliant cool fun amazing terrific super shopping
hear heard glad chat chatting talk talking question questions ask asking reach contact
again anything else let know remember stay healthy well rest recover recovery hang
luckily kind kindly appreciate deal alright right absolutely gladly certainly welcome
""".split())


def is_phatic(words: Iterable[str]) -> bool:
    """Whether most content words of a fact-free sentence are conversational formulas
    (at least half of them, and at least one)."""
    if isinstance(words, (set, frozenset)):  # distinct words: the count in C
        hits, n = len(PHATIC_WORDS.intersection(words)), len(words)
    else:
        ws = list(words)
        hits, n = sum(1 for w in ws if w in PHATIC_WORDS), len(ws)
    if not n:
        return False
    return hits >= 1 and 2 * hits >= n
