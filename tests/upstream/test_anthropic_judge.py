"""The Anthropic judge against a fake Anthropic server (uvicorn on loopback): the API
version and key it sends, and what it sends for the parameters layers ask for but the
Messages API limits — ``temperature`` (0–1 there, OpenAI's 0–2 in the layers; no SDK
argument for it in ``anthropic`` 2.x) and ``n`` samples (no ``n`` there)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest
from fake_anthropic import FakeAnthropic

from gateway.sources.context import GroundingContext
from gateway.upstream.judge import AnthropicJudge
from gateway.layers.base import JudgeError
from gateway.layers.semantic_entropy import SemanticEntropyConfig, SemanticEntropyLayer
from gateway.testing.servers import ServerThread
from gateway.settings import JudgeConfig
from gateway.upstream.openai_anthropic import ANTHROPIC_VERSION
from gateway.layers.base import LayerResources, VerifyInput

pytestmark = pytest.mark.anyio

MODEL = "claude-haiku-4-5"
ASK: Any = [{"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeAnthropic]:
    app = FakeAnthropic(key="sk-ant-judge")
    with ServerThread(app) as server:
        app.url = server.url
        yield app


@pytest.fixture
def fake(fake_server: FakeAnthropic) -> FakeAnthropic:
    fake_server.requests.clear()
    return fake_server


@pytest.fixture
async def judge(fake: FakeAnthropic, anyio_backend: str) -> AsyncIterator[AnthropicJudge]:
    j = AnthropicJudge(JudgeConfig(), "sk-ant-judge", fake.url)
    yield j
    await j.aclose()


def sent(fake: FakeAnthropic) -> list[dict[str, Any]]:
    return [r["body"] for r in fake.requests if r["path"] == "/v1/messages"]


async def test_pins_the_api_version_that_accepts_temperature_and_sends_the_key(
        fake: FakeAnthropic, judge: AnthropicJudge) -> None:
    """SDK 2.x defaults to API version 2026-10-21, which rejects any temperature, and
    has no temperature argument (a TypeError before the request): the judge sends
    2023-06-01, like the ``anthropic`` upstream, with the temperature in the body."""
    reply = await judge.complete(ASK, model=MODEL, temperature=0.0, max_tokens=64)
    assert reply.texts == ["You said: What is the capital of France?"]
    assert reply.input_tokens > 0 and reply.output_tokens > 0
    (req,) = fake.requests
    assert req["headers"]["anthropic-version"] == ANTHROPIC_VERSION == "2023-06-01"
    assert req["headers"]["x-api-key"] == "sk-ant-judge"
    assert req["body"] == {"model": MODEL, "max_tokens": 64, "temperature": 0.0,
                           "system": "Answer briefly.", "messages": ASK[1:]}


@pytest.mark.parametrize("asked, expected", [
    (0.0, 0.0), (0.7, 0.7), (1.0, 1.0), (1.3, 1.0), (2.0, 1.0)])
async def test_temperature_is_clamped_to_the_messages_api_range(
        fake: FakeAnthropic, judge: AnthropicJudge, asked: float, expected: float) -> None:
    reply = await judge.complete(ASK, model=MODEL, temperature=asked, max_tokens=64)
    assert reply.texts == ["You said: What is the capital of France?"]
    (body,) = sent(fake)
    assert body["temperature"] == expected
    assert body["max_tokens"] == 64 and body["system"] == "Answer briefly."


async def test_n_samples_are_n_requests_without_an_n_field(
        fake: FakeAnthropic, judge: AnthropicJudge) -> None:
    reply = await judge.complete(ASK, model=MODEL, temperature=1.5, max_tokens=32, n=3)
    assert len(reply.texts) == 3 and not reply.cached
    bodies = sent(fake)
    assert len(bodies) == 3
    assert all("n" not in b and b["temperature"] == 1.0 for b in bodies)


@pytest.mark.parametrize("limit, expected", [(16, 3), (2, 2)])
async def test_n_samples_are_in_flight_together_within_max_concurrency(
        fake: FakeAnthropic, limit: int, expected: int) -> None:
    """Sampling ``n`` answers costs one round trip, not ``n`` in a row; ``max_concurrency``
    still bounds the requests in flight (the fake holds each until 3 are in flight, or
    0.5 s: a judge sending one at a time, or more than allowed, shows in the count)."""
    fake.max_in_flight = 0
    judge = AnthropicJudge(JudgeConfig(max_concurrency=limit), "sk-ant-judge", fake.url)
    try:
        reply = await judge.complete([{"role": "user", "content": "hold:3:0.5"}], model=MODEL,
                                     temperature=1.0, max_tokens=16, n=3)
    finally:
        await judge.aclose()
    assert reply.texts == ["You said: hold:3:0.5"] * 3
    assert len(sent(fake)) == 3 and fake.max_in_flight == expected


async def test_one_failed_sample_fails_the_call_as_a_judge_error(
        fake: FakeAnthropic, judge: AnthropicJudge) -> None:
    with pytest.raises(JudgeError, match="anthropic judge failed"):
        await judge.complete([{"role": "user", "content": "status:529"}], model=MODEL,
                             temperature=1.0, max_tokens=16, n=3)


async def test_semantic_entropy_above_temperature_1_samples_through_an_anthropic_judge(
        fake: FakeAnthropic, judge: AnthropicJudge) -> None:
    """The layer's own range (up to 2) reaches the judge; the request Anthropic gets is
    one it accepts, so the layer scores instead of failing on a 400."""
    layer = SemanticEntropyLayer(
        SemanticEntropyConfig(samples=3, temperature=2.0, clustering="lexical"),
        LayerResources(judge=judge))
    answer = "You said: What is the capital of France?"
    result = await layer.verify(VerifyInput(messages=ASK, response_text=answer,
                                            context=GroundingContext(), model=MODEL))
    assert result.passed and not result.skipped and result.judge_calls == 1
    assert result.details["clusters"] == [3]
    assert [b["temperature"] for b in sent(fake)] == [1.0, 1.0, 1.0]


async def test_a_reply_schema_is_asked_as_a_forced_tool_call(
        fake: FakeAnthropic, judge: AnthropicJudge) -> None:
    """Anthropic judges get structured output through tool use: the schema is the
    tool's input_schema, the tool is forced, and its input is the reply's JSON."""
    schema = {"type": "object", "properties": {"city": {"type": "string"},
                                               "days": {"type": "number"}},
              "required": ["city", "days"], "additionalProperties": False}
    reply = await judge.complete(ASK, model=MODEL, max_tokens=64, schema=schema,
                                 schema_name="trip")
    assert orjson.loads(reply.texts[0]) == {"city": "Paris", "days": 2}
    assert not reply.truncated
    (body,) = sent(fake)
    assert body["tools"] == [{"name": "trip", "input_schema": schema,
                              "description": "Record your reply."}]
    assert body["tool_choice"] == {"type": "tool", "name": "trip"}


async def test_a_tool_schema_goes_without_maxlength(
        fake: FakeAnthropic, judge: AnthropicJudge) -> None:
    """Anthropic's tool schemas do not take ``maxLength`` (a grammar-only bound the
    audit's decomposition asks llama.cpp for): it is stripped from ``input_schema``."""
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                               "days": {"type": "number"}},
              "required": ["city", "days"], "additionalProperties": False}
    await judge.complete(ASK, model=MODEL, max_tokens=64, schema=schema, schema_name="trip")
    (body,) = sent(fake)
    assert body["tools"][0]["input_schema"]["properties"]["city"] == {"type": "string"}
    assert schema["properties"]["city"]["maxLength"] == 20  # the caller's schema is intact
