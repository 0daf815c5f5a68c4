"""Pure translation OpenAI chat completions <-> Anthropic Messages (no I/O)."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from gateway.errors import InvalidRequest, UpstreamError, UpstreamStreamError
from gateway.sse import StreamAccumulator
from gateway.upstream.openai_anthropic import (
    DEFAULT_MAX_TOKENS, StreamTranslator, chat_to_messages, error_to_openai, finish_reason,
    message_to_chat, models_to_openai, usage_to_openai,
)

WEATHER_TOOL: Any = {"type": "function", "function": {
    "name": "weather", "description": "Forecast for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


def _req(**kw: Any) -> dict[str, Any]:
    return {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}], **kw}


# ---- request ------------------------------------------------------------------------------


def test_minimal_request() -> None:
    assert chat_to_messages(_req()) == {
        "model": "claude-x", "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": DEFAULT_MAX_TOKENS}


def test_system_and_developer_messages_become_system() -> None:
    out = chat_to_messages(_req(messages=[
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "Use French."}]},
        {"role": "user", "content": "hi"},
    ]))
    assert out["system"] == "Be brief.\n\nUse French."
    assert out["messages"] == [{"role": "user", "content": "hi"}]


def test_sampling_and_limits() -> None:
    out = chat_to_messages(_req(max_tokens=50, max_completion_tokens=70, temperature=1.6,
                                top_p=0.9, stop="END", user="u-42", stream=True,
                                stream_options={"include_usage": True}, top_k=5))
    assert out["max_tokens"] == 70  # max_completion_tokens wins
    assert out["temperature"] == 1.0  # clamped to Anthropic's range
    assert out["top_p"] == 0.9 and out["top_k"] == 5
    assert out["stop_sequences"] == ["END"]
    assert out["metadata"] == {"user_id": "u-42"}
    assert out["stream"] is True
    assert chat_to_messages(_req(max_tokens=50, stop=["a", "b"]))["max_tokens"] == 50
    assert chat_to_messages(_req(stop=["a", "b"]))["stop_sequences"] == ["a", "b"]


def test_openai_only_fields_are_dropped() -> None:
    out = chat_to_messages(_req(frequency_penalty=0.5, presence_penalty=0.1, logit_bias={},
                                logprobs=True, top_logprobs=2, seed=7, n=1, store=True,
                                metadata={"verity": "grounding"}, service_tier="auto",
                                response_format={"type": "text"}, reasoning_effort="low",
                                parallel_tool_calls=True, some_future_field=1))
    assert set(out) == {"model", "messages", "max_tokens"}


@pytest.mark.parametrize("kw, param", [
    ({"n": 2}, "n"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"functions": [{"name": "f"}]}, "functions"),
    ({"tools": [{"type": "web_search"}]}, "tools[0]"),
    ({"tool_choice": "sometimes", "tools": [WEATHER_TOOL]}, "tool_choice"),
    ({"messages": [{"role": "function", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
     "messages[0].content[0]"),
    ({"messages": [{"role": "assistant", "tool_calls": [
        {"id": "c", "function": {"name": "f", "arguments": "{not json"}}]}]},
     "messages[0].tool_calls[0]"),
])
def test_untranslatable_requests_are_400(kw: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        chat_to_messages(_req(**kw))
    assert info.value.status == 400
    assert info.value.param == param


def test_images_and_pdf_parts() -> None:
    out = chat_to_messages(_req(messages=[{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0="}},
        {"type": "text", "text": "", "cache_control": {"type": "ephemeral"}},
    ]}]))
    assert out["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": "JVBERi0="}},
    ]


def test_tool_round_trip_request() -> None:
    out = chat_to_messages(_req(
        messages=[
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "weather", "arguments": '{"city": "Rome"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_2",
             "content": [{"type": "text", "text": "rain"}]},
            {"role": "user", "content": "Thanks, summarise."},
        ],
        tools=[WEATHER_TOOL], tool_choice="required", parallel_tool_calls=False))
    assert out["messages"] == [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "call_2", "name": "weather", "input": {"city": "Rome"}},
        ]},
        {"role": "user", "content": [  # tool results and the next user text: one user turn
            {"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"},
            {"type": "tool_result", "tool_use_id": "call_2",
             "content": [{"type": "text", "text": "rain"}]},
            {"type": "text", "text": "Thanks, summarise."},
        ]},
    ]
    assert out["tools"] == [{"name": "weather", "description": "Forecast for a city",
                             "input_schema": WEATHER_TOOL["function"]["parameters"]}]
    assert out["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}


@pytest.mark.parametrize("choice, expected", [
    ("auto", {"type": "auto"}),
    ("none", {"type": "none"}),
    ("required", {"type": "any"}),
    ({"type": "function", "function": {"name": "weather"}}, {"type": "tool", "name": "weather"}),
    (None, None),
])
def test_tool_choice(choice: Any, expected: Any) -> None:
    out = chat_to_messages(_req(tools=[WEATHER_TOOL], tool_choice=choice))
    assert out.get("tool_choice") == expected
    assert "tool_choice" not in chat_to_messages(_req(tool_choice="auto"))  # no tools


def test_consecutive_same_role_turns_merge() -> None:
    out = chat_to_messages(_req(messages=[
        {"role": "user", "content": "one"}, {"role": "user", "content": "two"},
        {"role": "assistant", "content": ""},  # empty: dropped, Anthropic rejects it
        {"role": "user", "content": "three"}]))
    assert out["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "one"}, {"type": "text", "text": "two"},
        {"type": "text", "text": "three"}]}]


# ---- response -----------------------------------------------------------------------------


MESSAGE = {
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x-2025",
    "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Hello "}, {"type": "text", "text": "there."}],
    "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 3},
}


def test_message_to_chat_completion() -> None:
    out = message_to_chat(MESSAGE, created=123)
    assert out == {
        "id": "msg_01", "object": "chat.completion", "created": 123, "model": "claude-x-2025",
        "choices": [{"index": 0, "logprobs": None, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Hello there.",
                                 "refusal": None}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


def test_tool_use_response() -> None:
    out = message_to_chat({**MESSAGE, "stop_reason": "tool_use", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}]})
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["id"] == "toolu_1" and call["type"] == "function"
    assert call["function"]["name"] == "weather"
    assert orjson.loads(call["function"]["arguments"]) == {"city": "Paris"}


@pytest.mark.parametrize("stop, finish", [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
    ("tool_use", "tool_calls"), ("refusal", "content_filter"), (None, "stop"),
])
def test_finish_reasons(stop: str | None, finish: str) -> None:
    assert finish_reason(stop) == finish


def test_usage_counts_cache_tokens_as_prompt() -> None:
    assert usage_to_openai({"input_tokens": 5, "cache_read_input_tokens": 100,
                            "cache_creation_input_tokens": 20, "output_tokens": 7}) == {
        "prompt_tokens": 125, "completion_tokens": 7, "total_tokens": 132,
        "prompt_tokens_details": {"cached_tokens": 100}}


@pytest.mark.parametrize("status, atype, out_status, otype", [
    (400, "invalid_request_error", 400, "invalid_request_error"),
    (401, "authentication_error", 401, "authentication_error"),
    (429, "rate_limit_error", 429, "rate_limit_error"),
    (500, "api_error", 500, "server_error"),
    (529, "overloaded_error", 503, "service_unavailable"),
])
def test_errors(status: int, atype: str, out_status: int, otype: str) -> None:
    body = orjson.dumps({"type": "error", "error": {"type": atype, "message": "boom"},
                         "request_id": "req_1"})
    got_status, got = error_to_openai(status, body)
    assert got_status == out_status
    assert set(got["error"]) == {"message", "type", "param", "code"}
    assert got["error"]["message"] == "boom" and got["error"]["type"] == otype


def test_non_json_error_body() -> None:
    status, body = error_to_openai(502, b"<html>bad gateway</html>")
    assert status == 502 and "bad gateway" in body["error"]["message"]
    assert body["error"]["type"] == "upstream_error"


def test_models() -> None:
    out = models_to_openai({"data": [{"type": "model", "id": "claude-a",
                                      "created_at": "2025-02-19T00:00:00Z"}],
                            "has_more": False})
    assert out == {"object": "list", "data": [
        {"id": "claude-a", "object": "model", "created": 1739923200, "owned_by": "anthropic"}]}


# ---- stream -------------------------------------------------------------------------------


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\n".encode() + b"data: " + orjson.dumps(e) + b"\n\n"
                    for e in events)


START = {"type": "message_start", "message": {
    "id": "msg_s1", "type": "message", "role": "assistant", "model": "claude-x-2025",
    "content": [], "stop_reason": None, "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 1}}}
TEXT_AND_TOOL = _sse(
    START,
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "ping"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hél"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {
        "type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}},
    {"type": "content_block_delta", "index": 1,
     "delta": {"type": "input_json_delta", "partial_json": ""}},
    {"type": "content_block_delta", "index": 1,
     "delta": {"type": "input_json_delta", "partial_json": '{"city": "Pa'}},
    {"type": "content_block_delta", "index": 1,
     "delta": {"type": "input_json_delta", "partial_json": 'ris"}'}},
    {"type": "content_block_stop", "index": 1},
    {"type": "content_block_start", "index": 2, "content_block": {
        "type": "tool_use", "id": "toolu_2", "name": "now", "input": {}}},
    {"type": "content_block_stop", "index": 2},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
     "usage": {"output_tokens": 30}},
    {"type": "message_stop"},
)


def _splits(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(data)), k=min(len(data) - 1, rng.randint(1, 40))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


def _translate(pieces: list[bytes], include_usage: bool = False) -> bytes:
    t = StreamTranslator(include_usage=include_usage, created=5)
    out = b"".join(t.feed(p) for p in pieces)
    return out + t.finish()


@pytest.mark.parametrize("seed", range(25))
def test_stream_translation_is_independent_of_splits(seed: int) -> None:
    whole = _translate([TEXT_AND_TOOL])
    assert _translate(_splits(TEXT_AND_TOOL, seed)) == whole
    bytewise = [TEXT_AND_TOOL[i:i + 1] for i in range(len(TEXT_AND_TOOL))]
    if seed == 0:
        assert _translate(bytewise) == whole


def test_stream_translation_content() -> None:
    out = _translate(_splits(TEXT_AND_TOOL, 1), include_usage=True)
    assert out.endswith(b"data: [DONE]\n\n")
    acc = StreamAccumulator()
    acc.feed_bytes(out)
    assert acc.done
    done = acc.completion()
    assert done["id"] == "msg_s1" and done["model"] == "claude-x-2025" and done["created"] == 5
    (choice,) = done["choices"]
    assert choice["message"]["content"] == "Héllo"
    assert choice["finish_reason"] == "tool_calls"
    calls = choice["message"]["tool_calls"]
    assert [c["id"] for c in calls] == ["toolu_1", "toolu_2"]
    assert orjson.loads(calls[0]["function"]["arguments"]) == {"city": "Paris"}
    assert calls[1]["function"]["arguments"] == "{}"  # no input deltas: still valid JSON
    assert done["usage"] == {"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42}
    chunks = [orjson.loads(line[6:]) for line in out.split(b"\n\n")
              if line.startswith(b"data: {")]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 42
    assert all(c["usage"] is None for c in chunks[:-1])


def test_stream_without_include_usage_has_no_usage() -> None:
    out = _translate([TEXT_AND_TOOL])
    assert b'"usage"' not in out
    assert out.count(b"[DONE]") == 1


def test_stream_error_event_raises_after_what_came_before() -> None:
    t = StreamTranslator()
    out = t.feed(_sse(START, {"type": "content_block_delta", "index": 0,
                              "delta": {"type": "text_delta", "text": "partial"}},
                      {"type": "error", "error": {"type": "overloaded_error",
                                                  "message": "Overloaded"}},
                      {"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": "after"}}))
    assert b'"role":"assistant"' in out and b"partial" in out and b"after" not in out
    assert t.error is not None
    with pytest.raises(UpstreamError) as info:
        t.finish()
    assert info.value.status == 503 and info.value.message == "Overloaded"
    assert info.value.code == "overloaded"


def test_stream_cut_before_message_stop_raises() -> None:
    t = StreamTranslator()
    t.feed(TEXT_AND_TOOL[:len(TEXT_AND_TOOL) // 2])
    with pytest.raises(UpstreamStreamError):
        t.finish()


def test_events_after_message_stop_are_ignored() -> None:
    t = StreamTranslator()
    out = t.feed(_sse(START, {"type": "message_stop"},
                      {"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": "late"}}))
    assert b"late" not in out and out.endswith(b"data: [DONE]\n\n")
