"""Attribution prefixes in a summary: "Errol Louis: the magazine isn't holding …".

News summaries (CNN's story highlights, opinion pieces) open a sentence with the
name of the person whose view it reports, or with a label, and a colon: "*Akhil Amar:*
Lincoln's two biggest legacies…", "*David Wheeler:* Corinthian … will shut down",
"*Report:* police ignored…", "*READ:* …". The prefix says who speaks, not what
happened; an opinion writer's name is often nowhere in the article body, so read as a
claim it counts as an unsupported name in a faithful summary. :func:`strip_attributions`
drops such prefixes so the grounding layer checks what follows them.

A prefix is one to four capitalized words (initials, hyphens and apostrophes allowed)
at the start of a sentence, then a colon and a space, then the rest of the sentence.
Nothing else is touched: a colon after a lower-case word ("the reason: …"), after a
number ("6:30") or after five or more words is kept. The grounding layer applies it
to ``document``-shaped requests only (a summary of a long text), where this
convention lives (``GroundingConfig.attribution_prefixes``).
"""

from __future__ import annotations

import re

__all__ = ["strip_attributions"]

MAX_WORDS = 4
"""A prefix has at most this many words (a person's name or a short label)."""

_WORD = r"[A-Z][\w'’.\-]*"
_PREFIX = re.compile(
    rf"(?:(?<=^)|(?<=[.!?]\s)|(?<=[.!?]['\"’”]\s)|(?<=\n))"
    rf"[ \t]*({_WORD}(?:[ \t]{_WORD}){{0,{MAX_WORDS - 1}}}):[ \t]+(?=\S)")


def strip_attributions(text: str) -> str:
    """``text`` without the attribution prefixes that open its sentences (bounded: one
    regular-expression pass, linear in the text)."""
    if ":" not in text:
        return text
    return _PREFIX.sub("", text)
