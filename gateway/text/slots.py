"""The slots of one sentence: each measure, date and name it states, with its frame
(:mod:`gateway.text.frames`) — :func:`sentence_slots`, for a context sentence
(:meth:`gateway.text.context_facts.ContextFacts.slots`) or an answer's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.text.frames import Filler, Slot, make_slots
from gateway.text.measures import Measure
from gateway.text.names import name_key
from gateway.text.quantities import DateRef
from gateway.text.tokens import Span

__all__ = ["Fact", "date_key", "measure_key", "sentence_slots"]


@dataclass(slots=True)
class Fact:
    """One filler of a sentence: exactly one of ``measure``, ``date``, ``name`` is set."""

    slot: Slot
    measure: Measure | None = None
    date: DateRef | None = None
    name: Span | None = None
    key: frozenset[str] = frozenset()
    """A name's :func:`~gateway.text.names.name_key`."""
    sid: int = -1
    """The context sentence it is in (-1: an answer's)."""


def measure_key(m: Measure) -> str:
    return f"#{m.base_dim}:{m.base:.6g}"


def date_key(d: DateRef) -> str:
    return f"#date:{d.year}-{d.month}-{d.day}"


def sentence_slots(text: str, measures: Sequence[Measure], dates: Sequence[DateRef],
                   names: Sequence[Span], frames: bool = True) -> list[Fact]:
    """The facts of one sentence with their frames (``frames=False``: empty ones). A
    number inside a name ("Apollo 11") belongs to the name; a count without a noun or
    unit inside a date is dropped."""
    fillers: list[Filler] = []
    made: list[tuple[str, object]] = []
    # A date wins over a name written with it ("January 1887" is no entity), and so does
    # a measure over a unit symbol read as a name ("80 Nm", "18 V").
    if dates or measures:
        names = [n for n in names if not any(n.start < d.end and d.start < n.end for d in dates)
                 and not any(m.start <= n.start and n.end <= m.end for m in measures)]
    spans = [(n.start, n.end) for n in names]

    def inside(s: int, e: int) -> bool:
        return any(a <= s and e <= b for a, b in spans)

    if not frames:  # (a long context: most answers) the facts, made directly
        out = [Fact(Slot(Filler(n.start, n.end, "entity")), name=n, key=name_key(n.text))
               for n in names]
        for d in dates:
            if not inside(d.start, d.end):
                out.append(Fact(Slot(Filler(d.start, d.end, "date", date_key(d))), date=d))
        for m in measures:
            if not inside(m.start, m.end) and not any(m.start < e and s < m.end
                                                      for s, e in spans):
                out.append(Fact(Slot(Filler(m.start, m.end, "value", measure_key(m))),
                                measure=m))
        return out
    for n in names:
        fillers.append(Filler(n.start, n.end, "entity"))
        made.append(("name", n))
    for d in dates:
        if inside(d.start, d.end):
            continue
        fillers.append(Filler(d.start, d.end, "date", date_key(d)))
        made.append(("date", d))
    for m in measures:
        if inside(m.start, m.end) or any(
                m.start < e and s < m.end for s, e in spans):
            continue
        fillers.append(Filler(m.start, m.end, "value", measure_key(m)))
        made.append(("measure", m))
    slots = make_slots(text, fillers)
    out = []
    for slot, (kind, obj) in zip(slots, made, strict=True):
        if kind == "name":
            assert isinstance(obj, Span)
            out.append(Fact(slot, name=obj, key=name_key(obj.text)))
        elif kind == "date":
            assert isinstance(obj, DateRef)
            out.append(Fact(slot, date=obj))
        else:
            assert isinstance(obj, Measure)
            out.append(Fact(slot, measure=obj))
    return out
