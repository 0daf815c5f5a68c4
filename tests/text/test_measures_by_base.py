"""``ContextFacts.same_base`` reads only the measures of a sentence with the asked base
value (``gateway.text.measures.NumberMeasures``: every number's unit, but a qualifier
and a range partner only where the value can be the one asked for, and no value
written without digits). Each answer must be the full read's (``sentence_measures``,
filtered), on the forms that shortcut reasons about and on real documents."""

from __future__ import annotations

import pytest
from corpus_texts import real_texts

from gateway.text import measures as M
from gateway.text.context_facts import ContextFacts
from gateway.text.index import build_index
from gateway.text.units import factors_of

FORMS = [
    "The cable is 1.5 to 13 mm thick and about 5 to 7 m long.",
    "Take up to 10 mg, not more than 20 mg a day, or 2 to 3 kg of it.",
    "Between 2 and 3 kg, 4 or 5 litres, and 6-8 km were used.",
    "In 1896 the 1500 kg bell rang at 10:05 and 2 pm; 12 people came at noon.",
    "It took half an hour and 30 minutes, then an hour, or 3,600 seconds.",
    "A tenth of them, 10 %, or one quarter (25%) said so; 50 patients and 50 % agreed.",
    "More than 40 km/h, under 2,000 feet, about $300 or £300 and 400,000 pounds.",
    "The 5th of 5 runs lasted 5 minutes, 5 hours and 5 days: 300 seconds in all.",
    "He was 30 years old in 1990, 30 later, for 30 years or 360 months.",
    "Doses of 5 mg to 5 g, 0.5 to 1.5 litres and 1,000 ml or 1 l were given.",
]


def _keys(measures: list[M.Measure]) -> set[tuple[str, float]]:
    """Every (dimension, base) a measure has, and its number in every unit of it."""
    keys = {(m.base_dim, m.base) for m in measures}
    for m in measures:
        for dim in (m.base_dim, "count", "length", "time", "percent", "clock"):
            keys.update((dim, m.value * f) for f in (1.0, *factors_of(dim)))
    return keys


def _compare(text: str) -> tuple[int, int]:
    """(answers the shortcut gave, answers it left to the full read) for every sentence
    of ``text``; each given one equal to the full read's."""
    index = build_index([("c", text)])
    cf = ContextFacts(index)
    given = left = 0
    for sid in sorted(index.facts().by_sentence):
        full = cf.measures(sid)
        values = M.NumberMeasures(*cf._facts_of(sid))
        for dim, base in sorted(_keys(full)):
            got = values.with_base(dim, base)
            if got is None:
                left += 1
                continue
            given += 1
            assert got == [m for m in full if m.base_dim == dim and m.base == base], \
                (index.sentences[sid].text, dim, base)
    return given, left


@pytest.mark.parametrize("text", FORMS)
def test_forms(text: str) -> None:
    given, left = _compare(text)
    assert given and left  # both paths taken: values with digits, and "an hour"-like bases


def test_real_documents() -> None:
    given = left = 0
    for text in real_texts():
        g, x = _compare(text)
        given, left = given + g, left + x
    assert given > 5 * left  # most questions (the keys include every clock and "an hour" base)


def test_same_base_is_the_full_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through ``ContextFacts`` (prepared or not): what it gave when every sentence it
    looked at was read in full; and a sentence's full read after reads by base value
    (:meth:`NumberMeasures.every`) is ``sentence_measures``'."""
    texts = [t for t in real_texts() if len(t) > 2000][:40] + [" ".join(FORMS)]
    for i, text in enumerate(texts):
        fast = ContextFacts(build_index([("c", text)]))
        if i % 2:
            fast.prepare()  # the sentences stating each number, read before the answer
        with monkeypatch.context() as m:
            m.setattr(M.NumberMeasures, "with_base", lambda self, dim, base: None)
            slow = ContextFacts(build_index([("c", text)]))
            keys = sorted(_keys([x for sid in sorted(slow.index.facts().by_sentence)
                                 for x in slow.measures(sid)]))
            slow = ContextFacts(build_index([("c", text)]))
            want = [slow.same_base(dim, base) for dim, base in keys]
        assert [fast.same_base(dim, base) for dim, base in keys] == want, text[:80]
        # A sentence read by base value first, then in full, reuses the units it read.
        sids = sorted(fast.index.facts().by_sentence)
        assert any(sid in fast._values for sid in sids)
        assert [fast.measures(sid) for sid in sids] == [
            M.sentence_measures(*fast._facts_of(sid), fast.index.sentences[sid].tokens)
            for sid in sids]
