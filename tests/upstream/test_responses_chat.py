"""gateway.upstream.responses_chat: Responses request -> chat completions request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, get_type_hints

import orjson
import pytest
from openai.types.responses import response_create_params
from pydantic import BaseModel
from wire import samples as S
from wire.canned import JSON, Canned, canned_server

from gateway.errors import InvalidRequest
from gateway.upstream.responses_chat import (
    NO_OP,
    PASSED,
    REFUSED,
    TRANSLATED,
    responses_to_chat,
)
from gateway.wire.responses import read_request

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather of a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"], "additionalProperties": False},
           "strict": True}


def test_a_full_request() -> None:
    body = {
        "model": "llama", "instructions": "Answer from the context.",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Paris?"}]},
                  S.reasoning(), S.message("Checking."), S.function_call(),
                  {"type": "function_call_output", "call_id": "call_1", "output": "18C"}],
        "tools": [WEATHER], "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": False, "max_output_tokens": 256, "temperature": 0.2,
        "top_p": 0.9, "metadata": {"app": "x"}, "user": "u1", "top_k": 40,
        "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"},
                            "strict": True}, "verbosity": "low"},
        "reasoning": {"effort": "low", "summary": None}, "store": False,
        "truncation": "disabled", "include": [], "stream": True,
        "stream_options": {"include_obfuscation": False}}
    chat = responses_to_chat(body)
    assert chat == {
        "model": "llama",
        "messages": [
            {"role": "system", "content": "Answer from the context."},
            {"role": "user", "content": [{"type": "text", "text": "Paris?"}]},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18C"}],
        "tools": [{"type": "function", "function": {
            "name": "get_weather", "description": "Weather of a city.",
            "parameters": WEATHER["parameters"], "strict": True}}],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "parallel_tool_calls": False, "max_tokens": 256, "temperature": 0.2, "top_p": 0.9,
        "metadata": {"app": "x"}, "user": "u1", "top_k": 40,
        "response_format": {"type": "json_schema", "json_schema": {
            "name": "w", "schema": {"type": "object"}, "strict": True}},
        "verbosity": "low", "reasoning_effort": "low",
        "stream": True, "stream_options": {"include_usage": True}}
    assert responses_to_chat(body, max_tokens_field="max_completion_tokens")[
        "max_completion_tokens"] == 256


def test_the_upstream_gets_the_messages_the_layers_see() -> None:
    body = {"instructions": "Be brief.", "input": [
        {"role": "developer", "content": "<context>Paris is in France.</context>"},
        {"role": "user", "content": "Where is Paris?"}, S.message("In France."),
        {"role": "user", "content": [{"type": "input_text", "text": "Sure?"},
                                     {"type": "input_image", "image_url": "data:image/png;base64,AA"}]}]}
    assert responses_to_chat(body)["messages"] == read_request(body).messages


@pytest.mark.parametrize(("fmt", "expected"), [
    ({"type": "text"}, None), ({"type": "json_object"}, {"type": "json_object"})])
def test_text_formats(fmt: dict[str, Any], expected: Any) -> None:
    chat = responses_to_chat({"model": "m", "input": "x", "text": {"format": fmt}})
    assert chat.get("response_format") == expected


@pytest.mark.parametrize(("body", "param", "code"), [
    ({"tools": [{"type": "web_search"}]}, "tools[0].type", "unsupported_value"),
    ({"tools": [{"type": "custom", "name": "grep"}]}, "tools[0].type", "unsupported_value"),
    ({"tools": [{**WEATHER, "defer_loading": True}]}, "tools[0].defer_loading",
     "unsupported_value"),
    ({"tool_choice": {"type": "web_search_preview"}}, "tool_choice", "unsupported_value"),
    ({"tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []}}, "tool_choice",
     "unsupported_value"),
    ({"previous_response_id": "resp_0"}, "previous_response_id", "unsupported_parameter"),
    ({"conversation": "conv_1"}, "conversation", "unsupported_parameter"),
    ({"prompt": {"id": "pmpt_1"}}, "prompt", "unsupported_parameter"),
    ({"store": True}, "store", "unsupported_parameter"),
    ({"background": True}, "background", "unsupported_parameter"),
    ({"truncation": "auto"}, "truncation", "unsupported_parameter"),
    ({"include": ["reasoning.encrypted_content"]}, "include", "unsupported_parameter"),
    ({"top_logprobs": 3}, "top_logprobs", "unsupported_parameter"),
    ({"max_tool_calls": 2}, "max_tool_calls", "unsupported_parameter"),
    ({"context_management": [{"type": "compaction"}]}, "context_management",
     "unsupported_parameter"),
    ({"reasoning": {"summary": "auto"}}, "reasoning.summary", "unsupported_value"),
    ({"text": {"format": {"type": "grammar"}}}, "text.format.type", "unsupported_value"),
    ({"input": [{"type": "item_reference", "id": "msg_0"}]}, "input[0]", "unsupported_value"),
    ({"input": [{"type": "web_search_call", "id": "ws"}]}, "input[0]", "unsupported_value"),
    ({"input": [{"type": "mcp_call", "id": "m", "output": "x"}]}, "input[0]",
     "unsupported_value"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
     "input[0].content[0]", "unsupported_value"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
     "input[0].content[0]", "unsupported_value"),
    ({"input": [{"role": "system", "content": [{"type": "input_image", "image_url": "u"}]}]},
     "input[0].content[0]", "unsupported_value"),
    ({"input": [{"type": "function_call_output", "call_id": "c",
                 "output": [{"type": "input_image", "image_url": "u"}]}]},
     "input[0].output[0]", "unsupported_value"),
    ({"input": [{"role": "critic", "content": "x"}]}, "input[0].role", "unsupported_value"),
    ({"input": []}, "input", "missing_required_parameter")])
def test_what_cannot_be_translated_is_refused_by_name(body: dict[str, Any], param: str,
                                                      code: str) -> None:
    body = {"model": "m", "input": "x", **body}
    with pytest.raises(InvalidRequest) as info:
        responses_to_chat(body)
    assert info.value.status == 400
    assert (info.value.param, info.value.code) == (param, code)
    assert "chat completions" in info.value.message or code == "missing_required_parameter"


def test_every_sdk_request_field_is_classified() -> None:
    """A field the SDK gains must be decided here: translated, passed, dropped at its
    no-op value, or refused (else it would be forwarded as a vendor field)."""
    fields = set(get_type_hints(response_create_params.ResponseCreateParamsBase))
    fields |= {"stream"}
    known = TRANSLATED | PASSED | set(NO_OP) | REFUSED
    assert fields - known == set()


# ---- what the SDK sends -------------------------------------------------------------------


@pytest.fixture(scope="module")
def canned() -> Iterator[Canned]:
    with canned_server() as srv:
        yield srv


class City(BaseModel):
    city: str


def sent(canned: Canned) -> dict[str, Any]:
    return orjson.loads(canned.app.requests[-1])  # type: ignore[no-any-return]


def test_requests_as_the_sdk_sends_them_translate(canned: Canned) -> None:
    canned.reply(orjson.dumps(S.response([S.message('{"city": "Paris"}')])), JSON)
    client = canned.client()
    client.responses.create(model="m", input="Hi", instructions="Be brief.",
                            max_output_tokens=50, temperature=0)
    assert responses_to_chat(sent(canned)) == {
        "model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": "Hi"}],
        "max_tokens": 50, "temperature": 0}
    client.responses.parse(model="m", input="Where?", text_format=City)
    chat = responses_to_chat(sent(canned))
    assert chat["response_format"]["type"] == "json_schema"
    assert chat["response_format"]["json_schema"]["name"] == "City"
    client.responses.create(model="m", input=[{"role": "user", "content": "x"}],
                            tools=[WEATHER], tool_choice="required")  # type: ignore[list-item]
    assert responses_to_chat(sent(canned))["tool_choice"] == "required"
