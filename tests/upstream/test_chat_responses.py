"""gateway.upstream.chat_responses: a chat completions answer back in the Responses shape,
read by the official SDK (strict models, and its streaming helpers over HTTP)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import orjson
import pytest
from pydantic import BaseModel
from wire import samples as S
from wire.canned import JSON, Canned, canned_server

from gateway.upstream.chat_responses import ChatStreamToResponses, chat_to_response
from gateway.wire.responses_stream import ResponsesAccumulator, encode_event

REQUEST = {"model": "llama", "input": "Weather in Paris?", "instructions": "Be brief.",
           "tools": [{"type": "function", "name": "get_weather", "parameters": {}}],
           "temperature": 0.5}
USAGE = {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29,
         "prompt_tokens_details": {"cached_tokens": 4},
         "completion_tokens_details": {"reasoning_tokens": 0}}


def completion(content: str | None = "It is sunny.", *, finish: str = "stop",
               calls: list[dict[str, Any]] | None = None,
               refusal: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if calls:
        message["tool_calls"] = calls
    return {"id": "chatcmpl-xyz", "object": "chat.completion", "created": 1751642570,
            "model": "llama-3", "choices": [{"index": 0, "message": message,
                                              "finish_reason": finish}], "usage": USAGE}


CALL = {"id": "call_a1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}


def test_a_text_answer() -> None:
    out = chat_to_response(completion(), REQUEST)
    r = S.validate(out)
    assert r.id == "resp_xyz" and r.output[0].id == "msg_xyz"  # type: ignore[union-attr]
    assert r.output_text == "It is sunny." and r.status == "completed"
    assert r.model == "llama-3" and r.created_at == 1751642570
    assert r.instructions == "Be brief." and r.temperature == 0.5 and r.store is False
    assert r.tools[0].name == "get_weather"  # type: ignore[union-attr]
    assert r.usage is not None and r.usage.model_dump() == {
        "input_tokens": 20, "output_tokens": 9, "total_tokens": 29,
        "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0,
                                 "cache_write_tokens_details": None},
        "output_tokens_details": {"reasoning_tokens": 0}}


def test_text_and_tool_calls() -> None:
    r = S.validate(chat_to_response(completion("Let me check.", finish="tool_calls",
                                               calls=[CALL]), REQUEST))
    assert [o.type for o in r.output] == ["message", "function_call"]
    call = r.output[1]
    assert (call.id, call.call_id, call.name, call.arguments) == (  # type: ignore[union-attr]
        "fc_a1", "call_a1", "get_weather", '{"city":"Paris"}')
    only = S.validate(chat_to_response(completion(None, finish="tool_calls", calls=[CALL]),
                                       REQUEST))
    assert [o.type for o in only.output] == ["function_call"] and only.output_text == ""


@pytest.mark.parametrize(("finish", "reason"), [("length", "max_output_tokens"),
                                                ("content_filter", "content_filter")])
def test_cut_answers_are_incomplete(finish: str, reason: str) -> None:
    r = S.validate(chat_to_response(completion("Cut sh", finish=finish), REQUEST))
    assert r.status == "incomplete" and r.incomplete_details is not None
    assert r.incomplete_details.reason == reason
    assert r.output[0].status == "incomplete"  # type: ignore[union-attr]


def test_a_refusal() -> None:
    r = S.validate(chat_to_response(completion(None, refusal="I can't help."), REQUEST))
    assert r.output[0].content[0].type == "refusal" and r.output_text == ""  # type: ignore[union-attr]


def test_an_answer_without_id_gets_one() -> None:
    bare = {k: v for k, v in completion().items() if k != "id"}
    assert chat_to_response(bare, REQUEST)["id"].startswith("resp_")
    assert chat_to_response(bare, REQUEST, response_id="resp_fixed")["output"][0]["id"] == \
        "msg_fixed"


# ---- streams ------------------------------------------------------------------------------


def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None,
                                          "finish_reason": finish}]
    return {"id": "chatcmpl-xyz", "object": "chat.completion.chunk", "created": 1751642570,
            "model": "llama-3", "choices": choices, **extra}


TEXT_STREAM = [chunk({"role": "assistant", "content": "", "refusal": None}),
               chunk({"content": "It is "}), chunk({"content": "sunny."}),
               chunk({}, "stop"), chunk(None, usage=USAGE)]
CALL_STREAM = [chunk({"role": "assistant", "content": "Checking."}),
               chunk({"tool_calls": [{"index": 0, "id": "call_a1", "type": "function",
                                      "function": {"name": "get_weather", "arguments": ""}}]}),
               chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
               chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
               chunk({"tool_calls": [{"index": 1, "id": "call_b2", "type": "function",
                                      "function": {"name": "get_time", "arguments": "{}"}}]}),
               chunk({}, "tool_calls"), chunk(None, usage=USAGE)]


def translate(chunks: list[dict[str, Any]], done: bool = True) -> list[dict[str, Any]]:
    t = ChatStreamToResponses(REQUEST)
    events: list[dict[str, Any]] = []
    for c in chunks:
        events += t.feed_data(orjson.dumps(c))
    if done:
        events += t.feed_data(b"[DONE]")
    return events


@pytest.fixture(scope="module")
def canned() -> Iterator[Canned]:
    with canned_server() as srv:
        yield srv


def sdk(canned: Canned, events: list[dict[str, Any]]) -> tuple[str, Any]:
    canned.reply(b"".join(encode_event(e) for e in events))
    with canned.client().responses.stream(model="m", input="q") as stream:
        deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        return deltas, stream.get_final_response()


@pytest.mark.parametrize(("chunks", "expected"), [
    (TEXT_STREAM, completion("It is sunny.")),
    (CALL_STREAM, completion("Checking.", finish="tool_calls", calls=[
        {**CALL, "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
        {"id": "call_b2", "type": "function",
         "function": {"name": "get_time", "arguments": "{}"}}]))])
def test_a_stream_translates_to_the_non_stream_answer(
        canned: Canned, chunks: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    events = translate(chunks)
    for event in events:
        S.EVENT.validate_python(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"] == chat_to_response(expected, REQUEST)
    acc = ResponsesAccumulator()
    for data in S.datas(events):
        acc.feed_data(data)
    assert acc.consistent() and acc.unreadable == 0 and not acc.truncated
    deltas, final = sdk(canned, events)
    assert deltas == final.output_text == (expected["choices"][0]["message"]["content"] or "")
    assert final.usage.total_tokens == 29


def test_a_stream_without_done_is_closed_by_finish() -> None:
    t = ChatStreamToResponses(REQUEST)
    for c in TEXT_STREAM:
        t.feed(c)
    assert t.finished
    assert t.finish()[-1]["type"] == "response.completed"
    assert t.finish() == [] and t.feed(TEXT_STREAM[1]) == []


def test_a_length_stream_ends_incomplete() -> None:
    events = translate([chunk({"content": "Cut sh"}), chunk({}, "length")])
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_a_cut_stream_ends_with_an_error_the_sdk_raises(canned: Canned) -> None:
    t = ChatStreamToResponses(REQUEST)
    events: list[dict[str, Any]] = []
    for c in TEXT_STREAM[:2]:
        events += t.feed(c)
    assert not t.finished
    events += t.fail({"message": "upstream stream ended without its end",
                      "type": "upstream_error", "code": "upstream_stream_truncated"})
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    canned.reply(b"".join(encode_event(e) for e in events))
    with pytest.raises(openai.APIError) as info, \
            canned.client().responses.stream(model="m", input="q") as stream:
        list(stream)
    assert info.value.code == "upstream_stream_truncated"


def test_an_in_band_error_chunk_ends_the_stream() -> None:
    t = ChatStreamToResponses(REQUEST)
    t.feed(TEXT_STREAM[0])
    events = t.feed_data(orjson.dumps({"error": {"message": "overloaded",
                                                 "type": "server_error"}}))
    assert [e["type"] for e in events] == ["error", "response.failed"]
    assert t.ended and t.feed_data(b"[DONE]") == []


def test_a_refusal_stream() -> None:
    events = translate([chunk({"role": "assistant", "refusal": "I can't "}),
                        chunk({"refusal": "help."}), chunk({}, "stop")])
    for event in events:
        S.EVENT.validate_python(event)
    final = S.validate(events[-1]["response"])
    assert final.output[0].content[0].refusal == "I can't help."  # type: ignore[union-attr]


def test_structured_output_parses_through_the_sdk(canned: Canned) -> None:
    class City(BaseModel):
        city: str

    canned.reply(orjson.dumps(chat_to_response(completion('{"city": "Paris"}'), REQUEST)), JSON)
    parsed = canned.client().responses.parse(model="m", input="Where?", text_format=City)
    assert parsed.output_parsed == City(city="Paris")
