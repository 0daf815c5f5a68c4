"""A summary's value that the context states otherwise *in the same unit*: no chance match.

In a long document (``document`` shape, more than ``long_context_sentences`` sentences)
a contradiction is weak evidence: the document offers a competing value, name or clause
by chance. A value contradicted by one in the same unit is the exception — "travelled for
almost *20 seconds*" where the context says "almost 11 seconds", "buried alive for
*three days*" against "five days", "*£10 million*" against "£6 million": the summary
restates the context's figure wrongly. The measures check found the competing value in
the sentences aligned with the summary's (not by binding a slot elsewhere), and it
counts the same thing in the same unit, so it is no chance match; a different unit
("two months" against "six years"), a near value ("3 million" for "3.5 million", a
rounding) or a far one ("$3,000" against "$300million": two different sums) stays weak.
It raises the answer's evidence to ``novelty_boost`` at least: a disclaimer, never a
block on its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gateway.layers._grounding_bind import FactCheck
from gateway.text.quantities import Quantity, extract_quantities

__all__ = ["same_unit_conflict"]

MIN_DIFFERENCE = 0.25
"""Relative difference below which two values may be one rounded (``|a - c| / max``)."""
MAX_RATIO = 10.0
"""Values further apart than this ("$3,000" and "$300million") are two different things
of one unit, not one figure restated wrongly."""

_STATES = re.compile(r"^(?P<a>.+?): the context states (?P<c>.+)$")
_ALPHA = re.compile(r"[^\W\d_]+")


def _one(text: str) -> Quantity | None:
    _, numbers = extract_quantities(text)
    return numbers[0] if len(numbers) == 1 else None


def _unit(q: Quantity) -> str:
    """What ``q`` counts or measures: its unit word (singular), a currency's symbol, or the
    last word of its text ("million"); "" when nothing names it."""
    if q.kind == "currency":
        return "currency:" + q.text.strip()[:1]
    if q.kind == "percent":
        return "percent"
    words: list[str] = [str(w).lower() for w in _ALPHA.findall(q.unit or q.text)]
    if not words or words[-1] == "s":
        return ""  # a bare number, "30s" (an age bracket)
    word = words[-1]
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def same_unit_conflict(facts: Sequence[FactCheck] | None) -> str | None:
    """The first contradicted value among ``facts`` that the context states otherwise in
    the same unit, in the sentences aligned with it, by at least ``MIN_DIFFERENCE``
    ("20 seconds: the context states 11 seconds"); None when there is none."""
    for f in facts or ():
        if f.kind != "value" or f.status != "contradicted" or f.binding:
            continue
        m = _STATES.match(f.why)
        if m is None or m.group("c").endswith(" there"):
            continue
        a, c = _one(m.group("a")), _one(m.group("c"))
        if a is None or c is None or a.kind != c.kind:
            continue
        unit = _unit(a)
        if not unit or unit != _unit(c):
            continue
        top, low = max(abs(a.value), abs(c.value)), min(abs(a.value), abs(c.value))
        if top and abs(a.value - c.value) / top >= MIN_DIFFERENCE and top <= MAX_RATIO * low:
            return f.why
    return None
