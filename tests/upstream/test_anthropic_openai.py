"""Pure translation Anthropic Messages responses, errors and streams -> OpenAI chat
completions (no I/O)."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from gateway.errors import UpstreamError, UpstreamStreamError
from gateway.wire.sse import StreamAccumulator
from gateway.upstream.anthropic_openai import (
    StreamTranslator,
    error_to_openai,
    finish_reason,
    message_to_chat,
    models_to_openai,
    usage_to_openai,
)

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


def test_non_json_error_body_is_named_never_quoted() -> None:
    status, body = error_to_openai(502, b"<html>bad gateway</html>")
    assert status == 502 and "bad gateway" not in body["error"]["message"]
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
