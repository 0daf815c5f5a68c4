"""The grounding layer's answer-side shortcuts give what the checks without them give,
on the repository's labelled cases (tests/corpus_texts.py and the case files).

- an entity is looked for among a sentence's unsupported words only when one of them is
  a substring of it (a token of a text is a substring of its lower-cased form);
- a mention's surrounding words are read once per name check (``_anchor_of``'s cache);
- the question's slots are built only when it states a value (only a value can be a
  false premise)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from corpus_texts import real_texts

from gateway.eval.cases import Case, load_cases, to_messages
from gateway.layers import _grounding_names, _grounding_question
from gateway.layers._grounding_bind import FactOptions
from gateway.layers.base import LayerResources, VerifyInput
from gateway.layers.grounding import GroundingConfig, GroundingLayer
from gateway.sources.context import ContextSpec, extract_context
from gateway.text.context_facts import context_facts
from gateway.text.index import build_index
from gateway.text.measures import sentence_measures, years_as_measures
from gateway.text.quantities import extract_quantities
from gateway.text.slots import sentence_slots
from gateway.text.tokens import content_words, entity_candidates, split_sentences, tokenize

ROOT = Path(__file__).resolve().parents[2]
CASES = ("tests/data/rag-dev.jsonl", "tests/data/rag-extra.jsonl")


def _cases() -> list[Case]:
    return [c for name in CASES for c in load_cases(ROOT / name)]


def _dumps(layer: GroundingLayer, cases: list[Case]) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        out = []
        for case in cases:
            messages = to_messages(case)
            inp = VerifyInput(messages=messages, response_text=case.answer,
                              context=extract_context(messages, ContextSpec()))
            out.append(dataclasses.asdict(await layer.verify(inp)))
        return out

    return asyncio.run(go())


def test_entity_tokens_are_substrings_of_the_entity() -> None:
    seen = 0
    for text in real_texts():
        for sentence in split_sentences(text):
            for ent in entity_candidates(sentence.text):
                low = ent.text.lower()
                for word in content_words(tokenize(ent.text)):
                    assert word in low, (ent.text, word)
                    seen += 1
    assert seen > 5000


@pytest.mark.parametrize("config", [{}, {"negation_scope": True}])
def test_mention_words_read_once_change_nothing(monkeypatch: pytest.MonkeyPatch,
                                                config: dict[str, Any]) -> None:
    cases = _cases()
    layer = GroundingLayer(GroundingConfig(**config), LayerResources())
    fast = _dumps(layer, cases)
    real = _grounding_names._anchor_of
    calls = []

    def uncached(cf: Any, f: Any, a_text: str, c: Any, read: Any = None) -> Any:
        calls.append(1)
        return real(cf, f, a_text, c, None)  # every mention read anew

    monkeypatch.setattr(_grounding_names, "_anchor_of", uncached)
    slow = _dumps(GroundingLayer(GroundingConfig(**config), LayerResources()), cases)
    assert len(calls) > 100
    assert fast == slow


def test_question_without_values_has_no_value_slot() -> None:
    """``question_facts`` reads only the slots that hold a value; a question sentence
    without values has none (the slots it no longer builds), on every labelled question."""
    sentences = with_values = 0
    for case in _cases():
        for span in split_sentences(case.question):
            dates, numbers = extract_quantities(span.text)
            measures = sentence_measures(span.text, numbers, dates)
            dates = years_as_measures(span.text, dates)[0]
            slots = sentence_slots(span.text, measures, dates, entity_candidates(span.text))
            if measures:
                with_values += 1
            else:
                assert all(f.measure is None for f in slots), span.text
            sentences += 1
    assert sentences > 200 and with_values > 10


def test_question_facts_on_questions_with_and_without_values() -> None:
    """Questions that state values still get their false premises read."""
    cf = context_facts(build_index([("c", "The rent is 1,450 euros per month. "
                                          "The tower is 330 m tall.")]))
    got = _grounding_question.question_facts(
        "Summarize the lease. The rent is 1,650 euros per month, right?", cf, FactOptions())
    assert [m.text for m in got.false] == ["1,650 euros"]
    assert _grounding_question.question_facts("Summarize the lease.", cf,
                                              FactOptions()).false == []


def _split_joined(text: str) -> list[str]:
    """What ``question_facts`` read before: the question index's sentences joined by
    spaces, split again (the reference of ``question_sentences``)."""
    index = build_index([("question", text)])
    return [s.text for s in split_sentences(" ".join(s.text for s in index.sentences))]


def test_question_sentences_are_the_joined_split_on_every_labelled_text() -> None:
    """The index's own sentences are taken only when re-splitting their join gives
    them: every labelled question and string, and the texts a join changes (line
    breaks inside and between sentences, doubled spaces, blank ones)."""
    texts = [c.question for c in _cases()] + list(real_texts())
    texts += ["Summarize the document.", "", "   ", "Who won?\nWhen?",
              "The U.S.\nArmy said so. Why?", "Dr.\nSmith came.  Then what?",
              "a line\nbroken mid sentence and. Lower case after", " Lead. Trail. ",
              "One.\n\nTwo.", "Is it 5\n km? Yes."]
    reused = 0
    for text in texts:
        index = build_index([("question", text)])
        got = _grounding_question.question_sentences(index)
        assert got == _split_joined(text), text[:80]
        reused += got is not None and len(index.docs) == 1 and \
            " ".join(s.text for s in index.sentences) == index.docs[0].text
    assert len(texts) > 1000 and reused > 300


def test_question_facts_of_the_index_are_those_of_its_joined_text() -> None:
    cf = context_facts(build_index([("c", "The rent is 1,450 euros per month. "
                                          "The tower is 330 m tall.")]))
    for text in ("Summarize the lease.\nThe rent is 1,650 euros per month, right?",
                 "Summarize the lease. The rent is 1,650 euros per month, right?"):
        joined = " ".join(s.text for s in build_index([("q", text)]).sentences)
        a = _grounding_question.question_facts(build_index([("q", text)]), cf,
                                               FactOptions())
        b = _grounding_question.question_facts(joined, cf, FactOptions())
        assert a == b and [m.text for m in a.false] == ["1,650 euros"]


def test_has_text_is_the_joined_text_not_blank() -> None:
    from gateway.layers.grounding import _has_text
    from gateway.sources.context import Document, GroundingContext

    blanks = ["", " ", "\n\n", "\u00a0", "\u2003\t", "\u200b"]  # U+200B is no whitespace
    texts = [*blanks, *(t[:40] for t in real_texts())]
    for i, text in enumerate(texts[:400]):
        for other in blanks:
            docs = [Document(id="a", text=text, kind="system"),
                    Document(id="b", text=other, kind="block")]
            ctx = GroundingContext(documents=docs)
            assert _has_text(ctx) == bool(ctx.text.strip()), (i, text)


def test_a_words_context_form_is_one_of_its_variants() -> None:
    """A word whose resolved form is in a near sentence is near (``sentence_core``'s
    first test of ``far``): ``resolve`` only returns one of the word's ``variants``."""
    from gateway.text.tokens import variants

    texts = [t for t in real_texts() if len(t) > 400][:60]
    found = 0
    for i, text in enumerate(texts):
        index = build_index([("c", text)])
        other = texts[(i + 1) % len(texts)] + " " + text[:300]
        for word in content_words(tokenize(other)):
            form = index.resolve(word)
            if form is not None:
                assert form in variants(word), (word, form)
                found += form != word
    assert found > 10  # forms other than the word itself were seen
