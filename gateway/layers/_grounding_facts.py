"""The ``grounding`` layer's fact alignment: each value, date and name of an answer
sentence against the context's.

For every fact of the sentence (:func:`gateway.text.context_facts.sentence_slots`):

- **values** (:mod:`gateway.text.measures`): *found* when the context states the same
  quantity anywhere — in any unit, rounded when the answer hedges ("about"), within a
  bound ("more than"); *contradicted* when it is not found and a sentence the answer
  aligns with states another value of the same kind there ("330 feet" for "330 m", "5 g"
  for "5 mg", "three years" for "24 months"), or the same number in another unit or
  kind ("15 patients" for "15 %");
- **dates**: the same with :func:`gateway.text.quantities.date_matches`;
- **names**: found when some context sentence names the same thing
  (:func:`gateway.text.names.same_name`);

and for all three, **binding** (:mod:`gateway.text.frames`): a found fact whose frame
("completed in …", "… is the capital of France") matches a context slot that holds
*another* filler of its kind much better than any slot holding this one is on the wrong
event or in the wrong place — "completed in January 1887" when the context's January
1887 is when construction *began*, "Lyon is the capital of France" when the capital
slot holds Paris. A name the context never mentions is *substituted* when a context
slot with the same frame holds a name the answer leaves out ("Osnabrück and Vienna").

Values the context lacks may be *derived* from its values (:mod:`gateway.text.derive`)
or taken from the user's question when the context does not contradict them there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.text.anchors import Anchor, anchor, anchored
from gateway.text.context_facts import ContextFacts, Fact, sentence_slots
from gateway.text.derive import derivations, operands_of
from gateway.text.frames import slot_similarity
from gateway.text.index import TextIndex
from gateway.text.measures import (
    CONFLICT,
    COUNT,
    MATCH,
    Measure,
    relation,
)
from gateway.text.names import acronym_of, name_class, name_key, same_name
from gateway.text.quantities import DateRef, date_matches
from gateway.text.stem import stem
from gateway.text.tokens import Span

__all__ = ["FactCheck", "FactOptions", "check_facts"]

_MONTHS = {m: i + 1 for i, m in enumerate(
    "january february march april may june july august september october november "
    "december".split())}
if TYPE_CHECKING:
    from gateway.layers._grounding_question import QuestionFacts

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
    copy_coverage: float = 0.75
    """Share of the answer sentence's other words a context sentence must hold before a
    name the context lacks counts as put in place of that sentence's name."""


def _sim(cf: ContextFacts, a: Fact, c: Fact, topic: Sequence[tuple[str, float]],
         tight: bool = False) -> float:
    return slot_similarity(a.slot, c.slot, cf.idf, topic, 0.3 if tight else 0.0)


def check_facts(
    text: str, measures: Sequence[Measure], dates: Sequence[DateRef], names: Sequence[Span],
    ctx: TextIndex, cf: ContextFacts, aligned: Sequence[int], opts: FactOptions,
    question: QuestionFacts | None = None, topic: Sequence[tuple[str, float]] = (),
    skip: Sequence[tuple[int, int]] = (),
) -> list[FactCheck]:
    """Check the facts of one answer sentence (``aligned``: context sentence ids, best
    match first; ``skip``: spans that state no claim, e.g. a rejected alternative)."""
    facts = sentence_slots(text, measures, dates, names, frames=opts.binding)
    out: list[FactCheck] = []
    in_answer = {m.text for m in measures} | {d.text for d in dates}
    for f in facts:
        s = f.slot.filler
        if any(a <= s.start and s.end <= b for a, b in skip):
            continue
        if f.measure is not None:
            others = [m for m in measures if m is not f.measure
                      and not any(a <= m.start and m.end <= b for a, b in skip)]
            out.append(_check_measure(f, f.measure, cf, aligned, opts, question, topic,
                                      others))
        elif f.date is not None:
            out.append(_check_date(f, f.date, cf, aligned, opts, question, topic, in_answer))
        elif f.name is not None and f.key:
            out.append(_check_name(text, f, cf, aligned, opts, question, topic, facts))
    return out


def _aligned_facts(cf: ContextFacts, aligned: Iterable[int]) -> Iterable[tuple[int, Fact]]:
    for sid in aligned:
        for c in cf.slots(sid):
            yield sid, c


def _noun_ok(a: Measure, c: Measure, nouns: set[str]) -> bool:
    """Counts compete only when they count the same thing: the answer's noun, or the
    noun of a context value the answer's matches."""
    if a.dim != COUNT or c.dim != COUNT:
        return True
    return bool(c.noun) and stem(c.noun) in nouns


def _check_measure(f: Fact, a: Measure, cf: ContextFacts, aligned: Sequence[int],
                   opts: FactOptions, question: QuestionFacts | None,
                   topic: Sequence[tuple[str, float]], others: Sequence[Measure]) -> FactCheck:
    if not opts.binding:
        return _check_measure_plain(a, cf, aligned, opts, question, others)
    matches = [(sid, c) for sid, c in cf.by_dim().get(a.base_dim, ()) if relation(a, c) == MATCH]
    nouns = {stem(a.noun)} if a.noun else set()
    nouns |= {stem(c.noun) for _, c in matches if c.noun}
    conflicts = [(sid, c) for sid, c in _aligned_facts(cf, aligned)
                 if c.measure is not None and relation(a, c.measure) == CONFLICT
                 and _noun_ok(a, c.measure, nouns)
                 and not any(relation(o, c.measure) == MATCH for o in others)]
    if not matches:
        derived = _derived(a, cf, aligned, others, question)
        if derived is not None:
            return derived
        near = set(aligned[:opts.window])
        direct = [c for sid, c in conflicts if sid in near]
        if question is not None and question.support(a) and not direct:
            return FactCheck(a.text, "value", "question")
        if direct:
            c = direct[0].measure
            assert c is not None
            return FactCheck(a.text, "value", "contradicted",
                             f"{a.text}: the context states {c.text}")
        # A value the context lacks is bound by its own frame only (not the question's).
        best = _best(cf, f, [c for _, c in conflicts], ())
        if best is not None and best[0] >= opts.bind_min:
            c = best[1].measure
            assert c is not None
            return FactCheck(a.text, "value", "contradicted",
                             f"{a.text}: the context states {c.text} there", binding=True,
                             sim=best[0])
        return FactCheck(a.text, "value", "unsupported")
    return _bind(f, a.text, "value", cf, [c for _, c in conflicts],
                 [sid for sid, _ in matches[:MAX_SAME]],
                 lambda c: c.measure is not None and relation(a, c.measure) == MATCH,
                 opts, topic)


def _check_measure_plain(a: Measure, cf: ContextFacts, aligned: Sequence[int],
                         opts: FactOptions, question: QuestionFacts | None,
                         others: Sequence[Measure]) -> FactCheck:
    """Found anywhere, derived, or contradicted by a value of its kind in the window."""
    if any(relation(a, c) == MATCH for _, c in cf.by_dim().get(a.base_dim, ())):
        return FactCheck(a.text, "value", "supported")
    derived = _derived(a, cf, aligned, others, question)
    if derived is not None:
        return derived
    nouns = {stem(a.noun)} if a.noun else set()
    direct = [c for sid in aligned[:opts.window] for c in cf.measures(sid)
              if relation(a, c) == CONFLICT and _noun_ok(a, c, nouns)
              and not any(relation(o, c) == MATCH for o in others)]
    if question is not None and question.support(a) and not direct:
        return FactCheck(a.text, "value", "question")
    if direct:
        return FactCheck(a.text, "value", "contradicted",
                         f"{a.text}: the context states {direct[0].text}")
    return FactCheck(a.text, "value", "unsupported")


DERIVE_FROM = 5
"""Aligned context sentences whose values may be operands of a derived value."""


def _derived(a: Measure, cf: ContextFacts, aligned: Sequence[int], others: Sequence[Measure],
             question: QuestionFacts | None) -> FactCheck | None:
    """``a`` computed from stated values: ``derived``; computed only from a value of the
    question that the context contradicts: ``contradicted`` (a false premise accepted)."""
    sids = list(aligned[:DERIVE_FROM])
    ops = operands_of([m for sid in sids for m in cf.measures(sid)], "context")
    ops += operands_of(others, "answer")
    if question is not None:
        ops += operands_of(question.measures, "question")
    dates = [d for sid in sids for d in cf.dates(sid)]
    found = derivations(a, ops, dates)
    if not found:
        return None
    false = {m.text for m in question.false} if question is not None else set()
    if all(any(o.origin == "question" and o.text in false for o in d.operands) for d in found):
        bad = next(o.text for o in found[0].operands if o.text in false)
        return FactCheck(a.text, "value", "contradicted",
                         f"{a.text} follows from the question's {bad}, which the context "
                         "contradicts")
    return FactCheck(a.text, "value", "derived")


def _check_date(f: Fact, d: DateRef, cf: ContextFacts, aligned: Sequence[int],
                opts: FactOptions, question: QuestionFacts | None,
                topic: Sequence[tuple[str, float]], in_answer: set[str]) -> FactCheck:
    matches = [sid for sid, c in cf.dated() if date_matches(d, [c])]
    if not opts.binding:
        if matches:
            return FactCheck(d.text, "date", "supported")
        direct_dates = [c for sid in aligned[:opts.window] for c in cf.dates(sid)
                        if not date_matches(d, [c]) and _comparable(d, c)]
        if question is not None and date_matches(d, question.dates) and not direct_dates:
            return FactCheck(d.text, "date", "question")
        if direct_dates:
            return FactCheck(d.text, "date", "contradicted",
                             f"{d.text}: the context states {direct_dates[0].text}")
        return FactCheck(d.text, "date", "unsupported")
    conflicts = [c for _, c in _aligned_facts(cf, aligned)
                 if c.date is not None and not date_matches(d, [c.date])
                 and _comparable(d, c.date) and c.date.text not in in_answer]
    if not matches:
        near = set(aligned[:opts.window])
        direct = [c for sid, c in _aligned_facts(cf, near)
                  if c.date is not None and not date_matches(d, [c.date]) and
                  _comparable(d, c.date)]
        if question is not None and date_matches(d, question.dates) and not direct:
            return FactCheck(d.text, "date", "question")
        if direct:
            c = direct[0].date
            assert c is not None
            return FactCheck(d.text, "date", "contradicted",
                             f"{d.text}: the context states {c.text}")
        best = _best(cf, f, conflicts, ())
        if best is not None and best[0] >= opts.bind_min:
            c = best[1].date
            assert c is not None
            return FactCheck(d.text, "date", "contradicted",
                             f"{d.text}: the context states {c.text} there", binding=True,
                             sim=best[0])
        return FactCheck(d.text, "date", "unsupported")
    return _bind(f, d.text, "date", cf, conflicts, matches[:MAX_SAME],
                 lambda c: c.date is not None and date_matches(d, [c.date]), opts, topic)


def _comparable(a: DateRef, b: DateRef) -> bool:
    """Two dates that state the same kind of part (both a year, or both a month)."""
    return (a.year is not None and b.year is not None) or \
        (a.month is not None and b.month is not None)


def _check_name(a_text: str, f: Fact, cf: ContextFacts, aligned: Sequence[int], opts: FactOptions,
                question: QuestionFacts | None, topic: Sequence[tuple[str, float]],
                facts: Sequence[Fact]) -> FactCheck:
    key = f.key
    assert f.name is not None
    text = f.name.text
    cls = name_class(key)
    sids = cf.name_sids(key)
    if not opts.binding:
        # No frames compared: found when a sentence holds all of its words (as before).
        if sids or cls == "time" and any(
                d.month in {_MONTHS.get(w) for w in key} for _, d in cf.dated()):
            return FactCheck(text, "name", "supported")
        if question is not None and any(same_name(key, q) for q in question.names):
            return FactCheck(text, "name", "question")
        return FactCheck(text, "name", "unsupported")
    same_sids = [sid for sid in sids if any(same_name(key, k) for k in cf.name_keys(sid))]
    others = [c for _, c in _aligned_facts(cf, aligned)
              if c.name is not None and c.key and not same_name(key, c.key)
              and name_class(c.key) == cls and not acronym_of(text, c.name.text)
              and not acronym_of(c.name.text, text)]
    mentioned = [g for g in facts if g.name is not None and g is not f]
    if not same_sids and cls == "time":
        months = {_MONTHS.get(w) for w in key} - {None}
        if months and any(d.month in months for _, d in cf.dated()):
            return FactCheck(text, "name", "supported")  # "in May" ~ "in May 2019"
    if not same_sids:
        if any(acronym_of(text, c.name.text) for sid in aligned for c in cf.slots(sid)
               if c.name is not None):
            return FactCheck(text, "name", "supported")
        # Absent from the context: substituted when the answer copies a context sentence
        # but puts this name where that sentence has one the answer leaves out.
        free = [c for c in others if not any(same_name(c.key, g.key) for g in mentioned)
                and _anchor_of(cf, f, a_text, c) is not None]
        best = _best(cf, f, free, topic, tight=True)
        if best is not None and best[0] >= opts.substitute_min:
            assert best[1].name is not None
            return FactCheck(text, "name", "contradicted",
                             f"{text} in place of {best[1].name.text}", binding=True)
        if question is not None and any(same_name(key, q) for q in question.names):
            return FactCheck(text, "name", "question")
        return FactCheck(text, "name", "unsupported")
    # Swapped: a competing name in an aligned sentence sits between the same words
    # (a copied sentence), and no mention of this name does.
    anchored_others = [c for c in others if _anchor_of(cf, f, a_text, c) is not None
                       and not _coordinated(cf, c, key)]
    if not anchored_others:
        return FactCheck(text, kind_name, "supported")
    comp = _best(cf, f, anchored_others, topic, tight=True)
    assert comp is not None
    if comp[0] < opts.bind_min:
        return FactCheck(text, kind_name, "supported")
    if any(_anchor_of(cf, f, a_text, c) is not None for sid in same_sids for c in cf.slots(sid)
           if c.name is not None and same_name(key, c.key)):
        return FactCheck(text, kind_name, "supported")
    other = comp[1]
    assert other.name is not None
    # A competitor the answer also names is swapped only if it is misplaced too.
    for g in mentioned:
        if same_name(g.key, other.key):
            g_here = [c for sid in cf.name_sids(g.key) for c in cf.slots(sid)
                      if c.name is not None and same_name(g.key, c.key)
                      and _anchor_of(cf, g, a_text, c) is not None]
            g_there = [c for sid in same_sids for c in cf.slots(sid)
                       if c.name is not None and same_name(key, c.key)
                       and _anchor_of(cf, g, a_text, c) is not None]
            if g_here or not g_there:
                return FactCheck(text, kind_name, "supported")
    return FactCheck(text, kind_name, "contradicted",
                     f"{text}: the context puts {other.name.text} there", binding=True)


kind_name = "name"


def _copied(f: Fact, c: Fact, cf: ContextFacts, facts: Sequence[Fact]) -> float:
    """Share of the answer sentence's framing words (around all its facts) that the
    context sentence holding ``c`` also has."""
    words = set(f.slot.left) | set(f.slot.right)
    words = {w for w in words if not w.startswith("#")}
    if f.name is not None:
        words -= {stem(w) for w in f.key}
    if len(words) < 2:
        return 0.0
    sid = _sid_of(cf, c)
    if sid is None:
        return 0.0
    have = {stem(t) for t in cf.index.sentences[sid].tokens}
    return len(words & have) / len(words)


def _anchor_of(cf: ContextFacts, f: Fact, a_text: str, c: Fact) -> Anchor | None:
    """The anchor between answer mention ``f`` and context mention ``c`` if it is a copy's."""
    sid = _sid_of(cf, c)
    if sid is None or f.name is None or c.name is None:
        return None
    got = anchor(a_text, f.name.start, f.name.end, cf.index.sentences[sid].text,
                 c.name.start, c.name.end)
    return got if anchored(got) else None


def _coordinated(cf: ContextFacts, c: Fact, key: frozenset[str]) -> bool:
    """Whether ``c`` is listed together with a mention of ``key`` in its sentence
    ("Ferrari and Sebastian Vettel", "Osnabrück, Münster")."""
    sid = _sid_of(cf, c)
    if sid is None or c.name is None:
        return False
    text = cf.index.sentences[sid].text
    for g in cf.slots(sid):
        if g.name is None or g is c or not same_name(key, g.key):
            continue
        a, b = (g.name, c.name) if g.name.start < c.name.start else (c.name, g.name)
        if _COORD.fullmatch(text[a.end:b.start]):
            return True
    return False


_COORD = re.compile(r"\s*(?:,\s*(?:and\s+|or\s+)?|and\s+|or\s+|&\s*|/\s*)")


def _sid_of(cf: ContextFacts, c: Fact) -> int | None:
    return c.sid if c.sid >= 0 else None


def _best_same(cf: ContextFacts, f: Fact, sids: Iterable[int], check: object,
               topic: Sequence[tuple[str, float]], tight: bool = False) -> float:
    same = 0.0
    for sid in sids:
        for c in cf.slots(sid):
            if check(c):  # type: ignore[operator]
                same = max(same, _sim(cf, f, c, topic, tight))
    return same


def _best(cf: ContextFacts, f: Fact, cands: Iterable[Fact],
          topic: Sequence[tuple[str, float]], tight: bool = False) -> tuple[float, Fact] | None:
    best: tuple[float, Fact] | None = None
    for c in cands:
        s = _sim(cf, f, c, topic, tight)
        if best is None or s > best[0]:
            best = (s, c)
    return best


def _bind(f: Fact, text: str, kind: str, cf: ContextFacts, competitors: Sequence[Fact],
          same_sids: Sequence[int], is_same: object, opts: FactOptions,
          topic: Sequence[tuple[str, float]]) -> FactCheck:
    """A found fact: contradicted when a slot holding another filler frames it much
    better than every slot holding this one."""
    comp = _best(cf, f, competitors, topic)
    if comp is None or comp[0] < opts.bind_min:
        return FactCheck(text, kind, "supported")
    same = _best_same(cf, f, same_sids, is_same, topic)
    ratio = opts.bind_ratio
    if topic and _sim(cf, f, comp[1], ()) < opts.bind_min:
        ratio = 2 * opts.bind_ratio  # bound through the question's words only: weaker
    if comp[0] >= ratio * same + opts.bind_margin:
        other = comp[1]
        what = (other.measure.text if other.measure is not None else
                other.date.text if other.date is not None else
                other.name.text if other.name is not None else "")
        return FactCheck(text, kind, "contradicted",
                         f"{text}: the context puts {what} there", binding=True)
    return FactCheck(text, kind, "supported")


def names_key_set(names: Sequence[Span]) -> list[frozenset[str]]:
    return [k for k in (name_key(n.text) for n in names) if k]
