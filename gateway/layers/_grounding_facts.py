"""The ``grounding`` layer's fact alignment: each value, date and name of an answer
sentence against the context's.

For every fact of the sentence (:func:`gateway.text.slots.sentence_slots`):

- **values** (:mod:`gateway.text.measures`): *found* when the context states the same
  quantity anywhere — in any unit, rounded when the answer hedges ("about"), within a
  bound ("more than"); *contradicted* when it is not found and a sentence the answer
  aligns with states another value of the same kind there ("330 feet" for "330 m", "5 g"
  for "5 mg", "three years" for "24 months"), or the same number in another unit or
  kind ("15 patients" for "15 %");
- **dates**: the same with :func:`gateway.text.quantities.date_matches`;
- **names**: found when some context sentence names the same thing
  (:func:`gateway.text.names.same_name`), see :mod:`gateway.layers._grounding_names`;

and for all three, **binding** (:mod:`gateway.text.frames`): a found fact whose frame
("completed in …", "… is the capital of France") matches a context slot that holds
*another* filler of its kind much better than any slot holding this one is on the wrong
event or in the wrong place — "completed in January 1887" when the context's January
1887 is when construction *began*, "Lyon is the capital of France" when the capital
slot holds Paris. A name the context never mentions is *substituted* when a context
slot with the same frame holds a name the answer leaves out ("Osnabrück and Vienna").

Values the context lacks may be *derived* from its values (:mod:`gateway.text.derive`)
or taken from the user's question when the context does not contradict them there.
:class:`FactCheck`, :class:`FactOptions` and binding live in
:mod:`gateway.layers._grounding_bind`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gateway.layers._grounding_bind import (
    MAX_SAME,
    FactCheck,
    FactOptions,
    aligned_facts,
    best_slot,
    bind,
)
from gateway.layers._grounding_names import check_name
from gateway.text.context_facts import ContextFacts
from gateway.text.derive import derivations, operands_of
from gateway.text.index import TextIndex
from gateway.text.measure_relation import CONFLICT, MATCH, relation
from gateway.text.measures import COUNT, Measure
from gateway.text.quantities import DateRef, date_matches
from gateway.text.slots import Fact, sentence_slots
from gateway.text.stem import stem
from gateway.text.tokens import Span

__all__ = ["FactCheck", "FactOptions", "check_facts"]  # the first two from _grounding_bind

if TYPE_CHECKING:
    from gateway.layers._grounding_question import QuestionFacts


def check_facts(
    text: str, measures: Sequence[Measure], dates: Sequence[DateRef], names: Sequence[Span],
    ctx: TextIndex, cf: ContextFacts, aligned: Sequence[int], opts: FactOptions,
    question: QuestionFacts | None = None, topic: Sequence[tuple[str, float]] = (),
    skip: Sequence[tuple[int, int]] = (),
) -> list[FactCheck]:
    """Check the facts of one answer sentence (``aligned``: context sentence ids, best
    match first; ``skip``: spans that state no claim, e.g. a rejected alternative)."""
    if not measures and not dates and not names:
        return []  # nothing to check (and no slots to build)
    facts = sentence_slots(text, measures, dates, names, frames=opts.binding)
    out: list[FactCheck] = []
    # Only a date's check reads these: a sentence without dates skips building them.
    in_answer = {m.text for m in measures} | {d.text for d in dates} if dates else set()
    listed = _listed(text, dates)
    for f in facts:
        if skip and any(a <= f.start and f.end <= b for a, b in skip):
            continue
        if f.measure is not None:
            others = [m for m in measures if m is not f.measure
                      and not (skip and any(a <= m.start and m.end <= b for a, b in skip))]
            out.append(_check_measure(f, f.measure, cf, aligned, opts, question, topic,
                                      others))
        elif f.date is not None:
            out.append(_check_date(f, f.date, cf, aligned, opts, question, topic, in_answer,
                                   listed))
        elif f.name is not None and f.key:
            out.append(check_name(text, f, cf, aligned, opts, question, topic, facts))
    return out


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
    conflicts = [(sid, c) for sid, c in aligned_facts(cf, aligned)
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
        best = best_slot(cf, f, [c for _, c in conflicts], ())
        if best is not None and best[0] >= opts.bind_min:
            c = best[1].measure
            assert c is not None
            return FactCheck(a.text, "value", "contradicted",
                             f"{a.text}: the context states {c.text} there", binding=True,
                             sim=best[0])
        return FactCheck(a.text, "value", "unsupported")
    return bind(f, a.text, "value", cf, [c for _, c in conflicts],
                 [sid for sid, _ in matches[:MAX_SAME]],
                 lambda c: c.measure is not None and relation(a, c.measure) == MATCH,
                 opts, topic)


def _check_measure_plain(a: Measure, cf: ContextFacts, aligned: Sequence[int],
                         opts: FactOptions, question: QuestionFacts | None,
                         others: Sequence[Measure]) -> FactCheck:
    """Found anywhere, derived, or contradicted by a value of its kind in the window."""
    # The same value in base units first: most found values are, and then the whole
    # dimension (dozens of counts in a long document) is not compared one by one.
    if any(relation(a, c) == MATCH for c in cf.same_base(a.base_dim, a.base)) or \
            any(relation(a, c) == MATCH for _, c in cf.by_dim().get(a.base_dim, ())):
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
                topic: Sequence[tuple[str, float]], in_answer: set[str],
                listed: frozenset[str] = frozenset()) -> FactCheck:
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
    conflicts = [c for _, c in aligned_facts(cf, aligned)
                 if c.date is not None and not date_matches(d, [c.date])
                 and _comparable(d, c.date) and c.date.text not in in_answer]
    if not matches:
        near = set(aligned[:opts.window])
        direct = [c for sid, c in aligned_facts(cf, near)
                  if c.date is not None and not date_matches(d, [c.date]) and
                  _comparable(d, c.date)
                  and not (d.text in listed and c.date.text in listed)]
        if question is not None and date_matches(d, question.dates) and not direct:
            return FactCheck(d.text, "date", "question")
        if direct:
            c = direct[0].date
            assert c is not None
            return FactCheck(d.text, "date", "contradicted",
                             f"{d.text}: the context states {c.text}")
        best = best_slot(cf, f, conflicts, ())
        if best is not None and best[0] >= opts.bind_min:
            c = best[1].date
            assert c is not None
            return FactCheck(d.text, "date", "contradicted",
                             f"{d.text}: the context states {c.text} there", binding=True,
                             sim=best[0])
        return FactCheck(d.text, "date", "unsupported")
    return bind(f, d.text, "date", cf, conflicts, matches[:MAX_SAME],
                 lambda c: c.date is not None and date_matches(d, [c.date]), opts, topic)


_LIST_SEP = re.compile(r"\s*(?:,\s*(?:and\s+|or\s+)?|and\s+|or\s+|&\s*)")


def _listed(text: str, dates: Sequence[DateRef]) -> frozenset[str]:
    """The dates of an answer sentence listed beside another ("the 2004 and 2012
    Olympics"): a context date among them is one of the list, no conflict."""
    if len(dates) < 2:
        return frozenset()
    got: set[str] = set()
    ordered = sorted(dates, key=lambda d: d.start)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if _LIST_SEP.fullmatch(text, a.end, b.start):
            got.update((a.text, b.text))
    return frozenset(got)


def _comparable(a: DateRef, b: DateRef) -> bool:
    """Two dates that state the same kind of part (both a year, or both a month)."""
    return (a.year is not None and b.year is not None) or \
        (a.month is not None and b.month is not None)
