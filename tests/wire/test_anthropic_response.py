"""OpenAI chat completions -> Anthropic Messages, and the verification shapes
(gateway.wire.anthropic_response): every Message is parsed by the anthropic SDK."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from anthropic.types import ModelInfo
from wire.anthropic_sdk_check import message
from openai.types.chat import ChatCompletion

from gateway.errors import UpstreamError
from gateway.upstream.anthropic_openai import FINISH_REASONS, message_to_chat, usage_to_openai
from gateway.wire.anthropic_response import (
    STOP_REASONS,
    block_message,
    chat_to_message,
    message_id,
    models_to_anthropic,
    stop_reason,
    usage_to_anthropic,
    with_disclaimer,
)


def completion(msg: dict[str, Any], finish: str = "stop", **choice: Any) -> dict[str, Any]:
    out = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-x",
           "choices": [{"index": 0, "message": {"role": "assistant", **msg},
                        "logprobs": None, "finish_reason": finish, **choice}],
           "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}
    ChatCompletion.model_validate(out)  # the fixtures are what OpenAI sends
    return out


def test_text_answer() -> None:
    out = chat_to_message(completion({"content": "Hello there."}))
    assert out == {
        "id": "msg_chatcmpl-1", "type": "message", "role": "assistant", "model": "gpt-x",
        "content": [{"type": "text", "text": "Hello there."}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 5, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0}}
    parsed = message(out)
    assert parsed.content[0].type == "text" and parsed.content[0].text == "Hello there."


def test_tool_calls() -> None:
    out = chat_to_message(completion({"content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "t", "arguments": "not json"}},
        {"id": "call_3", "type": "function", "function": {"name": "u", "arguments": "[1]"}},
        {"id": "call_4", "type": "function", "function": {"name": "v", "arguments": ""}},
    ]}, "tool_calls"))
    parsed = message(out)
    assert parsed.stop_reason == "tool_use"
    assert [(b.type, getattr(b, "input", None)) for b in parsed.content] == [
        ("tool_use", {"city": "Paris"}), ("tool_use", {}), ("tool_use", {}), ("tool_use", {})]
    assert parsed.content[0].id == "call_1" and parsed.content[0].name == "weather"


def test_text_then_tool_call_ended_with_stop_is_still_tool_use() -> None:
    out = chat_to_message(completion({"content": "Checking.", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}))
    assert [b["type"] for b in out["content"]] == ["text", "tool_use"]
    assert out["stop_reason"] == "tool_use"


@pytest.mark.parametrize("finish, stop", [
    ("stop", "end_turn"), ("length", "max_tokens"), ("tool_calls", "tool_use"),
    ("function_call", "tool_use"), ("content_filter", "refusal"), ("weird", "end_turn"),
    (None, "end_turn"),
])
def test_stop_reasons(finish: str | None, stop: str) -> None:
    assert stop_reason(finish) == stop


def test_stop_reasons_are_the_inverse_of_the_finish_reasons() -> None:
    for finish, stop in STOP_REASONS.items():
        if finish != "function_call":
            assert FINISH_REASONS[stop] == finish
    assert set(STOP_REASONS) >= set(FINISH_REASONS.values())


def test_refusal() -> None:
    out = chat_to_message(completion({"content": None, "refusal": "I can't help."}))
    assert message(out).stop_reason == "refusal"
    assert out["content"] == [{"type": "text", "text": "I can't help."}]


def test_stop_sequence_named_by_the_server() -> None:
    c = completion({"content": "abc"}, stop_reason="END")
    assert chat_to_message(c, stop_sequences=["END"])["stop_sequence"] == "END"
    assert chat_to_message(c, stop_sequences=["END"])["stop_reason"] == "stop_sequence"
    assert chat_to_message(c, stop_sequences=["X"])["stop_reason"] == "end_turn"
    c = completion({"content": "abc"}, stop_reason=50256)  # a stop token id
    assert chat_to_message(c)["stop_sequence"] is None


def test_empty_answer_has_no_blocks_and_content_parts_are_joined() -> None:
    assert message(chat_to_message(completion({"content": ""}))).content == []
    c = completion({"content": "x"})
    c["choices"][0]["message"]["content"] = [{"type": "text", "text": "a"},
                                             {"type": "text", "text": "b"}]
    assert chat_to_message(c)["content"] == [{"type": "text", "text": "ab"}]


def test_model_override_and_ids() -> None:
    assert chat_to_message(completion({"content": "x"}), model="alias")["model"] == "alias"
    assert message_id("msg_abc") == "msg_abc"
    assert message_id(None) == "msg_gateway"


@pytest.mark.parametrize("body", [
    {"id": "x"}, {"choices": []}, {"choices": ["x"]}, {"choices": None}])
def test_no_choice_is_an_upstream_error(body: dict[str, Any]) -> None:
    with pytest.raises(UpstreamError):
        chat_to_message(body)


def test_usage_with_cached_tokens_and_garbage() -> None:
    assert usage_to_anthropic({"prompt_tokens": 100, "completion_tokens": 7,
                               "prompt_tokens_details": {"cached_tokens": 60}}) == {
        "input_tokens": 40, "output_tokens": 7, "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 60}
    assert usage_to_anthropic({"prompt_tokens": -3, "completion_tokens": True}) == {
        "input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0}
    assert usage_to_anthropic(None)["input_tokens"] == 0


def test_usage_round_trip() -> None:
    anthropic_usage = {"input_tokens": 40, "output_tokens": 7,
                       "cache_creation_input_tokens": 0, "cache_read_input_tokens": 60}
    assert usage_to_anthropic(usage_to_openai(anthropic_usage)) == anthropic_usage


def test_round_trip_through_the_reverse_translator() -> None:
    c = completion({"content": "Checking.", "refusal": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}]},
        "tool_calls")
    back = message_to_chat(chat_to_message(c), created=1)
    assert back["choices"][0]["message"] == c["choices"][0]["message"]
    assert back["choices"][0]["finish_reason"] == "tool_calls"
    assert back["usage"] == c["usage"]


# ---- verification shapes ----------------------------------------------------------------


def test_block_message() -> None:
    original = chat_to_message(completion({"content": "The moon is cheese."}))
    out = block_message(original, "Blocked by policy strict.")
    parsed = message(out)
    assert parsed.stop_reason == "refusal"
    assert [b.text for b in parsed.content if b.type == "text"] == ["Blocked by policy strict."]
    assert parsed.id == original["id"] and parsed.usage.output_tokens == 5
    assert message(block_message({}, "no")).id == "msg_verity_blocked"


def test_disclaimer_goes_on_the_last_text_block() -> None:
    original = chat_to_message(completion({"content": "Answer.", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}))
    out = with_disclaimer(original, "\n\n[unverified]")
    parsed = message(out)
    assert parsed.content[0].type == "text"
    assert parsed.content[0].text == "Answer.\n\n[unverified]"
    assert original["content"][0]["text"] == "Answer."  # not modified in place
    bare = with_disclaimer(chat_to_message(completion({"content": ""})), "[unverified]")
    assert message(bare).content[0].text == "[unverified]"  # type: ignore[union-attr]


def test_models_page() -> None:
    page = models_to_anthropic({"object": "list", "data": [
        {"id": "gpt-x", "object": "model", "created": 1700000000, "owned_by": "me"},
        {"id": "gpt-y", "object": "model", "created": -5, "owned_by": "me"},
        {"object": "model"}, "junk"]})
    assert [m["id"] for m in page["data"]] == ["gpt-x", "gpt-y"]
    assert page["has_more"] is False and page["first_id"] == "gpt-x" and page["last_id"] == "gpt-y"
    infos = [ModelInfo.model_validate(m) for m in page["data"]]
    assert infos[0].created_at.year == 2023 and infos[1].created_at.year == 1970
    assert orjson.loads(orjson.dumps(page)) == page
    assert models_to_anthropic({})["first_id"] is None
