"""The ``fact-check`` layer (seed 004) against a real scripted judge server.

The scripted upstream answers the labelling call (marker ``[verity:fact-check:label]``)
and the correction call (``[verity:fact-check:correct]``) with the JSON their
prompts ask for; a reply may be computed from the pairs the prompt lists.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
import pytest
from serving import ServedUpstream

from gateway.sources.context import ContextSpec, extract_context
from gateway.sources.corpus import Corpus, SourceMeta
from gateway.upstream.judge import OpenAIJudge
from gateway.layers.fact_check import FactCheckConfig, FactCheckLayer
from gateway.testing.scripted import Rule
from gateway.settings import JudgeConfig
from gateway.layers.base import (
    JudgeError,
    LayerResources,
    LayerResult,
    LayerUnavailable,
    VerifyInput,
)
from gateway.layers.registry import resolve

pytestmark = pytest.mark.anyio

CONTEXT = ("The Orion bridge opened in 1998. It is 1,200 meters long. "
           "The bridge carries four lanes of traffic.")
ANSWER = ("The Orion bridge opened in 1998. The Orion bridge is 1,500 meters long. "
          "The Orion bridge was designed by Marta Kell.")
LABEL = r"\[verity:fact-check:label\]"
CORRECT = r"\[verity:fact-check:correct\]"


def pairs_reply(labels: Mapping[int, tuple[str, float]]) -> str:
    return orjson.dumps({"pairs": [{"id": f"P{i}", "label": lab, "relevance": rel}
                                   for i, (lab, rel) in labels.items()]}).decode()


def inp(answer: str = ANSWER, context: str = CONTEXT,
        corpus: Mapping[str, str] | None = None) -> VerifyInput:
    messages = [{"role": "system", "content": context}] if context else []
    messages.append({"role": "user", "content": "Tell me about the Orion bridge."})
    return VerifyInput(messages=messages, response_text=answer, model="scripted-small",
                       context=extract_context(messages, ContextSpec(), corpus))


@pytest.fixture
async def judge(upstream: ServedUpstream) -> AsyncIterator[OpenAIJudge]:
    j = OpenAIJudge(JudgeConfig(cache_size=0), upstream.base_url, None)  # tests re-script
    yield j
    await j.aclose()


async def run(judge: Any, vi: VerifyInput | None = None,
              corpus: Mapping[str, str] | None = None, **config: Any) -> LayerResult:
    layer = FactCheckLayer(FactCheckConfig.model_validate(config),
                           LayerResources(judge=judge, corpus=corpus or {}))
    return await layer.verify(vi or inp())


def pair_lines(upstream: ServedUpstream) -> dict[int, tuple[str, str]]:
    """P-number -> (claim, evidence) as sent in the labelling prompt."""
    prompt = next(r["json"]["messages"][-1]["content"] for r in upstream.requests
                  if "[verity:fact-check:label]" in r["json"]["messages"][-1]["content"])
    out = {}
    for m in re.finditer(r"P(\d+)\nCLAIM: (.*)\nEVIDENCE \(source [^)]*\): (.*)", prompt):
        out[int(m.group(1))] = (m.group(2), m.group(3))
    return out


def test_registered_as_fact_check() -> None:
    assert resolve("fact-check") is FactCheckLayer


async def test_supporting_contradicting_and_no_evidence(upstream: ServedUpstream,
                                                        judge: OpenAIJudge) -> None:
    # Retrieval proposes every sentence sharing enough words; the judge sorts them out.
    upstream.app.rules = [Rule(LABEL, pairs_reply({1: ("supporting", 1.0),
                                                   2: ("contradicting", 1.0),
                                                   3: ("contextual", 0.4),
                                                   4: ("contextual", 0.1)}))]
    r = await run(judge)
    assert pair_lines(upstream) == {
        1: ("The Orion bridge opened in 1998.", "The Orion bridge opened in 1998."),
        2: ("The Orion bridge is 1,500 meters long.", "It is 1,200 meters long."),
        3: ("The Orion bridge is 1,500 meters long.", "The Orion bridge opened in 1998."),
        4: ("The Orion bridge was designed by Marta Kell.", "The Orion bridge opened in 1998.")}
    verdicts = {e.text: e.status for e in r.evidence}
    assert verdicts == {"The Orion bridge opened in 1998.": "VERIFIED",
                        "The Orion bridge is 1,500 meters long.": "CONTRADICTED",
                        "The Orion bridge was designed by Marta Kell.": "UNVERIFIABLE"}
    assert r.passed is False and r.label == "contradicted"
    assert r.failed_claims == ["The Orion bridge is 1,500 meters long."]
    assert r.score == pytest.approx((1.0 + 0.0 + 0.5) / 3)
    assert r.details["verdicts"] == {"VERIFIED": 1, "CONTRADICTED": 1, "OUTDATED": 0,
                                     "UNVERIFIABLE": 1, "PARTIAL": 0}
    assert r.judge_calls == 1 and "corrections" not in r.details  # one batched call
    contra = next(c for c in r.details["claims"] if c["verdict"] == "CONTRADICTED")
    assert contra["evidence"][0]["type"] == "contradicting"
    assert contra["evidence"][0]["content"] == "It is 1,200 meters long."
    assert next(e for e in r.evidence if e.status == "CONTRADICTED").source_span == \
        "It is 1,200 meters long."


async def test_unverifiable_score_is_configurable_and_all_verified_passes(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(LABEL, pairs_reply({1: ("supporting", 1.0)}))]
    answer = "The Orion bridge opened in 1998. The Orion bridge was designed by Marta Kell."
    r = await run(judge, inp(answer), unverifiable_score=0.0)
    assert r.passed and r.label == "partial" and r.score == pytest.approx(0.5)
    r = await run(judge, inp("The Orion bridge opened in 1998."))
    assert r.passed and r.label == "verified" and r.score == 1.0


async def test_low_confidence_is_partial(upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    # Two passages for one claim, one supporting, one contradicting: neither side dominates.
    ctx = "The Orion bridge opened in 1998. Records say the Orion bridge opened in 1999."
    upstream.app.rules = [Rule(LABEL, pairs_reply({1: ("supporting", 1.0),
                                                   2: ("contradicting", 1.0)}))]
    r = await run(judge, inp("The Orion bridge opened in 1998.", context=ctx))
    assert [e.status for e in r.evidence] == ["PARTIAL"]
    assert r.passed  # PARTIAL is not a failure
    # Support dominates (1.5x) but confidence < 0.85: VERIFIED is downgraded to PARTIAL.
    upstream.app.rules = [Rule(LABEL, pairs_reply({1: ("supporting", 1.0),
                                                   2: ("contradicting", 0.3)}))]
    r = await run(judge, inp("The Orion bridge opened in 1998.", context=ctx))
    assert r.evidence[0].status == "PARTIAL"
    assert r.details["claims"][0]["confidence"] < 0.85
    r = await run(judge, inp("The Orion bridge opened in 1998.", context=ctx),
                  confidence_threshold=0.5)
    assert r.evidence[0].status == "VERIFIED"


async def test_correction_when_asked(upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [
        Rule(LABEL, pairs_reply({1: ("supporting", 1.0), 2: ("contradicting", 0.9)})),
        Rule(CORRECT, '{"corrections": [{"id": "c1", '
                      '"corrected": "The Orion bridge is 1,200 meters long."}]}'),
    ]
    r = await run(judge, auto_correct=True)
    assert r.judge_calls == 2
    (fix,) = r.details["corrections"]
    assert fix["type"] == "replace" and fix["original"] == "The Orion bridge is 1,500 meters long."
    assert fix["corrected"] == "The Orion bridge is 1,200 meters long."
    assert 0 < fix["confidence"] <= 1 and fix["sources"] == ["system-1"]
    prompt = upstream.requests[-1]["json"]["messages"][-1]["content"]
    assert prompt.startswith("[verity:fact-check:correct]")
    assert "It is 1,200 meters long." in prompt and "opened in 1998" not in prompt


async def test_no_correction_call_when_nothing_is_wrong(upstream: ServedUpstream,
                                                         judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(LABEL, pairs_reply({1: ("supporting", 1.0)}))]
    r = await run(judge, inp("The Orion bridge opened in 1998."), auto_correct=True)
    assert r.judge_calls == 1 and r.details["corrections"] == []


async def test_corpus_evidence_uses_metadata_and_detects_outdated(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    corpus = Corpus(
        texts={"guide-2015": "The Orion bridge toll is 3 dollars per car.",
               "notice-2024": "Since March 2024 the Orion bridge toll is 5 dollars per car."},
        meta={"guide-2015": SourceMeta(authority="news_major", published="2015-01-01"),
              "notice-2024": SourceMeta(authority="government", published="2024-03-01")})
    answer = "The Orion bridge toll is 3 dollars per car."
    upstream.app.rules = [Rule(LABEL, "{\"pairs\": []}")]
    await run(judge, inp(answer, context=""), corpus=corpus)  # learn the pair order
    order = {ev: n for n, (_, ev) in pair_lines(upstream).items()}
    labels = {order["The Orion bridge toll is 3 dollars per car."]: ("supporting", 0.5),
              order["Since March 2024 the Orion bridge toll is 5 dollars per car."]:
                  ("contradicting", 1.0)}
    upstream.reset()
    upstream.app.rules = [Rule(LABEL, pairs_reply(labels))]
    r = await run(judge, inp(answer, context=""), corpus=corpus)
    (claim,) = r.details["claims"]
    assert claim["verdict"] == "OUTDATED" and r.failed_claims == [answer] and not r.passed
    recency = {e["source"]: e["recency"] for e in claim["evidence"]}
    assert recency == {"guide-2015": "2015-01-01", "notice-2024": "2024-03-01"}
    assert sorted(claim["sources"]) == ["guide-2015", "notice-2024"]
    # use_corpus: false searches the context only: nothing here, no judge call.
    upstream.reset()
    r = await run(judge, inp(answer, context=""), corpus=corpus, use_corpus=False)
    assert r.details["verdicts"]["UNVERIFIABLE"] == 1 and r.judge_calls == 0


async def test_claims_are_bounded_and_opinions_skipped(upstream: ServedUpstream,
                                                       judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(LABEL, '{"pairs": []}')]
    answer = ("I think the Orion bridge is beautiful. The Orion bridge opened in 1998. "
              "The Orion bridge is 1,500 meters long. It may carry about 40,000 cars a day.")
    r = await run(judge, inp(answer), max_claims=1)
    assert [e.text for e in r.evidence] == ["The Orion bridge opened in 1998."]
    r = await run(judge, inp("I think bridges are beautiful."))
    assert r.skipped and r.judge_calls == 0


async def test_calls_cost_and_cache(upstream: ServedUpstream) -> None:
    upstream.app.rules = [Rule(LABEL, pairs_reply({1: ("supporting", 1.0)}))]
    judge = OpenAIJudge(JudgeConfig(price_per_1k_input=1.0, price_per_1k_output=1.0),
                        upstream.base_url, None)
    try:
        first = await run(judge)
        second = await run(judge)
    finally:
        await judge.aclose()
    assert (first.judge_calls, first.cache_hit) == (1, False) and first.cost > 0
    assert (second.judge_calls, second.cache_hit, second.cost) == (1, True, 0.0)
    assert len(upstream.requests) == 1
    assert upstream.requests[0]["json"]["model"] == "scripted-small"


@pytest.mark.parametrize("reply", [
    "Sure, they all look fine.",
    '{"pairs": "all supporting"}',
    '{"pairs": [{"id": "P1", "label": "true", "relevance": 1}]}',
    '{"pairs": [{"id": "P1", "label": "supporting", "relevance": "high"}]}',
], ids=["prose", "wrong-shape", "bad-label", "bad-relevance"])
async def test_unusable_replies_are_judge_errors(upstream: ServedUpstream, judge: OpenAIJudge,
                                                 reply: str) -> None:
    upstream.app.rules = [Rule(LABEL, reply)]
    with pytest.raises(JudgeError):
        await run(judge)


async def test_no_judge_is_unavailable(upstream: ServedUpstream) -> None:
    layer = FactCheckLayer(FactCheckConfig(), LayerResources(judge=None))
    with pytest.raises(LayerUnavailable, match="judge"):
        await layer.verify(inp())
    assert upstream.requests == []


def test_config_is_strict() -> None:
    with pytest.raises(ValueError, match="extra"):
        FactCheckConfig.model_validate({"max_claim": 3})
    with pytest.raises(ValueError):
        FactCheckConfig.model_validate({"default_authority": "tabloid"})
