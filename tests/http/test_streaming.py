"""SSE streaming through the gateway: chunks, usage, tool calls, cut streams, disconnects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from serving import ServedGateway, ServedUpstream

USER = [{"role": "user", "content": "one two three four five"}]
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {}}}}


def test_stream_content_arrives_in_chunks(client: openai.OpenAI, upstream: ServedUpstream) -> None:
    chunks = list(client.chat.completions.create(model="scripted-small", messages=USER,
                                                 stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: one two three four five"
    assert len(chunks) == 9  # role chunk + 7 words + finish chunk
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in chunks)
    assert all(c.system_fingerprint == "fp_scripted" for c in chunks)
    assert upstream.last()["json"]["stream"] is True


def test_include_usage_is_honoured(client: openai.OpenAI, upstream: ServedUpstream) -> None:
    chunks = list(client.chat.completions.create(
        model="scripted-small", messages=USER, stream=True,
        stream_options={"include_usage": True}))
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (5, 7)
    assert upstream.last()["json"]["stream_options"] == {"include_usage": True}


def test_stream_tool_call(client: openai.OpenAI, upstream: ServedUpstream) -> None:
    stream = client.chat.completions.create(
        model="scripted-small", messages=USER, stream=True, tools=[WEATHER_TOOL],
        extra_headers={"x-mock-tool-call": "1"})
    name, args, finish = "", "", None
    for chunk in stream:
        for call in chunk.choices[0].delta.tool_calls or ():
            name += call.function.name or "" if call.function else ""
            args += call.function.arguments or "" if call.function else ""
        finish = chunk.choices[0].finish_reason or finish
    assert (name, args, finish) == ("get_weather", '{"city": "Paris"}', "tool_calls")


def test_raw_sse_bytes_are_relayed(gateway: ServedGateway, upstream: ServedUpstream) -> None:
    body = {"model": "scripted-small", "messages": USER, "stream": True}
    with httpx.Client() as http, http.stream("POST", gateway.base_url + "/chat/completions",
                                             json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["x-request-id"] == "req_scripted"
        raw = b"".join(r.iter_bytes())
    events = raw.split(b"\n\n")
    assert all(e.startswith(b"data: ") for e in events if e)
    assert raw.endswith(b"data: [DONE]\n\n")


def test_cut_stream_ends_with_an_error_the_sdk_raises(client: openai.OpenAI,
                                                      upstream: ServedUpstream) -> None:
    stream = client.chat.completions.create(model="scripted-small", messages=USER, stream=True,
                                            extra_headers={"x-mock-cut-after": "3"})
    received: list[Any] = []
    with pytest.raises(openai.APIError) as info:
        for chunk in stream:
            received.append(chunk)
    assert len(received) == 3
    assert "upstream stream was cut" in info.value.message
    assert isinstance(info.value.body, dict)
    assert info.value.body["type"] == "upstream_error"
    assert info.value.body["code"] == "upstream_stream_error"


def test_stalled_stream_ends_with_timeout_error(make_gateway: Callable[..., ServedGateway],
                                                make_client: Callable[..., openai.OpenAI],
                                                upstream: ServedUpstream) -> None:
    gw = make_gateway(upstreams=[{"name": "slow", "base_url": upstream.base_url,
                                  "timeouts": {"read": 0.3}}])
    stream = make_client(gw).chat.completions.create(
        model="scripted-small", messages=USER, stream=True,
        extra_headers={"x-mock-chunk-delay-ms": "3000"})
    with pytest.raises(openai.APIError) as info:
        list(stream)
    assert isinstance(info.value.body, dict)
    assert info.value.body["code"] == "upstream_timeout"


def test_closing_the_stream_cancels_upstream(client: openai.OpenAI, upstream: ServedUpstream,
                                             wait_until: Callable[..., Any]) -> None:
    stream = client.chat.completions.create(model="scripted-small", messages=USER, stream=True,
                                            extra_headers={"x-mock-chunk-delay-ms": "500"})
    first = next(iter(stream))
    assert first.choices[0].delta.role == "assistant"
    stream.close()
    wait_until(lambda: upstream.cancelled >= 1, message="upstream cancellation")


@pytest.mark.anyio
async def test_async_stream_with_usage(async_client: openai.AsyncOpenAI,
                                       upstream: ServedUpstream) -> None:
    stream = await async_client.chat.completions.create(
        model="scripted-small", messages=USER, stream=True,
        stream_options={"include_usage": True})
    text, usage = "", None
    async for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        usage = chunk.usage or usage
    assert text == "You said: one two three four five"
    assert usage is not None and usage.total_tokens == 12


@pytest.mark.anyio
async def test_async_cut_stream_raises(async_client: openai.AsyncOpenAI,
                                       upstream: ServedUpstream) -> None:
    stream = await async_client.chat.completions.create(
        model="scripted-small", messages=USER, stream=True,
        extra_headers={"x-mock-cut-after": "2"})
    with pytest.raises(openai.APIError, match="upstream stream was cut"):
        async for _ in stream:
            pass


@pytest.mark.anyio
async def test_async_close_cancels_upstream(async_client: openai.AsyncOpenAI,
                                            upstream: ServedUpstream) -> None:
    import anyio

    stream = await async_client.chat.completions.create(
        model="scripted-small", messages=USER, stream=True,
        extra_headers={"x-mock-chunk-delay-ms": "500"})
    async for _ in stream:
        break
    await stream.close()
    with anyio.fail_after(5):
        while upstream.cancelled < 1:
            await anyio.sleep(0.02)


def test_gzipped_upstream_stream_reaches_the_sdk_decoded(client: openai.OpenAI,
                                                         upstream: ServedUpstream) -> None:
    chunks = list(client.chat.completions.create(
        model="scripted-small", messages=USER, stream=True,
        extra_headers={"x-mock-gzip": "1"}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: one two three four five"
