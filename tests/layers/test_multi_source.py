"""The ``multi-source`` layer (seed 000 §3) against a real scripted judge server.

Each source call (marker ``[verity:multi-source:source]``) names its source id,
which the rules route on; the knowledge call (``[verity:multi-source:knowledge]``)
goes to the second model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
import pytest
from serving import ServedUpstream

from gateway.layers._multi_source_prompts import (
    MARK_KNOWLEDGE,
    MARK_SOURCE,
    reply_schema,
)
from gateway.layers.base import JudgeError, LayerResources, LayerResult, VerifyInput
from gateway.layers.multi_source import MultiSourceConfig, MultiSourceLayer
from gateway.layers.registry import resolve
from gateway.settings import JudgeConfig
from gateway.sources.context import ContextSpec, extract_context
from gateway.sources.corpus import Corpus, SourceMeta
from gateway.testing.scripted import Rule
from gateway.upstream.judge import OpenAIJudge

pytestmark = pytest.mark.anyio

CLAIM = "The Orion bridge opened to traffic in 1998."
ABOUT = "The Orion bridge opened to traffic in 1998 after four years of work."
OTHER = "Tulips bloom in April across the northern provinces."


def doc(sid: str, text: str, **attrs: str) -> str:
    extra = "".join(f' {k}="{v}"' for k, v in attrs.items())
    return f'<document id="{sid}"{extra}>{text}</document>'


def inp(*docs: str, answer: str = CLAIM) -> VerifyInput:
    messages = [{"role": "user", "content": "\n".join(docs) + "\nWhen did it open?"}]
    return VerifyInput(messages=messages, response_text=answer, model="scripted-small",
                       context=extract_context(messages, ContextSpec()))


def votes(*supports: bool, conf: float = 0.8) -> str:
    return orjson.dumps({"results": [{"id": i, "supports": s, "confidence": conf,
                                      "evidence": "e"} for i, s in enumerate(supports, 1)]}
                        ).decode()


def on(source: str, reply: str) -> Rule:
    return Rule(r"\[verity:multi-source:source\].*Source \(" + source + r"\)", reply)


@pytest.fixture
async def judge(upstream: ServedUpstream) -> AsyncIterator[OpenAIJudge]:
    j = OpenAIJudge(JudgeConfig(cache_size=0), upstream.base_url, None)
    yield j
    await j.aclose()


async def run(judge: Any, vi: VerifyInput, corpus: Mapping[str, str] | None = None,
              **config: Any) -> LayerResult:
    layer = MultiSourceLayer(MultiSourceConfig.model_validate(config),
                             LayerResources(judge=judge, corpus=corpus or {}))
    return await layer.verify(vi)


def sent(upstream: ServedUpstream, marker: str) -> list[dict[str, Any]]:
    return [r["json"] for r in upstream.requests
            if r["json"]["messages"][-1]["content"].startswith(marker)]


def test_registered() -> None:
    assert resolve("multi-source") is MultiSourceLayer


async def test_two_supporting_sources_pass_with_the_seed_score(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [on("a", votes(True, conf=0.9)), on("b", votes(True, conf=0.7))]
    r = await run(judge, inp(doc("a", ABOUT), doc("b", ABOUT), doc("c", OTHER)))
    assert r.passed and r.label == "agreed" and r.judge_calls == 2
    assert r.score == pytest.approx(1.0 * 0.8)  # agreement x mean confidence
    # "c" is about nothing the answer says: not a source for it, never asked.
    assert [s["id"] for s in r.details["sources"]] == ["a", "b"]
    assert r.details["claims"] == [{"n": 1, "sources": 2, "supporting": 2, "agreement": 1.0,
                                    "mean_confidence": 0.8, "score": 0.8,
                                    "status": "agreed"}]
    prompt = sent(upstream, MARK_SOURCE)[0]["messages"][-1]["content"]
    assert "1. " + CLAIM in prompt and ABOUT in prompt
    assert CLAIM not in orjson.dumps(r.details).decode()  # no content in details


async def test_one_supporting_source_of_two_fails(upstream: ServedUpstream,
                                                  judge: OpenAIJudge) -> None:
    upstream.app.rules = [on("a", votes(True)), on("b", votes(False))]
    r = await run(judge, inp(doc("a", ABOUT), doc("b", ABOUT)))
    assert not r.passed and r.failed_claims == [CLAIM]
    assert r.score == pytest.approx(0.5 * 0.8)
    assert r.evidence[0].status == "disputed" and r.evidence[0].source_id == "a"


async def test_fewer_than_two_sources_is_skipped_without_a_judge() -> None:
    r = await run(None, inp(doc("a", ABOUT), doc("c", OTHER)))
    assert r.skipped and r.passed and r.label == "insufficient_sources"
    assert r.details["available"] == 1 and r.details["required"] == 2
    assert "insufficient sources" in r.explanation and r.judge_calls == 0
    r = await run(None, inp())
    assert r.skipped and r.details["available"] == 0


async def test_a_claim_with_too_few_sources_is_insufficient_not_failed(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [on("a", votes(True, True)), on("b", votes(True))]
    answer = CLAIM + " Tulips bloom in April across the provinces."
    r = await run(judge, inp(doc("a", ABOUT + " " + OTHER), doc("b", ABOUT), answer=answer))
    assert r.passed and r.details["insufficient"] == 1
    assert [c["status"] for c in r.details["claims"]] == ["agreed", "insufficient"]
    # "a" was asked only about the claim that has enough sources.
    prompt = next(j["messages"][-1]["content"] for j in sent(upstream, MARK_SOURCE)
                  if "Source (a)" in j["messages"][-1]["content"])
    assert "2. " not in prompt.split("Claims:")[1].split("For each")[0]


async def test_a_second_judge_model_is_a_source(upstream: ServedUpstream,
                                                judge: OpenAIJudge) -> None:
    upstream.app.rules = [on("a", votes(True)),
                          Rule(r"\[verity:multi-source:knowledge\]", votes(True, conf=1.0))]
    r = await run(judge, inp(doc("a", ABOUT)), second_model="scripted-large")
    assert r.passed and r.details["sources"][-1] == {
        "id": "model:scripted-large", "origin": "model", "weight": 1.0, "claims": 1}
    (knowledge,) = sent(upstream, MARK_KNOWLEDGE)
    assert knowledge["model"] == "scripted-large"
    assert sent(upstream, MARK_SOURCE)[0]["model"] == "scripted-small"
    assert r.score == pytest.approx(0.9)


async def test_authority_and_recency_weigh_the_agreement(upstream: ServedUpstream,
                                                         judge: OpenAIJudge) -> None:
    upstream.app.rules = [on("a", votes(True)), on("b", votes(False)), on("c", votes(True))]
    vi = inp(doc("a", ABOUT, authority="blog"), doc("b", ABOUT, authority="government"),
             doc("c", ABOUT))
    r = await run(judge, vi)
    # Weighted: (0.3 + 1.0) / (0.3 + 1.0 + 1.0) = 0.565 < 0.6, though 2 of 3 support it.
    assert not r.passed
    assert r.details["claims"][0]["agreement"] == pytest.approx(1.3 / 2.3, abs=1e-4)
    assert [s["weight"] for s in r.details["sources"]] == [0.3, 1.0, 1.0]
    r = await run(judge, vi, weigh_sources=False)
    assert r.passed and r.details["claims"][0]["agreement"] == pytest.approx(2 / 3, abs=1e-4)
    old = inp(doc("a", ABOUT, published="2001-01-01"), doc("b", ABOUT))
    upstream.app.rules = [on("a", votes(True)), on("b", votes(True))]
    r = await run(judge, old)
    assert r.details["sources"][0]["weight"] < 0.01  # 25 years at a one-year half-life


async def test_corpus_entries_are_sources_with_their_metadata(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    corpus = Corpus({"gazette": ABOUT, "almanac": ABOUT, "gardening": OTHER},
                    {"gazette": SourceMeta(authority="government")})
    upstream.app.rules = [on("gazette", votes(True)), on("almanac", votes(True))]
    r = await run(judge, inp(), corpus=corpus)
    assert r.passed
    assert {(s["id"], s["origin"]) for s in r.details["sources"]} == {
        ("gazette", "corpus"), ("almanac", "corpus")}
    r = await run(judge, inp(), corpus=corpus, max_corpus_sources=1)
    assert r.skipped and r.label == "insufficient_sources"


async def test_unusable_replies_are_judge_errors(upstream: ServedUpstream,
                                                 judge: OpenAIJudge) -> None:
    upstream.app.rules = [on("a", votes(True)), on("b", '{"results": [{"id": 1, '
                                                       '"supports": "perhaps"}]}')]
    with pytest.raises(JudgeError, match="no usable supports"):
        await run(judge, inp(doc("a", ABOUT), doc("b", ABOUT)))


def test_reply_schema_requires_what_is_parsed() -> None:
    results = reply_schema(3).schema["properties"]["results"]
    assert (results["minItems"], results["maxItems"]) == (3, 3)
    assert results["items"]["required"] == ["id", "supports", "confidence"]
