"""Anthropic Messages requests -> OpenAI chat completion requests
(gateway.wire.anthropic_messages): pure, checked against the reverse translator too."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.upstream.openai_anthropic import chat_to_messages
from gateway.wire.anthropic_messages import DROPPED_FIELDS, messages_to_chat

PNG = "iVBORw0KGgo="


def req(messages: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 256, "messages": messages, **more}


def test_minimal_request() -> None:
    assert messages_to_chat(req([{"role": "user", "content": "Hi"}])) == {
        "model": "claude-x", "max_tokens": 256,
        "messages": [{"role": "user", "content": "Hi"}]}


def test_system_string_and_blocks() -> None:
    out = messages_to_chat(req([{"role": "user", "content": "Hi"}], system="Be brief."))
    assert out["messages"][0] == {"role": "system", "content": "Be brief."}
    out = messages_to_chat(req([{"role": "user", "content": "Hi"}], system=[
        {"type": "text", "text": "One.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Two."}]))
    assert out["messages"][0] == {"role": "system", "content": "One.\n\nTwo."}
    out = messages_to_chat(req([{"role": "user", "content": "Hi"}], system=""))
    assert out["messages"] == [{"role": "user", "content": "Hi"}]


def test_tool_conversation() -> None:
    out = messages_to_chat(req([
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather",
             "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_2", "name": "time", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
             "content": [{"type": "text", "text": "no "}, {"type": "text", "text": "clock"}]},
            {"type": "text", "text": "Thanks; and tomorrow?"}]},
    ]))
    assert out["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
            {"id": "toolu_2", "type": "function",
             "function": {"name": "time", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": [
            {"type": "text", "text": "no "}, {"type": "text", "text": "clock"}]},
        {"role": "user", "content": "Thanks; and tomorrow?"},
    ]


def test_assistant_with_only_tool_calls_has_null_content_and_thinking_only_is_dropped() -> None:
    out = messages_to_chat(req([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "f", "input": {"a": [1, 2]}}]},
        {"role": "assistant", "content": ""},
    ]))
    assert out["messages"][1:] == [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "t", "type": "function", "function": {"name": "f", "arguments": '{"a":[1,2]}'}}]}]


def test_images_and_documents() -> None:
    out = messages_to_chat(req([{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
        {"type": "document", "title": "r.pdf",
         "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                        "data": "plain doc"}},
        {"type": "document", "source": {"type": "content", "content": [
            {"type": "text", "text": "block doc"}]}},
        {"type": "text", "text": ""},
        {"type": "text", "text": "Describe."},
    ]}]))
    assert out["messages"] == [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
        {"type": "file", "file": {"filename": "r.pdf",
                                  "file_data": "data:application/pdf;base64,JVBERi0="}},
        {"type": "text", "text": "plain doc"},
        {"type": "text", "text": "block doc"},
        {"type": "text", "text": "Describe."},
    ]}]


def test_images_in_a_tool_result_follow_in_a_user_message() -> None:
    out = messages_to_chat(req([
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "shot",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
            {"type": "text", "text": "screenshot:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PNG}}]}]},
    ]))
    assert out["messages"][1:] == [
        {"role": "tool", "tool_call_id": "t", "content": "screenshot:"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {
            "url": f"data:image/png;base64,{PNG}"}}]},
    ]


def test_empty_tool_result() -> None:
    out = messages_to_chat(req([{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t"}]}]))
    assert out["messages"] == [{"role": "tool", "tool_call_id": "t", "content": ""}]


def test_parameters() -> None:
    out = messages_to_chat(req(
        [{"role": "user", "content": "Hi"}], temperature=0.2, top_p=0.9, top_k=40,
        stop_sequences=["END", "STOP"], stream=True, metadata={"user_id": "u-1"},
        thinking={"type": "enabled", "budget_tokens": 1024}, service_tier="auto",
        unknown_future_field=1))
    assert out == {
        "model": "claude-x", "max_tokens": 256, "messages": [{"role": "user", "content": "Hi"}],
        "temperature": 0.2, "top_p": 0.9, "top_k": 40, "stop": ["END", "STOP"],
        "stream": True, "stream_options": {"include_usage": True}, "user": "u-1"}
    assert not DROPPED_FIELDS & set(out)


def test_max_tokens_field_and_top_k_are_the_callers_choice() -> None:
    out = messages_to_chat(req([{"role": "user", "content": "Hi"}], top_k=5),
                           max_tokens_field="max_completion_tokens", keep_top_k=False)
    assert out["max_completion_tokens"] == 256
    assert "max_tokens" not in out and "top_k" not in out


def test_tools() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}},
              "required": ["city"]}
    out = messages_to_chat(req([{"role": "user", "content": "Hi"}], tools=[
        {"name": "weather", "description": "Weather now", "input_schema": schema,
         "cache_control": {"type": "ephemeral"}},
        {"type": "custom", "name": "noop", "input_schema": {"type": "object"}, "strict": True},
    ], tool_choice={"type": "any", "disable_parallel_tool_use": True}))
    assert out["tools"] == [
        {"type": "function", "function": {"name": "weather", "parameters": schema,
                                          "description": "Weather now"}},
        {"type": "function", "function": {"name": "noop", "parameters": {"type": "object"},
                                          "strict": True}},
    ]
    assert out["tool_choice"] == "required" and out["parallel_tool_calls"] is False


@pytest.mark.parametrize("choice, expected, parallel", [
    ({"type": "auto"}, "auto", None),
    ({"type": "none", "disable_parallel_tool_use": True}, "none", None),
    ({"type": "any"}, "required", None),
    ({"type": "tool", "name": "weather"},
     {"type": "function", "function": {"name": "weather"}}, None),
    ({"type": "auto", "disable_parallel_tool_use": True}, "auto", False),
])
def test_tool_choice(choice: dict[str, Any], expected: Any, parallel: bool | None) -> None:
    out = messages_to_chat(req([{"role": "user", "content": "Hi"}], tool_choice=choice,
                               tools=[{"name": "weather", "input_schema": {"type": "object"}}]))
    assert out["tool_choice"] == expected
    assert out.get("parallel_tool_calls") == parallel


def test_tool_choice_without_tools_is_dropped() -> None:
    out = messages_to_chat(req([{"role": "user", "content": "Hi"}],
                               tool_choice={"type": "auto"}))
    assert "tool_choice" not in out and "tools" not in out


@pytest.mark.parametrize("payload, param", [
    ({"max_tokens": 5, "messages": []}, "model"),
    ({"model": "", "max_tokens": 5, "messages": []}, "model"),
    ({"model": "m", "messages": []}, "max_tokens"),
    ({"model": "m", "max_tokens": 0, "messages": []}, "max_tokens"),
    ({"model": "m", "max_tokens": True, "messages": []}, "max_tokens"),
    ({"model": "m", "max_tokens": "5", "messages": []}, "max_tokens"),
    ({"model": "m", "max_tokens": 5, "messages": "hi"}, "messages"),
    (req([{"role": "system", "content": "x"}]), "messages[0].role"),
    (req(["hi"]), "messages[0]"),
    (req([{"role": "user", "content": 5}]), "messages[0]"),
    (req([{"role": "user", "content": [{"type": "text"}]}]), "messages[0].content[0]"),
    (req([{"role": "user", "content": ["x"]}]), "messages[0].content[0]"),
    (req([{"role": "user", "content": [{"type": "search_result", "source": "s"}]}]),
     "messages[0].content[0]"),
    (req([{"role": "user", "content": [{"type": "image", "source": {
        "type": "file", "file_id": "f"}}]}]), "messages[0].content[0]"),
    (req([{"role": "user", "content": [{"type": "document", "source": {
        "type": "url", "url": "https://x.test/a.pdf"}}]}]), "messages[0].content[0]"),
    (req([{"role": "user", "content": [{"type": "document"}]}]), "messages[0].content[0]"),
    (req([{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]),
     "messages[0].content[0]"),
    (req([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                        "content": 5}]}]), "messages[0].content[0]"),
    (req([{"role": "assistant", "content": [{"type": "server_tool_use", "id": "s",
                                             "name": "web_search", "input": {}}]}]),
     "messages[0].content[0]"),
    (req([{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
                                             "input": [1]}]}]), "messages[0].content[0]"),
    (req([{"role": "assistant", "content": [{"type": "tool_use", "name": "f"}]}]),
     "messages[0].content[0]"),
    (req([{"role": "assistant", "content": 3}]), "messages[0]"),
    (req([], system=[{"type": "image"}]), "system[0]"),
    (req([], system=5), "system"),
    (req([], tools=[{"type": "web_search_20250305", "name": "web_search"}]), "tools[0]"),
    (req([], tools=[{"input_schema": {}}]), "tools[0]"),
    (req([], tools=["x"]), "tools[0]"),
    (req([], tools={"name": "x"}), "tools"),
    (req([], tools=[{"name": "f"}], tool_choice={"type": "tool"}), "tool_choice"),
    (req([], tools=[{"name": "f"}], tool_choice="auto"), "tool_choice"),
    (req([], stop_sequences="END"), "stop_sequences"),
    (req([], stop_sequences=["END", 3]), "stop_sequences"),
    (req([], container="c1"), "container"),
    (req([], mcp_servers=[{"url": "https://x"}]), "mcp_servers"),
])
def test_refused(payload: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        messages_to_chat(payload)
    assert info.value.param == param and info.value.status == 400
    assert info.value.message.startswith(param)


def test_a_tool_without_schema_gets_an_empty_object_schema() -> None:
    out = messages_to_chat(req([], tools=[{"name": "f"}]))
    assert out["tools"][0]["function"]["parameters"] == {"type": "object", "properties": {}}


def test_the_input_is_not_modified() -> None:
    payload = req([{"role": "user", "content": [{"type": "text", "text": "a"}]},
                   {"role": "assistant", "content": [{"type": "tool_use", "id": "t",
                                                      "name": "f", "input": {"x": 1}}]}],
                  system=[{"type": "text", "text": "s"}])
    before = orjson.dumps(payload)
    messages_to_chat(payload)
    assert orjson.dumps(payload) == before


def test_round_trip_through_the_reverse_translator() -> None:
    """Anthropic -> OpenAI (here) -> Anthropic (gateway.upstream.openai_anthropic) gives
    the request back, for what both directions carry."""
    original = req([
        {"role": "user", "content": "What is the weather?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather",
             "input": {"city": "Paris", "days": 2}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PNG}},
            {"type": "text", "text": "And this picture?"}]},
    ], system="Be brief.", temperature=0.5, top_p=0.9, top_k=10, stop_sequences=["END"],
        stream=True, metadata={"user_id": "u-1"},
        tools=[{"name": "weather", "description": "Weather",
                "input_schema": {"type": "object", "properties": {}}}],
        tool_choice={"type": "tool", "name": "weather", "disable_parallel_tool_use": True})
    assert chat_to_messages(messages_to_chat(original)) == original
