"""A ``brief`` verification (``VerifyInput.brief``: what the pipeline asks for) gives
the same verdict fields as the full one; only ``evidence`` and ``details`` are left
empty, and ``claims`` skips typing its names (``detect_claims(typed=False)``).

Checked on the repository's labelled cases (the RAG suite, HaluEval dev's first rows,
tests/corpus_texts.py) against the full result of the same layer and input (the
pipeline's :class:`~gateway.verify.outcome.LayerOutcome` keeps neither field).
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from corpus_texts import real_texts

from gateway.eval.cases import Case, load_cases, to_messages
from gateway.layers.base import LayerResources, LayerResult, VerifyInput
from gateway.layers.citations import CitationsConfig, CitationsLayer
from gateway.layers.claims import ClaimsConfig, ClaimsLayer
from gateway.layers.grounding import GroundingConfig, GroundingLayer
from gateway.sources.context import ContextSpec, extract_context
from gateway.text.answer import analyze_answer
from gateway.text.claims import detect_claims

ROOT = Path(__file__).resolve().parents[2]
CASES = ("tests/data/rag-dev.jsonl", "tests/data/rag-extra.jsonl")


def _cases() -> list[Case]:
    cases = [c for name in CASES for c in load_cases(ROOT / name)]
    return cases + load_cases(ROOT / "data/halueval/halueval-dev.jsonl")[:150]


def _verdict(r: LayerResult) -> dict[str, Any]:
    d = dataclasses.asdict(r)
    d.pop("evidence"), d.pop("details")
    return d


def _layers() -> list[Any]:
    shipped = {"summary_context_sentences": 6, "negation_scope": True, "name_variants": True,
               "attribution_prefixes": True, "comparisons": True,
               "shape_scale": {"passage": 1.302, "conversation": 0.10, "document": 0.50},
               "shape_power": {"passage": 0.5, "conversation": 1.0, "document": 3.0}}
    res = LayerResources()
    return [GroundingLayer(GroundingConfig(), res), GroundingLayer(GroundingConfig(**shipped), res),
            ClaimsLayer(ClaimsConfig(), res), ClaimsLayer(ClaimsConfig(threshold=0.6), res),
            ClaimsLayer(ClaimsConfig(min_claims=3, max_evidence=1), res),
            CitationsLayer(CitationsConfig(), res)]


def test_brief_results_keep_every_verdict_field() -> None:
    cases = _cases()
    emptied = 0

    async def go() -> None:
        nonlocal emptied
        for layer in _layers():
            for case in cases:
                messages = to_messages(case)
                # Separate contexts: nothing the first run memoizes serves the second.
                full = await layer.verify(VerifyInput(
                    messages=messages, response_text=case.answer,
                    context=extract_context(messages, ContextSpec())))
                brief = await layer.verify(VerifyInput(
                    messages=messages, response_text=case.answer, brief=True,
                    context=extract_context(messages, ContextSpec())))
                assert _verdict(brief) == _verdict(full), (layer.name, case.id)
                if full.evidence or full.details:
                    emptied += brief.evidence == [] and brief.details == {}

    asyncio.run(go())
    assert emptied > len(cases)  # the brief results did leave something out


@pytest.mark.parametrize("source", ["cases", "corpus"])
def test_untyped_claims_differ_only_in_the_names_types(source: str) -> None:
    texts = [c.answer for c in _cases()] if source == "cases" else list(real_texts())
    retyped = 0
    for text in texts:
        analyzed = analyze_answer(text)
        typed, untyped = detect_claims(text, analyzed), detect_claims(text, analyzed, typed=False)
        assert len(typed) == len(untyped)
        for a, b in zip(typed, untyped, strict=True):
            assert (a.id, a.text, a.types, a.classification, a.start, a.end) == (
                b.id, b.text, b.types, b.classification, b.start, b.end)
            assert [(e.text, e.start, e.end) for e in a.entities] == [
                (e.text, e.start, e.end) for e in b.entities]
            for e, u in zip(a.entities, b.entities, strict=True):
                named = e.type in ("PERSON", "ORG", "LOCATION", "MISC")
                assert u.type == ("MISC" if named else e.type)
                retyped += e.type != u.type
    assert retyped > 10  # typing was skipped for real names
