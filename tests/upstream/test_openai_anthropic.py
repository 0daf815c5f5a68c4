"""Pure translation OpenAI chat completion requests -> Anthropic Messages requests
(no I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import InvalidRequest
from gateway.upstream.openai_anthropic import DEFAULT_MAX_TOKENS, chat_to_messages

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
