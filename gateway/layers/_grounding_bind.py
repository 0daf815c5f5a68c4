"""Shared pieces of the ``grounding`` layer's fact alignment: the verdict on one fact
(:class:`FactCheck`), the options (:class:`FactOptions`) and *binding* — whether a found
fact sits in the frame the context gives another filler of its kind
(:func:`bind`, :func:`best`, :mod:`gateway.text.frames`). Values and dates are checked in
:mod:`gateway.layers._grounding_facts`, names in :mod:`gateway.layers._grounding_names`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gateway.text.context_facts import ContextFacts
from gateway.text.frames import slot_similarity
from gateway.text.slots import Fact

__all__ = ["MAX_SAME", "FactCheck", "FactOptions", "aligned_facts", "best_slot", "best_same",
           "bind", "sid_of", "sim"]

MAX_SAME = 24
"""Context occurrences of one value compared by frame (the first ones)."""


@dataclass(slots=True)
class FactCheck:
    """The verdict on one value, date or name of an answer sentence."""

    text: str
    kind: str
    """``value``, ``date`` or ``name``."""
    status: str
    """``supported``, ``unsupported``, ``contradicted``; ``question`` (only the user's
    question states it, and the context does not contradict it there) and ``derived``
    (computed from context values) count as supported."""
    why: str = ""
    sim: float = 0.0
    binding: bool = False
    """Contradicted by binding (wrong event / swapped or substituted name), not by a
    value the context states in the same place."""


@dataclass(slots=True)
class FactOptions:
    """The thresholds of fact alignment (from the layer's ``GroundingConfig``)."""

    window: int = 2
    """Aligned sentences in which a value of the same kind contradicts a missing one."""
    bind_min: float = 1.5
    """Frame similarity a competing slot needs before binding can contradict."""
    bind_ratio: float = 1.4
    bind_margin: float = 0.3
    """... and it must beat ``bind_ratio`` x the best slot holding the answer's own filler
    plus ``bind_margin``."""
    substitute_min: float = 2.0
    """Frame similarity for a name the context lacks to count as substituted."""
    name_ratio: float = 2.0
    """A name is swapped only when the competing slot frames it this many times better."""
    binding: bool = True
    """Compare frames (wrong event, swapped name). Off for a long document, where it is
    weak evidence anyway: only direct conflicts in the window are looked for."""
    name_variants: bool = False
    """A name the context lacks that varies one word of an aligned context name ("Tom
    Hanks" for Tom Cruise) is substituted (:mod:`gateway.text.name_variants`)."""
    copy_coverage: float = 0.75
    """Share of the answer sentence's other words a context sentence must hold before a
    name the context lacks counts as put in place of that sentence's name."""


def sim(cf: ContextFacts, a: Fact, c: Fact, topic: Sequence[tuple[str, float]],
         tight: bool = False) -> float:
    """Frame similarity of answer slot ``a`` and context slot ``c`` (``tight``: the
    nearest words weigh more)."""
    return slot_similarity(a, c, cf.idf, topic, 0.3 if tight else 0.0)


def aligned_facts(cf: ContextFacts, aligned: Iterable[int]) -> Iterable[tuple[int, Fact]]:
    """Every slot of the ``aligned`` context sentences, with its sentence."""
    for sid in aligned:
        for c in cf.slots(sid):
            yield sid, c


def sid_of(cf: ContextFacts, c: Fact) -> int | None:
    """The context sentence of slot ``c`` (``None`` for an answer's or question's)."""
    return c.sid if c.sid >= 0 else None


def best_same(cf: ContextFacts, f: Fact, sids: Iterable[int], check: object,
               topic: Sequence[tuple[str, float]], tight: bool = False) -> float:
    """The best frame similarity of ``f`` to a slot of ``sids`` that ``check`` accepts
    (0 if none)."""
    same = 0.0
    for sid in sids:
        for c in cf.slots(sid):
            if check(c):  # type: ignore[operator]
                same = max(same, sim(cf, f, c, topic, tight))
    return same


def best_slot(cf: ContextFacts, f: Fact, cands: Iterable[Fact],
          topic: Sequence[tuple[str, float]], tight: bool = False) -> tuple[float, Fact] | None:
    """The candidate slot framed most like ``f``, with its similarity (``None``: no candidate)."""
    best: tuple[float, Fact] | None = None
    for c in cands:
        s = sim(cf, f, c, topic, tight)
        if best is None or s > best[0]:
            best = (s, c)
    return best


def bind(f: Fact, text: str, kind: str, cf: ContextFacts, competitors: Sequence[Fact],
          same_sids: Sequence[int], is_same: object, opts: FactOptions,
          topic: Sequence[tuple[str, float]]) -> FactCheck:
    """A found fact: contradicted when a slot holding another filler frames it much
    better than every slot holding this one."""
    comp = best_slot(cf, f, competitors, topic)
    if comp is None or comp[0] < opts.bind_min:
        return FactCheck(text, kind, "supported")
    same = best_same(cf, f, same_sids, is_same, topic)
    ratio = opts.bind_ratio
    if topic and sim(cf, f, comp[1], ()) < opts.bind_min:
        ratio = 2 * opts.bind_ratio  # bound through the question's words only: weaker
    if comp[0] >= ratio * same + opts.bind_margin:
        other = comp[1]
        what = (other.measure.text if other.measure is not None else
                other.date.text if other.date is not None else
                other.name.text if other.name is not None else "")
        return FactCheck(text, kind, "contradicted",
                         f"{text}: the context puts {what} there", binding=True)
    return FactCheck(text, kind, "supported")
