"""The ``self-consistency`` layer against a real scripted server used as the judge.

Each prompt variation has its own lead sentence; the scripted server's rules pick
the reply by that lead, so one variation can disagree while the others agree.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from serving import ServedUpstream

from gateway.sources.context import ContextSpec, extract_context
from gateway.upstream.judge import OpenAIJudge
from gateway.layers.self_consistency import (
    VARIATIONS,
    SelfConsistencyConfig,
    SelfConsistencyLayer,
)
from gateway.testing.scripted import Rule
from gateway.settings import JudgeConfig
from gateway.layers.base import JudgeError, LayerResources, LayerUnavailable, VerifyInput
from gateway.layers.registry import resolve

pytestmark = pytest.mark.anyio

MODEL = "scripted-small"
CONTEXT = "The Eiffel Tower is 330 metres tall. It was completed in 1889."
ONE = "The Eiffel Tower is 330 metres tall."
TWO = "It was completed in 1925."
QUESTION = "Tell me about the Eiffel Tower."


def votes(*items: tuple[bool | str, float]) -> str:
    return json.dumps({"results": [{"id": i, "agrees": a, "confidence": c,
                                    "reason": "ok" if a is True else "the context says 1889"}
                                   for i, (a, c) in enumerate(items, 1)]})


def exchange(answer: str, context: str | None = CONTEXT) -> VerifyInput:
    messages: list[dict[str, Any]] = [{"role": "system", "content": context}] if context else []
    messages.append({"role": "user", "content": QUESTION})
    return VerifyInput(messages=messages, response_text=answer, model=MODEL,
                       context=extract_context(messages, ContextSpec()))


@pytest.fixture
async def judge(upstream: ServedUpstream, anyio_backend: str) -> AsyncIterator[OpenAIJudge]:
    j = OpenAIJudge(JudgeConfig(price_per_1k_input=1.0), upstream.base_url, None)
    yield j
    await j.aclose()


def layer(judge: OpenAIJudge | None, **config: Any) -> SelfConsistencyLayer:
    return SelfConsistencyLayer(SelfConsistencyConfig.model_validate(config),
                                LayerResources(judge=judge))


def prompts(upstream: ServedUpstream) -> list[str]:
    return [str(r["json"]["messages"][-1]["content"]) for r in upstream.requests
            if r["path"] == "/v1/chat/completions"]


def test_registered_as_self_consistency() -> None:
    assert resolve("self-consistency") is SelfConsistencyLayer


async def test_agreement_everywhere_passes_with_rate_times_confidence(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(r"\n1\. .*\n2\. ", votes((True, 0.9), (True, 0.9)))]
    result = await layer(judge).verify(exchange(f"{ONE} It was completed in 1889."))
    assert result.passed and result.label == "consistent" and result.failed_claims == []
    assert result.score == pytest.approx(1.0 * 0.9)
    assert result.judge_calls == 3 and not result.cache_hit and result.cost > 0
    sent = prompts(upstream)
    assert len(set(sent)) == 3  # three different wordings ...
    assert all(CONTEXT in p and QUESTION in p and '"agrees"' in p for p in sent)
    asked = {lead for lead, _, _ in VARIATIONS if any(lead in p for p in sent)}
    assert asked == {lead for lead, _, _ in VARIATIONS[:3]}  # the first three leads
    assert all(r["json"]["model"] == MODEL for r in upstream.requests)


async def test_a_claim_rejected_by_one_variation_fails_at_the_seed_threshold(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [
        Rule(r"Verify each of these claims", votes((True, 0.9), (False, 0.6))),
        Rule(r"\n1\. .*\n2\. ", votes((True, 0.9), (True, 0.9)))]
    result = await layer(judge).verify(exchange(f"{ONE} {TWO}"))
    assert not result.passed and result.label == "inconsistent"
    assert result.failed_claims == [TWO]  # 2/3 < 0.8; ONE stays 3/3
    assert result.score == pytest.approx((5 / 6) * ((5 * 0.9 + 0.6) / 6))
    assert result.details["consistency_rate"] == pytest.approx(5 / 6)
    assert [(e.text, e.status) for e in result.evidence] == [
        (ONE, "consistent"), (TWO, "inconsistent")]
    assert result.evidence[1].reason == "2/3 variations agree; the context says 1889"

    lenient = await layer(judge, min_consistency=0.6).verify(exchange(f"{ONE} {TWO}"))
    assert lenient.passed and lenient.cache_hit and lenient.cost == 0.0  # same prompts again
    assert lenient.judge_calls == 3


async def test_five_variations_and_no_context_use_the_judges_knowledge(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(r"\n1\. ", votes((True, 1.0)))]
    result = await layer(judge, variations=5).verify(exchange(ONE, context=None))
    assert result.passed and result.judge_calls == 5
    sent = prompts(upstream)
    assert all(any(v[0] in p for p in sent) for v in VARIATIONS)
    assert not any("Context:" in p for p in sent)
    assert any("accurate given what you know?" in p for p in sent)
    assert "the judge's own knowledge" in result.explanation

    upstream.requests.clear()  # use_context: false sends exactly the context-free prompt
    again = await layer(judge, use_context=False, variations=1).verify(exchange(ONE))
    assert again.cache_hit and prompts(upstream) == []


async def test_claims_are_bounded(upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(r"\n1\. ", votes((True, 1.0)))]
    result = await layer(judge, max_claims=1, variations=1).verify(exchange(f"{ONE} {TWO}"))
    assert [e.text for e in result.evidence] == [ONE]
    assert "2. " not in prompts(upstream)[0].split("1. ", 1)[1]


@pytest.mark.parametrize("reply, match", [
    ("I agree with all of it.", "not JSON"),
    (votes(("maybe", 0.5), (True, 0.5)), "no usable 'agrees'"),
    (votes((True, 0.5)), r"misses items \[2\]"),
])
async def test_unusable_replies_raise_judge_error(upstream: ServedUpstream, judge: OpenAIJudge,
                                                 reply: str, match: str) -> None:
    upstream.app.rules = [Rule(r"\n1\. ", reply)]
    with pytest.raises(JudgeError, match=match):
        await layer(judge).verify(exchange(f"{ONE} {TWO}"))


async def test_without_a_judge_the_layer_is_unavailable() -> None:
    with pytest.raises(LayerUnavailable, match="needs a judge"):
        await layer(None).verify(exchange(ONE))


@pytest.mark.parametrize("answer", ["", "Hi there!"])
async def test_nothing_checkable_is_skipped_even_without_a_judge(answer: str) -> None:
    """Skipping comes before needing the judge (as in ``audit`` and ``fact-check``)."""
    result = await layer(None).verify(exchange(answer))
    assert result.skipped and result.passed and result.score == 0.5
    assert result.judge_calls == 0
    assert result.explanation == "nothing to check: no checkable answer sentence"


async def test_nothing_checkable_is_skipped(upstream: ServedUpstream,
                                            judge: OpenAIJudge) -> None:
    result = await layer(judge).verify(exchange("Hi there!"))
    assert result.skipped and result.passed and result.judge_calls == 0
    assert prompts(upstream) == []
