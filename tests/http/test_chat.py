"""Non-streaming chat completions through the gateway, driven by the openai SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import openai
import pytest

from gateway.http.relay import passthrough
from serving import CLIENT_KEY, ServedGateway, ServedUpstream

MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello there"}]
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


def test_content_usage_and_unknown_fields_intact(client: openai.OpenAI,
                                                 upstream: ServedUpstream) -> None:
    r = client.chat.completions.create(model="scripted-small", messages=MESSAGES)
    assert r.choices[0].message.content == "You said: hello there"
    assert r.choices[0].finish_reason == "stop"
    assert r.model == "scripted-small"
    assert r.system_fingerprint == "fp_scripted"
    assert r.usage is not None
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (4, 4, 8)
    assert r.model_extra == {"x_scripted": {"note": "unknown fields survive the proxy"}}


def test_request_body_reaches_upstream_untouched(client: openai.OpenAI,
                                                 upstream: ServedUpstream) -> None:
    client.chat.completions.create(
        model="scripted-large", messages=MESSAGES, temperature=0.25, seed=7,
        extra_body={"vendor_knob": {"nested": [1, 2]}, "top_k": 3},
        extra_headers={"x-custom-header": "kept"})
    sent = upstream.last("/v1/chat/completions")
    assert sent["json"] == {"model": "scripted-large", "messages": MESSAGES,
                            "temperature": 0.25, "seed": 7,
                            "vendor_knob": {"nested": [1, 2]}, "top_k": 3}
    assert sent["headers"]["x-custom-header"] == "kept"
    assert sent["headers"]["authorization"] == f"Bearer {CLIENT_KEY}"


def test_raw_response_exposes_upstream_headers(client: openai.OpenAI,
                                               upstream: ServedUpstream) -> None:
    raw = client.chat.completions.with_raw_response.create(model="scripted-small",
                                                           messages=MESSAGES)
    assert raw.headers["x-request-id"] == "req_scripted"
    assert raw.headers["content-type"].startswith("application/json")
    assert raw.parse().choices[0].message.content == "You said: hello there"


def test_tool_call_comes_back(client: openai.OpenAI, upstream: ServedUpstream) -> None:
    r = client.chat.completions.create(
        model="scripted-small", messages=[{"role": "user", "content": "weather in Paris?"}],
        tools=[WEATHER_TOOL], extra_headers={"x-mock-tool-call": "1"})
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.id == "call_scripted"
    assert call.function.name == "get_weather"
    assert call.function.arguments == '{"city": "Paris"}'
    assert upstream.last()["json"]["tools"] == [WEATHER_TOOL]


def test_scripted_reply_header(client: openai.OpenAI, upstream: ServedUpstream) -> None:
    r = client.chat.completions.create(model="scripted-small", messages=MESSAGES,
                                       extra_headers={"x-mock-reply": "Paris is in France."})
    assert r.choices[0].message.content == "Paris is in France."


@pytest.mark.anyio
async def test_async_client(async_client: openai.AsyncOpenAI, upstream: ServedUpstream) -> None:
    r = await async_client.chat.completions.create(model="scripted-small", messages=MESSAGES)
    assert r.choices[0].message.content == "You said: hello there"
    assert r.usage is not None and r.usage.total_tokens == 8
    assert r.model_extra == {"x_scripted": {"note": "unknown fields survive the proxy"}}


@pytest.mark.anyio
async def test_async_tool_call(async_client: openai.AsyncOpenAI,
                               upstream: ServedUpstream) -> None:
    r = await async_client.chat.completions.create(
        model="scripted-small", messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER_TOOL], extra_headers={"x-mock-tool-call": "1"})
    (call,) = r.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather"


def test_gzipped_upstream_answer_reaches_the_sdk_decoded(client: openai.OpenAI,
                                                         upstream: ServedUpstream) -> None:
    # Some upstreams compress whatever the request says; the gateway drops
    # content-encoding from what it relays, so it must relay the decoded bytes.
    raw = client.chat.completions.with_raw_response.create(
        model="scripted-small", messages=MESSAGES, extra_headers={"x-mock-gzip": "1"})
    assert "content-encoding" not in raw.headers
    assert raw.parse().choices[0].message.content == "You said: hello there"
    assert "accept-encoding" not in upstream.last()["headers"]


def test_query_string_reaches_upstream(make_client: Callable[..., openai.OpenAI],
                                       gateway: ServedGateway,
                                       upstream: ServedUpstream) -> None:
    # Azure-style deployments need ?api-version=…; the SDK sends it via default_query.
    c = make_client(gateway, default_query={"api-version": "2024-10-21"})
    c.chat.completions.create(model="scripted-small", messages=MESSAGES)
    c.chat.completions.create(model="scripted-small", messages=MESSAGES, stream=True).close()
    assert [r["query"] for r in upstream.requests] == ["api-version=2024-10-21"] * 2


class _VerifyingEngine:
    """A stand-in engine: every chat completion it sees is answered by it."""

    def __init__(self) -> None:
        self.handled: list[str] = []

    def select(self, info: Any) -> Any:
        return "plan"

    async def handle(self, x: Any, plan: Any) -> None:
        self.handled.append(x.scope["path"])
        await passthrough(x)

    def status(self) -> tuple[bool, dict[str, Any]]:
        return True, {}

    def offload(self, size: int) -> None:
        return None  # bodies parsed in the relay


def test_trailing_slash_is_still_the_verified_chat_endpoint(
        make_gateway: Callable[..., ServedGateway], upstream: ServedUpstream) -> None:
    # curl-style clients write /v1/chat/completions/; it must not become a
    # generic /v1/* forward that skips the policies (and the body checks).
    engine = _VerifyingEngine()

    @asynccontextmanager
    async def factory(*_: Any) -> AsyncIterator[_VerifyingEngine]:
        yield engine

    gw = make_gateway(app_kwargs={"engine_factory": factory})
    with httpx.Client() as http:
        r = http.post(gw.base_url + "/chat/completions/",
                      json={"model": "scripted-small", "messages": MESSAGES})
        bad = http.post(gw.base_url + "/chat/completions/", content=b"{not json")
    assert r.status_code == 200
    assert r.json()["choices"][0]["message"]["content"] == "You said: hello there"
    assert engine.handled == ["/v1/chat/completions/"]
    assert upstream.last()["path"] == "/v1/chat/completions"
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_json")


def test_expect_100_continue_is_not_forwarded(gateway: ServedGateway,
                                              upstream: ServedUpstream) -> None:
    # curl sends "Expect: 100-continue" with large bodies. The gateway's server has
    # already answered it; forwarded, it makes the upstream client hold the body
    # until upstream sends a 100 (one more round trip, or a stall until the read
    # timeout with an upstream that waits for the body instead).
    body = {"model": "scripted-small", "messages": [{"role": "user", "content": "x" * 4000}]}
    with httpx.Client() as http:
        r = http.post(gateway.base_url + "/chat/completions", json=body,
                      headers={"expect": "100-continue"})
        e = http.post(gateway.base_url + "/embeddings",
                      json={"model": "embed-small", "input": "x" * 4000},
                      headers={"expect": "100-continue"})
    assert (r.status_code, e.status_code) == (200, 200)
    assert [q["headers"].get("expect") for q in upstream.requests] == [None, None]
