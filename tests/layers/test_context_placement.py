"""Where a request puts its context does not change the grounding verdict: a system
message, or a ``<context>`` block in the user message before the question (as many RAG
apps send it). The labelled cases all use the system message, so a check that reads the
*question* could take the context's words for the user's without any of them showing it
(``question_novelty`` did: 25 of 250 RAG dev verdicts flipped). Compared on the
hand-written RAG suites and a third of HaluEval dev: the same verdict, the score within
0.01 (18 of 514 scores differ in the fourth decimal between the two placements; not
traced — the verdicts never do)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from gateway.eval.cases import Case, load_cases
from gateway.layers.base import LayerResources, VerifyInput
from gateway.layers.grounding import GroundingConfig, GroundingLayer
from gateway.sources.context import ContextSpec, extract_context

ROOT = Path(__file__).resolve().parents[2]


def _cases() -> list[Case]:
    rag = [c for name in ("tests/data/rag-dev.jsonl", "tests/data/rag-extra.jsonl")
           for c in load_cases(ROOT / name)]
    return rag + load_cases(ROOT / "data/halueval/halueval-dev.jsonl")[::3]


def _shipped() -> GroundingConfig:
    policy = yaml.safe_load((ROOT / "policies/grounding.yaml").read_text())
    layer = next(rl for rl in policy["layers"] if rl["name"] == "grounding")
    return GroundingConfig(**layer.get("config", {}))


def test_a_context_block_in_the_user_message_scores_as_a_system_message() -> None:
    cases = _cases()
    assert len(cases) > 500
    layer = GroundingLayer(_shipped(), LayerResources())

    async def score(case: Case, messages: list[dict[str, str]]) -> tuple[bool, float]:
        res = await layer.verify(VerifyInput(messages=messages, response_text=case.answer,
                                             context=extract_context(messages, ContextSpec())))
        return res.passed, res.score

    async def run() -> list[str]:
        differ = []
        for case in cases:
            system = [{"role": "system", "content": case.context},
                      {"role": "user", "content": case.question}]
            block = [{"role": "user",
                      "content": f"<context>{case.context}</context>\n\n{case.question}"}]
            (pa, a), (pb, b) = await score(case, system), await score(case, block)
            if pa != pb or abs(a - b) > 0.01:
                differ.append(f"{case.id}: {a:.4f} (system) vs {b:.4f} (block)")
        return differ

    assert asyncio.run(run()) == []
