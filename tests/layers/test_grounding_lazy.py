"""The grounding layer's context side is read lazily (only what an answer asks for), or
eagerly by ``prepare`` while the upstream answers, or from a cached index whose memos
other answers filled: all three give the same result, field for field, on the labelled
cases (the hand-written RAG suites and a third of HaluEval dev)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import yaml

from gateway.eval.cases import Case, load_cases, to_messages
from gateway.layers.base import LayerResources, VerifyInput
from gateway.layers.grounding import GroundingConfig, GroundingLayer
from gateway.sources.context import ContextSpec, extract_context

ROOT = Path(__file__).resolve().parents[2]


def _cases() -> list[Case]:
    rag = [c for name in ("tests/data/rag-dev.jsonl", "tests/data/rag-extra.jsonl")
           for c in load_cases(ROOT / name)]
    return rag + load_cases(ROOT / "data/halueval/halueval-dev.jsonl")[::3]


def _input(case: Case) -> VerifyInput:
    messages = to_messages(case)
    return VerifyInput(messages=messages, response_text=case.answer,
                       context=extract_context(messages, ContextSpec()))


def _shipped() -> GroundingConfig:
    policy = yaml.safe_load((ROOT / "policies/grounding.yaml").read_text())
    layer = next(rl for rl in policy["layers"] if rl["name"] == "grounding")
    return GroundingConfig(**layer.get("config", {}))


def test_lazy_prepared_and_cached_contexts_give_the_same_results() -> None:
    cases = _cases()
    assert len(cases) > 500  # 514: rag-dev, rag-extra and 217 of HaluEval dev

    async def run(cfg: GroundingConfig) -> None:
        cached = GroundingLayer(cfg, LayerResources())
        for case in reversed(cases):  # fill the cached indexes' memos with other answers
            await cached.verify(_input(case))
        for case in cases:
            lazy = await GroundingLayer(cfg, LayerResources()).verify(_input(case))
            eager_layer = GroundingLayer(cfg, LayerResources())
            inp = _input(case)
            assert inp.context is not None
            eager_layer.prepare(inp.context)
            eager = await eager_layer.verify(inp)
            warm = await cached.verify(_input(case))
            want = dataclasses.asdict(lazy)
            assert dataclasses.asdict(eager) == want, case.answer[:60]
            assert dataclasses.asdict(warm) == want, case.answer[:60]

    asyncio.run(run(_shipped()))
