"""What a negation negates: the word a negation cue governs in its clause.

"will **not return**", "**no brakes**", "there was **nothing** that could have
**stopped** Cook switching", "it **isn't available**": a cue negates the first content
word after it (auxiliaries, articles and other function words skipped). A clause that
does not use that word does not restate the negated proposition, so it cannot assert
its opposite: "Punters reacted to the festival's *cancellation*" paraphrases "the
festival will not return", and "Cook was set on switching" paraphrases "nothing could
have stopped Cook switching" — neither is a negation flip.

Pure functions over a clause's text; bounded by its length.
"""

from __future__ import annotations

import re

from gateway.text.stem import stem
from gateway.text.tokens import NUMBER_WORDS, STOPWORDS, negation_cues

__all__ = ["governed_stems", "scope_shared"]

_WORD = re.compile(r"[^\W_]+")
MAX_SKIP = 6
"""Function words skipped after a cue before giving up (a cue at a clause's end, or one
followed only by names and numbers, governs nothing we can read)."""


def governed_stems(clause: str) -> frozenset[str]:
    """Stems of the first content word after each negation cue in ``clause`` (lower-case
    words only: a name after "not" is what the clause talks about, not its predicate)."""
    out: set[str] = set()
    for m in negation_cues(clause):
        skipped = 0
        for w in _WORD.finditer(clause, m.end()):
            word = w.group(0)
            low = word.lower()
            if low in STOPWORDS or low in NUMBER_WORDS or len(low) < 2 or low[0].isdigit() \
                    or low in ("t", "s"):
                skipped += 1
                if skipped > MAX_SKIP:
                    break
                continue
            if word[0].isupper():
                break
            out.add(stem(low))
            break
    return frozenset(out)


def scope_shared(negated_clause: str, other_stems: frozenset[str]) -> bool:
    """Whether the other clause (its stems) uses a word ``negated_clause``'s negation
    governs; ``True`` when no governed word can be read (the caller decides as before)."""
    gov = governed_stems(negated_clause)
    return not gov or not gov.isdisjoint(other_stems)
