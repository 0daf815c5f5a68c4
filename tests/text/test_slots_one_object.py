"""A fact is one object (session 9): ``sentence_slots`` against the plain form it replaces
(a :class:`Fact` holding a :class:`Slot` holding a :class:`Filler`, from
:func:`make_slots`), over every sentence of the labelled data, with frames and without."""

from __future__ import annotations

from corpus_texts import real_texts

from gateway.text import measures as M
from gateway.text import slots as S
from gateway.text.frames import Filler, Slot, make_slots
from gateway.text.measures import Measure
from gateway.text.names import name_key
from gateway.text.quantities import DateRef, extract_quantities
from gateway.text.tokens import Span, entity_candidates, split_sentences

Plain = tuple[Slot, Measure | DateRef | Span, frozenset[str]]


def _plain(text: str, measures: list[M.Measure], dates: list[DateRef],
           names: list[Span], frames: bool) -> list[Plain]:
    """``sentence_slots`` as session 8 wrote it, as (slot, filler object, name key)."""
    if dates or measures:
        names = [n for n in names if not any(n.start < d.end and d.start < n.end for d in dates)
                 and not any(m.start <= n.start and n.end <= m.end for m in measures)]
    spans = [(n.start, n.end) for n in names]

    def inside(s: int, e: int) -> bool:
        return any(a <= s and e <= b for a, b in spans)

    fillers: list[Filler] = []
    made: list[tuple[Measure | DateRef | Span, frozenset[str]]] = []
    for n in names:
        fillers.append(Filler(n.start, n.end, "entity"))
        made.append((n, name_key(n.text)))
    for d in dates:
        if not inside(d.start, d.end):
            fillers.append(Filler(d.start, d.end, "date", S.date_key(d)))
            made.append((d, frozenset()))
    for m in measures:
        if inside(m.start, m.end) or any(m.start < e and s < m.end for s, e in spans):
            continue
        fillers.append(Filler(m.start, m.end, "value", S.measure_key(m)))
        made.append((m, frozenset()))
    slots = make_slots(text, fillers) if frames else [Slot(f) for f in fillers]
    return [(slot, obj, key) for slot, (obj, key) in zip(slots, made, strict=True)]


def test_facts_are_the_plain_slots() -> None:
    framed = 0
    for t in real_texts():
        for s in split_sentences(t):
            text = s.text
            dates, numbers = extract_quantities(text)
            measures = M.sentence_measures(text, numbers, dates)
            kept = M.years_as_measures(text, dates)[0]
            names = entity_candidates(text)
            for frames in (True, False):
                got = S.sentence_slots(text, measures, kept, names, frames=frames)
                want = _plain(text, measures, kept, names, frames)
                assert len(got) == len(want), text[:80]
                for fact, (slot, obj, key) in zip(got, want, strict=True):
                    assert (fact.start, fact.end) == (slot.filler.start, slot.filler.end)
                    assert dict(fact.left) == slot.left and dict(fact.right) == slot.right
                    assert list(fact.left) == list(slot.left), text[:80]  # same key order
                    assert list(fact.right) == list(slot.right), text[:80]
                    assert (fact.measure or fact.date or fact.name) is obj
                    assert fact.key == key and fact.sid == -1
                    framed += frames and bool(slot.left or slot.right)
    assert framed > 3000
