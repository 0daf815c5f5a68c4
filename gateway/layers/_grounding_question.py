"""The user's question as the ``grounding`` layer reads it: values, dates and names that
are no evidence against the context.

:func:`question_facts` reads the question once per answer. A value it *asserts* ("The
rent is €1,650, so…") that the context states otherwise in the same frame is a false
premise (:attr:`QuestionFacts.false`): it supports no answer value, and an answer value
derived only from it is contradicted (``_grounding_facts``). A value it only supposes
("on a $1,000 investment") is a hypothetical: an operand, never checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gateway.layers._grounding_bind import MAX_SAME, FactOptions, best_slot
from gateway.text.context_facts import ContextFacts
from gateway.text.index import TextIndex
from gateway.text.measure_relation import CONFLICT, MATCH, relation
from gateway.text.measures import Measure, sentence_measures, years_as_measures
from gateway.text.names import name_key
from gateway.text.quantities import DateRef, extract_quantities
from gateway.text.slots import sentence_slots
from gateway.text.tokens import entity_candidates, split_sentences

__all__ = ["QuestionFacts", "question_facts"]


@dataclass(slots=True)
class QuestionFacts:
    """The user question's values, dates and names (never evidence against the context)."""

    measures: list[Measure] = field(default_factory=list)
    dates: list[DateRef] = field(default_factory=list)
    names: list[frozenset[str]] = field(default_factory=list)
    false: list[Measure] = field(default_factory=list)
    """Values the question asserts and the context contradicts ("The rent is €1,650")."""

    def support(self, a: Measure) -> bool:
        """Whether a value the question states, and the context does not contradict,
        matches ``a``."""
        return any(relation(a, q) == MATCH for q in self.measures
                   if not any(q is f for f in self.false))


_HYPOTHETICAL = re.compile(r"(?:\b(?:an?|per|each|every|say|if|like|of|suppose)\s*|[$£€¥])$",
                           re.IGNORECASE)


def question_sentences(question: TextIndex) -> list[str]:
    """The sentences of the question's index joined by spaces, split again: what
    :func:`question_facts` reads of the question. When that join is the indexed text
    itself (one document, its sentences one space apart: "Summarize the document."),
    its split is the index's own, taken as is (the split costs ~13 k instructions);
    otherwise (a sentence cut at a line break joins into one) split again."""
    texts = [s.text for s in question.sentences]
    docs = question.docs
    if len(docs) == 1 and " ".join(texts) == docs[0].text:
        return texts
    return [span.text for span in split_sentences(" ".join(texts))]


def question_facts(question: str | TextIndex, cf: ContextFacts,
                   opts: FactOptions) -> QuestionFacts:
    """The question's facts; a value it asserts ("The rent is €1,650") that the context
    states otherwise in the same frame is marked false (a premise, not evidence).
    ``question``: its text, or its index (read as :func:`question_sentences`)."""
    out = QuestionFacts()
    sentences = (question_sentences(question) if isinstance(question, TextIndex)
                 else [span.text for span in split_sentences(question)])
    for s in sentences:
        dates, numbers = extract_quantities(s)
        measures = sentence_measures(s, numbers, dates)
        dates = years_as_measures(s, dates)[0]
        names = entity_candidates(s)
        out.measures += measures
        out.dates += dates
        out.names += [k for k in (name_key(n.text) for n in names) if k]
        if not measures:
            continue  # only a value can be a false premise (the slots' frames read it)
        for f in sentence_slots(s, measures, dates, names):
            m = f.measure
            if m is None or _HYPOTHETICAL.search(s[max(0, m.start - 9):m.start].rstrip()
                                                  + (" " if m.start else "")):
                continue
            cands = cf.by_dim().get(m.base_dim, ())
            if any(relation(m, c) == MATCH for _, c in cands):
                continue
            rivals = [c for sid in sorted({sid for sid, c in cands
                                           if relation(m, c) == CONFLICT})[:MAX_SAME]
                      for c in cf.slots(sid)
                      if c.measure is not None and relation(m, c.measure) == CONFLICT]
            best = best_slot(cf, f, rivals, ())
            if best is not None and best[0] >= opts.bind_min:
                out.false.append(m)
    return out
