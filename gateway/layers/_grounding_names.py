"""The ``grounding`` layer's check of the names of an answer sentence.

A name is *found* when some context sentence names the same thing
(:func:`gateway.text.names.same_name`; a month name when a context date has that month;
an acronym of a name an aligned sentence holds); *swapped* when a competing name in an
aligned sentence sits between the same words (a copied sentence, :mod:`gateway.text.anchors`)
and no mention of this name does; *substituted* when the context never mentions it but
the answer copies a context sentence and puts it where that sentence has a name the
answer leaves out. With ``binding`` off (a long document) only whether the context has
it counts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from operator import eq
from typing import TYPE_CHECKING

from gateway.layers._grounding_bind import FactCheck, FactOptions, aligned_facts, best_slot, sid_of
from gateway.text.anchors import Anchor, Sides, anchor_sides, anchored, sides
from gateway.text.context_facts import ContextFacts
from gateway.text.name_variants import name_variant, spelled_alike
from gateway.text.names import acronym_of, acronym_shaped, name_class, same_name
from gateway.text.slots import Fact

if TYPE_CHECKING:
    from gateway.layers._grounding_question import QuestionFacts

__all__ = ["check_name"]

_MONTHS = {m: i + 1 for i, m in enumerate(
    "january february march april may june july august september october november "
    "december".split())}


def check_name(a_text: str, f: Fact, cf: ContextFacts, aligned: Sequence[int],
               opts: FactOptions, question: QuestionFacts | None,
               topic: Sequence[tuple[str, float]], facts: Sequence[Fact]) -> FactCheck:
    """Name ``f`` of answer sentence ``a_text`` (whose facts are ``facts``) against the
    context (``aligned``: its sentences this one aligns with, best first)."""
    key = f.key
    assert f.name is not None
    text = f.name.text
    if not opts.binding:
        # No frames compared: found when a sentence holds all of its words (as before).
        if cf.index.holds_all(key) or name_class(key) == "time" and any(
                d.month in {_MONTHS.get(w) for w in key} for _, d in cf.dated()):
            return FactCheck(text, "name", "supported")
        if question is not None and any(same_name(key, q) for q in question.names):
            return FactCheck(text, "name", "question")
        return FactCheck(text, "name", "unsupported")
    read: dict[tuple[int, int, int], Sides] = {}  # each mention's words read once
    cls = name_class(key)
    short = acronym_shaped(text)  # (else it is no acronym of any context name)
    sids = cf.name_sids(key)
    same_sids = [sid for sid in sids if any(same_name(key, k) for k in cf.name_keys(sid))]
    others = [c for _, c in aligned_facts(cf, aligned)
              if c.name is not None and c.key and not same_name(key, c.key)
              and name_class(c.key) == cls
              and not (short and acronym_of(text, c.name.text))
              and not acronym_of(c.name.text, text)]
    mentioned = [g for g in facts if g.name is not None and g is not f]
    if not same_sids and cls == "time":
        months = {_MONTHS.get(w) for w in key} - {None}
        if months and any(d.month in months for _, d in cf.dated()):
            return FactCheck(text, "name", "supported")  # "in May" ~ "in May 2019"
    if not same_sids:
        if short and any(acronym_of(text, c.name.text) for sid in aligned
                         for c in cf.slots(sid) if c.name is not None):
            return FactCheck(text, "name", "supported")
        if opts.name_variants and any(spelled_alike(key, c.key) for c in others):
            return FactCheck(text, "name", "supported")  # "Scarlett Letter": a spelling
        # Absent from the context: substituted when the answer copies a context sentence
        # but puts this name where that sentence has one the answer leaves out.
        free = [c for c in others if not any(same_name(c.key, g.key) for g in mentioned)
                and _anchor_of(cf, f, a_text, c, read) is not None]
        best = best_slot(cf, f, free, topic, tight=True)
        if best is not None and best[0] >= opts.substitute_min:
            assert best[1].name is not None
            return FactCheck(text, "name", "contradicted",
                             f"{text} in place of {best[1].name.text}", binding=True)
        if question is not None and any(same_name(key, q) for q in question.names):
            return FactCheck(text, "name", "question")
        if opts.name_variants:
            # A context name the sentence also names, and does not deny ("Tom Hanks,
            # not Tom Cruise"), is not the one this name replaces ("War Horse is a War
            # Film").
            kept = [g for g in mentioned if g.name is not None
                    and not _DENIED.search(a_text, 0, g.name.start)]
            varied = _variant(cf, key, [c for c in others if not any(
                same_name(c.key, g.key) for g in kept)], question)
            if varied is not None:
                return FactCheck(text, "name", "contradicted",
                                 f"{text} in place of {varied}", binding=True)
        return FactCheck(text, "name", "unsupported")
    # Swapped: a competing name in an aligned sentence sits between the same words
    # (a copied sentence), and no mention of this name does.
    anchored_others = [c for c in others if _anchor_of(cf, f, a_text, c, read) is not None
                       and not _beside(cf, c, key)]
    if not anchored_others:
        return FactCheck(text, "name", "supported")
    comp = best_slot(cf, f, anchored_others, topic, tight=True)
    assert comp is not None
    if comp[0] < opts.bind_min:
        return FactCheck(text, "name", "supported")
    if any(_anchor_of(cf, f, a_text, c, read) is not None
           for sid in same_sids for c in cf.slots(sid)
           if c.name is not None and same_name(key, c.key)):
        return FactCheck(text, "name", "supported")
    other = comp[1]
    assert other.name is not None
    # A competitor the answer also names is swapped only if it is misplaced too.
    for g in mentioned:
        if same_name(g.key, other.key):
            g_here = [c for sid in cf.name_sids(g.key) for c in cf.slots(sid)
                      if c.name is not None and same_name(g.key, c.key)
                      and _anchor_of(cf, g, a_text, c, read) is not None]
            g_there = [c for sid in same_sids for c in cf.slots(sid)
                       if c.name is not None and same_name(key, c.key)
                       and _anchor_of(cf, g, a_text, c, read) is not None]
            if g_here or not g_there:
                return FactCheck(text, "name", "supported")
    return FactCheck(text, "name", "contradicted",
                     f"{text}: the context puts {other.name.text} there", binding=True)


def _variant(cf: ContextFacts, key: frozenset[str], others: Sequence[Fact],
             question: QuestionFacts | None) -> str | None:
    """The aligned context name that ``key`` (a name the context lacks) varies in one
    word (:mod:`gateway.text.name_variants`), or ``None``."""
    if len(key) < 2 or not others:
        return None
    names = question.names if question is not None else ()
    got = name_variant(key, [c.key for c in others if len(c.key) == len(key)],
                       lambda w: cf.index.resolve(w) is not None or any(w in q for q in names))
    if got is None:
        return None
    return next(c.name.text for c in others if c.key == got and c.name is not None)


def _anchor_of(cf: ContextFacts, f: Fact, a_text: str, c: Fact,
               read: dict[tuple[int, int, int], Sides] | None = None) -> Anchor | None:
    """The anchor between answer mention ``f`` and context mention ``c`` if it is a copy's
    (``read``: the mentions' words already read, by (sentence or -1, start, end))."""
    sid = sid_of(cf, c)
    if sid is None or f.name is None or c.name is None:
        return None
    if read is None:
        read = {}
    a_key = (-1, f.name.start, f.name.end)
    a = read.get(a_key)
    if a is None:
        a = read[a_key] = sides(a_text, f.name.start, f.name.end)
    c_key = (sid, c.name.start, c.name.end)
    b = read.get(c_key)
    if b is None:
        b = read[c_key] = _context_sides(cf, c_key)
    return _copy_anchor(a, b)


def _copy_anchor(a: Sides, b: Sides) -> Anchor | None:
    """``anchor_sides(a, b)`` if :func:`anchored`, else ``None``; with no position
    matched on either side (most pairs) there is no content word matched, so no anchor
    (the position-wise compare runs in C, no :class:`Anchor` is built)."""
    if not any(map(eq, a[0], b[0])) and not any(map(eq, a[1], b[1])):
        return None
    got = anchor_sides(a, b)
    return got if anchored(got) else None


SIDES_KEY = "gateway.layers._grounding_names.sides"
"""Index memo key (``TextIndex.memo``) of the context mentions' :func:`sides`, by
(sentence, start, end): context-side words, read once per context (a cached index
keeps them across requests) instead of once per answer sentence that asks. Never
mutated; nothing in them refers to the index."""


def _context_sides(cf: ContextFacts, key: tuple[int, int, int]) -> Sides:
    memo = cf.index.memo
    known = memo.get(SIDES_KEY)
    if not isinstance(known, dict):
        known = memo[SIDES_KEY] = {}
    got: Sides | None = known.get(key)
    if got is None:
        sid, start, end = key
        got = known[key] = sides(cf.index.sentences[sid].text, start, end)
    return got


def _beside(cf: ContextFacts, c: Fact, key: frozenset[str]) -> bool:
    """Whether ``c`` stands beside a mention of ``key`` in its sentence: listed with it
    ("Ferrari and Sebastian Vettel", "Osnabrück, Münster"), or qualifying it right after
    it ("the Eiffel Tower in Paris is 330 metres tall" — an answer that leaves the
    qualifier out copies the sentence without swapping)."""
    sid = sid_of(cf, c)
    if sid is None or c.name is None:
        return False
    text = cf.index.sentences[sid].text
    for g in cf.slots(sid):
        if g.name is None or g is c or not same_name(key, g.key):
            continue
        a, b = (g.name, c.name) if g.name.start < c.name.start else (c.name, g.name)
        between = text[a.end:b.start]
        if _COORD.fullmatch(between) or (a is g.name and _QUALIFIER.fullmatch(between)):
            return True
    return False


_QUALIFIER = re.compile(r"\s*,?\s*(?:in|of|at|near|from|outside|inside)\s+(?:the\s+)?",
                        re.IGNORECASE)
"""What joins a name to the place or body that qualifies it ("… in Paris", "… of the
United States")."""


_DENIED = re.compile(r"\b(?:not|never|instead\s+of|rather\s+than|in\s+place\s+of)"
                     r"(?:\s+(?:the|a|an))?\s*$", re.IGNORECASE)
"""The words before a mention that deny it ("…, not Tom Cruise")."""

_COORD = re.compile(r"\s*(?:,\s*(?:and\s+|or\s+)?|and\s+|or\s+|&\s*|/\s*)")
