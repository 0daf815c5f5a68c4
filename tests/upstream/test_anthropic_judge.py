"""The Anthropic judge against a fake Anthropic server (uvicorn on loopback): the API
version and key it sends, ``temperature`` (no SDK argument for it in ``anthropic``
2.x) and ``n`` samples (no ``n`` in the Messages API)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fake_anthropic import FakeAnthropic

from gateway.judge import AnthropicJudge
from gateway.servers import ServerThread
from gateway.settings import JudgeConfig
from gateway.upstream.openai_anthropic import ANTHROPIC_VERSION

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


async def test_n_samples_are_n_requests_without_an_n_field(
        fake: FakeAnthropic, judge: AnthropicJudge) -> None:
    reply = await judge.complete(ASK, model=MODEL, temperature=0.8, max_tokens=32, n=3)
    assert len(reply.texts) == 3 and not reply.cached
    bodies = sent(fake)
    assert len(bodies) == 3
    assert all("n" not in b and b["temperature"] == 0.8 for b in bodies)
