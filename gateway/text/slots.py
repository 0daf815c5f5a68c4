"""The slots of one sentence: each measure, date and name it states, with its frame
(:mod:`gateway.text.frames`) — :func:`sentence_slots`, for a context sentence
(:meth:`gateway.text.context_facts.ContextFacts.slots`) or an answer's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from gateway.text.frames import Filler, make_frames
from gateway.text.measures import Measure
from gateway.text.names import name_key
from gateway.text.quantities import DateRef
from gateway.text.tokens import Span

__all__ = ["NO_FRAME", "Fact", "date_key", "measure_key", "sentence_slots"]

NO_FRAME: Mapping[str, float] = MappingProxyType({})
"""The (read-only, shared) frame side of a fact built without frames."""


@dataclass(slots=True)
class Fact:
    """One filler of a sentence, ``start:end`` of its text, with its frame (``left``,
    ``right``: see :class:`gateway.text.frames.Slot`): exactly one of ``measure``,
    ``date``, ``name`` is set. One object per fact (no :class:`~gateway.text.frames.Slot`
    or :class:`~gateway.text.frames.Filler` kept): an answer sentence builds its facts
    on every request."""

    start: int
    end: int
    left: Mapping[str, float]
    right: Mapping[str, float]
    """``NO_FRAME`` when built without frames."""
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
    # A date wins over a name written with it ("January 1887" is no entity), and so does
    # a measure over a unit symbol read as a name ("80 Nm", "18 V"). (Plain loops, not
    # any() over generators: this runs for every answer sentence with a fact.)
    if names and (dates or measures):
        kept: list[Span] = []
        for n in names:
            ns, ne = n.start, n.end
            for d in dates:
                if ns < d.end and d.start < ne:
                    break
            else:
                for m in measures:
                    if m.start <= ns and ne <= m.end:
                        break
                else:
                    kept.append(n)
        names = kept
    spans = [(n.start, n.end) for n in names]
    if spans:
        dates = [d for d in dates if not _inside(d.start, d.end, spans)]
        measures = [m for m in measures if not _overlaps(m.start, m.end, spans)]
    if not frames:  # (a long context: most answers) the facts, made directly
        out = [Fact(n.start, n.end, NO_FRAME, NO_FRAME, None, None, n, name_key(n.text))
               for n in names] if names else []
        if dates:
            out += [Fact(d.start, d.end, NO_FRAME, NO_FRAME, None, d) for d in dates]
        if measures:
            out += [Fact(m.start, m.end, NO_FRAME, NO_FRAME, m) for m in measures]
        return out
    fillers = [Filler(n.start, n.end, "entity") for n in names]
    fillers += [Filler(d.start, d.end, "date", date_key(d)) for d in dates]
    fillers += [Filler(m.start, m.end, "value", measure_key(m)) for m in measures]
    sides = iter(make_frames(text, fillers))
    out = []
    for n in names:
        left, right = next(sides)
        out.append(Fact(n.start, n.end, left, right, None, None, n, name_key(n.text)))
    for d in dates:
        left, right = next(sides)
        out.append(Fact(d.start, d.end, left, right, None, d))
    for m in measures:
        left, right = next(sides)
        out.append(Fact(m.start, m.end, left, right, m))
    return out


def _inside(s: int, e: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= s and e <= b for a, b in spans)


def _overlaps(s: int, e: int, spans: list[tuple[int, int]]) -> bool:
    """Inside a span, or overlapping one."""
    return any((a <= s and e <= b) or (s < b and a < e) for a, b in spans)
