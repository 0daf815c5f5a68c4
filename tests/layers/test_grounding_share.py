"""The grounding layers of one job share the answer's sentence cores (``AnswerShare``):
the results must be exactly those of layers verifying alone, on the labelled corpora.

A job verifies one answer with its policy and its candidates on one request context
(``JobScope``): the shipped ``default`` policy's grounding layer (default config) and
its ``grounding`` candidate's (``policies/grounding.yaml``) read the same answer, and
the second reuses the first's cores."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.eval.cases import Case, load_cases, to_messages
from gateway.layers._grounding_answer import AnswerShare, core_key
from gateway.layers._grounding_sentence import FINISH_ONLY
from gateway.layers.base import LayerResources, VerifyInput
from gateway.layers.grounding import SHARE_KEY, GroundingConfig, GroundingLayer
from gateway.sources.context import ContextSpec, extract_context

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ("tests/data/rag-dev.jsonl", "tests/data/rag-extra.jsonl",
           "data/halueval/halueval-dev.jsonl")


def _policy_config() -> dict[str, Any]:
    policy = yaml.safe_load((ROOT / "policies" / "grounding.yaml").read_text())
    return next(layer["config"] for layer in policy["layers"] if layer["name"] == "grounding")


def _cases() -> list[Case]:
    return [c for name in CORPORA for c in load_cases(ROOT / name)]


def _input(case: Case) -> VerifyInput:
    messages = to_messages(case)
    return VerifyInput(messages=messages, response_text=case.answer,
                       context=extract_context(messages, ContextSpec()))


def _dump(result: object) -> dict[str, Any]:
    return dataclasses.asdict(result)  # type: ignore[call-overload, no-any-return]


CONFIGS = {
    "default": {},
    "shipped": _policy_config(),
    # Every FINISH_ONLY field moved: still the same cores, other scores.
    "rescored": {"threshold": 0.8, "sentence_threshold": 0.4, "word_weight": 0.7,
                 "entity_weight": 0.3, "number_weight": 0.5, "contradiction_weight": 0.9,
                 "max_weight": 0.2, "share_weight": 0.3, "count_scale": 3.0,
                 "rare_weight": 0.6, "name_rarity": 3.0, "rare_min_length": 6,
                 "contradiction_boost": 1.5, "opinion_weight": 0.3,
                 "anchored_word_weight": 0.4, "length_allowance": 1.2,
                 "sentence_allowance": 0.8, "within_allowance_weight": 0.1,
                 "negation_min_coverage": 0.5, "negation_scope": True,
                 "shape_scale": {"passage": 1.0}, "shape_power": {"passage": 2.0},
                 "long_context_boost": 0.5, "summary_context_sentences": 3,
                 "max_evidence": 5, "index_cache_chars": 0},
}


def test_finish_only_names_config_fields() -> None:
    assert set(GroundingConfig.model_fields) >= FINISH_ONLY
    assert set(CONFIGS["rescored"]) == FINISH_ONLY  # the test below moves every one


def test_core_key_ignores_only_finish_fields() -> None:
    keys = {core_key(GroundingConfig(**c)) for c in CONFIGS.values()}
    assert len(keys) == 1
    assert core_key(GroundingConfig(local_window=2)) != core_key(GroundingConfig())
    assert core_key(GroundingConfig(use_question=False)) != core_key(GroundingConfig())


@pytest.mark.parametrize(("order", "stride"), [(("default", "shipped", "rescored"), 1),
                                               (("rescored", "shipped", "default"), 4)])
def test_shared_cores_change_no_result(order: tuple[str, ...], stride: int) -> None:
    layers = {n: GroundingLayer(GroundingConfig(**CONFIGS[n]), LayerResources())
              for n in order}

    async def go() -> tuple[int, int]:
        cases = shared = 0
        for case in _cases()[::stride]:
            inp = _input(case)  # one context for the job: its memo holds the share
            for name in order:
                alone = await layers[name].verify(_input(case))
                together = await layers[name].verify(inp)
                assert _dump(together) == _dump(alone), (name, case.answer[:60])
            share = inp.context.memo(SHARE_KEY, AnswerShare) if inp.context else None
            if share is not None and share._kept:
                shared += 1
                assert len(share._kept) == 1  # one core list, read by all three
            cases += 1
        return cases, shared

    cases, shared = asyncio.run(go())
    assert cases > 900 // stride and shared > 800 // stride


def test_other_core_config_is_not_shared() -> None:
    a = GroundingLayer(GroundingConfig(), LayerResources())
    b = GroundingLayer(GroundingConfig(local_window=1), LayerResources())
    case = next(c for c in load_cases(ROOT / CORPORA[0]) if len(c.answer.split()) > 20)

    async def go() -> None:
        inp = _input(case)
        await a.verify(inp)
        got = await b.verify(inp)
        assert _dump(got) == _dump(await b.verify(_input(case)))
        assert len(inp.context.memo(SHARE_KEY, AnswerShare)._kept) == 2

    asyncio.run(go())
