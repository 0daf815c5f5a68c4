"""OpenAI chat completion streams -> Anthropic Messages streams, and built streams
(gateway.wire.anthropic_stream): every stream is decoded by the anthropic SDK's own SSE
decoder, each event validated with its types, and the SDK's MessageStream accumulates
the final message."""

from __future__ import annotations

from typing import Any

import anthropic
import orjson
import pytest
from wire.anthropic_sdk_check import check_order, events, final_message, message, no_extras
from openai.types.chat import ChatCompletionChunk

from gateway.errors import UpstreamTimeout, VerificationBlocked
from gateway.wire.sse import DONE, encode_event
from gateway.wire.chat import synthesize
from gateway.wire.anthropic_response import block_message, chat_to_message
from gateway.wire.anthropic_stream import (
    PING,
    ChatStreamToMessages,
    message_end_events,
    message_events,
    message_start_event,
    refusal_events,
    text_block_events,
    text_delta_event,
)

USAGE = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None,
          usage: dict[str, Any] | None = None, **choice: Any) -> bytes:
    obj: dict[str, Any] = {"id": "chatcmpl-9", "object": "chat.completion.chunk",
                           "created": 1, "model": "gpt-x", "choices": []}
    if delta is not None:
        obj["choices"] = [{"index": 0, "delta": delta, "logprobs": None,
                           "finish_reason": finish, **choice}]
    if usage is not None:
        obj["usage"] = usage
    ChatCompletionChunk.model_validate(obj)  # the fixtures are what OpenAI sends
    return encode_event(obj)


def call(index: int, *, id: str | None = None, name: str | None = None,
         args: str = "") -> dict[str, Any]:
    fn: dict[str, Any] = {"arguments": args}
    out: dict[str, Any] = {"index": index, "function": fn}
    if id is not None:
        out.update(id=id, type="function")
        fn["name"] = name
    return {"tool_calls": [out]}


TEXT_STREAM = b"".join([
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Hello"}), chunk({"content": " there."}),
    chunk({}, "stop"), chunk(usage=USAGE), DONE])


def translate(data: bytes, size: int = 5, **kw: Any) -> tuple[bytes, ChatStreamToMessages]:
    t = ChatStreamToMessages(**kw)
    out = [t.feed(data[i:i + size]) for i in range(0, len(data), size)]
    out.append(t.finish())
    return b"".join(out), t


def test_text_stream() -> None:
    out, t = translate(TEXT_STREAM)
    assert t.done and t.error is None
    kinds = [e.type for e in events(out)]
    assert kinds == ["message_start", "content_block_start", "content_block_delta",
                     "content_block_delta", "content_block_stop", "message_delta",
                     "message_stop"]
    assert out.count(PING) == 1 and out.index(PING) < out.index(b"content_block_start")
    final = final_message(out)
    no_extras(final)
    assert final.id == "msg_chatcmpl-9" and final.model == "gpt-x"
    assert [b.text for b in final.content if b.type == "text"] == ["Hello there."]
    assert final.stop_reason == "end_turn"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (12, 5)


@pytest.mark.parametrize("size", [1, 2, 3, 64, 10_000])
def test_output_does_not_depend_on_how_the_input_was_split(size: int) -> None:
    assert translate(TEXT_STREAM, size)[0] == translate(TEXT_STREAM, 10_000)[0]


def test_stream_equals_the_non_stream_translation() -> None:
    """The engine's buffer-mode synthesis of a completion, translated as a stream, gives
    what chat_to_message gives for the completion itself."""
    c = {"id": "chatcmpl-3", "object": "chat.completion", "created": 1, "model": "gpt-x",
         "choices": [{"index": 0, "logprobs": None, "finish_reason": "tool_calls",
                      "message": {"role": "assistant", "content": "Let me look.", "tool_calls": [
                          {"id": "call_a", "type": "function",
                           "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
                          {"id": "call_b", "type": "function",
                           "function": {"name": "time", "arguments": '{"tz":"CET"}'}}]}}],
         "usage": USAGE}
    out, _ = translate(synthesize(c, include_usage=True), 9)
    events(out)
    streamed = final_message(out).model_dump(exclude_none=True)
    expected = message(chat_to_message(c)).model_dump(exclude_none=True)
    assert streamed == expected


def test_tool_call_arguments_stream_as_input_json_deltas() -> None:
    data = b"".join([
        chunk({"role": "assistant", "content": None}),
        chunk(call(0, id="call_1", name="weather")),
        chunk(call(0, args='{"ci')), chunk(call(0, args='ty": "Par')), chunk(call(0, args='is"}')),
        chunk(call(1, id="call_2", name="noargs")),
        chunk({}, "tool_calls"), DONE])
    out, _ = translate(data)
    evs = events(out)
    deltas = [e.delta.partial_json for e in evs if e.type == "content_block_delta"]
    assert deltas == ['{"ci', 'ty": "Par', 'is"}']
    starts = [e.content_block for e in evs if e.type == "content_block_start"]
    assert [(b.type, b.id, b.name, b.input) for b in starts] == [
        ("tool_use", "call_1", "weather", {}), ("tool_use", "call_2", "noargs", {})]
    final = final_message(out)
    assert final.stop_reason == "tool_use"
    assert [(b.name, b.input) for b in final.content if b.type == "tool_use"] == [
        ("weather", {"city": "Paris"}), ("noargs", {})]


def test_text_after_a_tool_call_opens_a_new_text_block() -> None:
    data = b"".join([chunk({"content": "a"}), chunk(call(0, id="c", name="f", args="{}")),
                     chunk({"content": "b"}), chunk({}, "stop"), DONE])
    final = final_message(translate(data)[0])
    assert [b.type for b in final.content] == ["text", "tool_use", "text"]
    assert final.stop_reason == "tool_use"  # a tool was called though the server said "stop"


def test_a_tool_call_without_an_id_gets_one() -> None:
    data = b"".join([chunk({"tool_calls": [{"index": 0, "function": {
        "name": "f", "arguments": "{}"}}]}), chunk({}, "tool_calls"), DONE])
    final = final_message(translate(data)[0])
    assert final.content[0].type == "tool_use" and final.content[0].id == "toolu_0"


def test_interleaved_tool_arguments_end_the_stream_with_an_error() -> None:
    data = b"".join([chunk(call(0, id="a", name="f")), chunk(call(1, id="b", name="g")),
                     chunk(call(0, args='{"x":1}')), chunk({"content": "late"}),
                     chunk({}, "tool_calls"), DONE])
    out, t = translate(data)
    assert t.error is not None and "interleaved" in t.error.message
    assert events(out)[-1] == {"type": "error", "error": {
        "type": "api_error", "message": t.error.message}}
    assert b"late" not in out
    with pytest.raises(anthropic.APIStatusError) as info:
        final_message(out)
    assert isinstance(info.value.body, dict) and info.value.body["error"]["type"] == "api_error"


def test_refusal_deltas() -> None:
    data = b"".join([chunk({"refusal": "I can't "}), chunk({"refusal": "help."}),
                     chunk({}, "stop"), DONE])
    final = final_message(translate(data)[0])
    assert final.stop_reason == "refusal"
    assert final.content[0].type == "text" and final.content[0].text == "I can't help."


@pytest.mark.parametrize("finish, stop", [("length", "max_tokens"),
                                          ("content_filter", "refusal")])
def test_finish_reasons(finish: str, stop: str) -> None:
    data = b"".join([chunk({"content": "x"}), chunk({}, finish), DONE])
    assert final_message(translate(data)[0]).stop_reason == stop


def test_stop_sequence_named_by_the_server() -> None:
    data = b"".join([chunk({"content": "x"}), chunk({}, "stop", stop_reason="END"), DONE])
    final = final_message(translate(data, stop_sequences=["END"])[0])
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "END")


def test_usage_on_the_finish_chunk_and_cached_tokens() -> None:
    usage = {**USAGE, "prompt_tokens_details": {"cached_tokens": 10}}
    data = b"".join([chunk({"content": "x"}), chunk({}, "stop", usage=usage), DONE])
    u = final_message(translate(data)[0]).usage
    assert (u.input_tokens, u.cache_read_input_tokens, u.output_tokens) == (2, 10, 5)


def test_no_usage_at_all_still_gives_a_valid_message_delta() -> None:
    data = b"".join([chunk({"content": "x"}), chunk({}, "stop"), DONE])
    u = final_message(translate(data)[0]).usage
    assert (u.input_tokens, u.output_tokens) == (0, 0)


def test_empty_stream() -> None:
    out, t = translate(DONE, model="requested")
    assert [e.type for e in events(out)] == ["message_start", "message_delta", "message_stop"]
    final = final_message(out)
    assert final.content == [] and final.model == "requested" and final.id == "msg_gateway"


def test_finish_without_done_ends_cleanly() -> None:
    data = b"".join([chunk({"content": "x"}), chunk({}, "stop")])
    out, t = translate(data)
    assert t.error is None and final_message(out).content[0].text == "x"  # type: ignore[union-attr]


def test_a_stream_that_just_stops_ends_with_an_error_event() -> None:
    out, t = translate(chunk({"content": "half an ans"}))
    assert t.error is not None and t.error.code == "upstream_stream_truncated"
    assert events(out)[-1]["error"]["type"] == "api_error"
    with pytest.raises(anthropic.APIStatusError):
        final_message(out)


def test_an_upstream_error_chunk_becomes_an_error_event() -> None:
    data = b"".join([chunk({"content": "x"}), encode_event({"error": {
        "message": "overloaded", "type": "service_unavailable", "code": "overloaded"}}),
        chunk({"content": "never"})])
    out, t = translate(data)
    assert t.error is not None and t.error.message == "overloaded"
    assert events(out)[-1] == {"type": "error", "error": {"type": "overloaded_error",
                                                          "message": "overloaded"}}
    assert b"never" not in out and t.finish() == b""
    with pytest.raises(anthropic.APIStatusError):
        final_message(out)


def test_fail_with_a_gateway_error() -> None:
    t = ChatStreamToMessages()
    started = t.feed(chunk({"content": "x"}))
    assert t.started
    out = started + t.fail(UpstreamTimeout("no data for timeouts.read"))
    assert events(out)[-1]["error"] == {"type": "timeout_error",
                                        "message": "no data for timeouts.read"}
    assert t.fail(UpstreamTimeout("again")) == b"" and t.feed(DONE) == b""


def test_unreadable_events_and_other_choices_are_skipped() -> None:
    data = b"".join([b"data: {not json\n\n", b"data: [1]\n\n",
                     encode_event({"id": "c", "object": "chat.completion.chunk", "created": 1,
                                   "model": "m", "choices": [{"index": 1, "delta": {
                                       "content": "other"}, "finish_reason": None}]}),
                     chunk({"content": "mine"}), chunk({}, "stop"), DONE])
    final = final_message(translate(data)[0])
    assert [b.text for b in final.content if b.type == "text"] == ["mine"]


def test_pending_counts_an_unfinished_event() -> None:
    t = ChatStreamToMessages()
    assert t.feed(b'data: {"id": "c", "choi') == b""
    assert t.pending == len(b'data: {"id": "c", "choi')


# ---- built streams ----------------------------------------------------------------------


def test_message_events_replays_a_message() -> None:
    original = chat_to_message({"id": "c1", "model": "gpt-x", "usage": USAGE, "choices": [{
        "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Looking.", "tool_calls": [
                {"id": "t1", "type": "function",
                 "function": {"name": "f", "arguments": '{"a": [1, {"b": null}]}'}}]}}]})
    out = message_events(original)
    events(out)
    assert final_message(out).model_dump() == message(original).model_dump()


def test_a_blocked_answer_as_a_stream() -> None:
    blocked = block_message(chat_to_message({"id": "c", "model": "m", "usage": USAGE,
                                             "choices": [{"message": {"content": "bad"}}]}),
                            "Blocked by policy.")
    out = message_events(blocked, verity={"verdict": "fail", "action": "block"})
    evs = events(out, allow_extra=frozenset({"verity"}))
    assert evs[-2].model_extra == {"verity": {"verdict": "fail", "action": "block"}}
    final = final_message(out, allow_extra=frozenset({"verity"}))
    assert final.stop_reason == "refusal"
    assert final.content[0].text == "Blocked by policy."  # type: ignore[union-attr]


def test_hold_back_pieces_disclaimer_on_the_open_text_block() -> None:
    """What a pass-through hold-back writes: the text so far, then (after the verdict)
    the disclaimer as one more delta on the still-open block, its stop, and the end."""
    head = message_start_event("msg_1", "m", {"input_tokens": 3})
    head += PING + text_block_events(0, "Answer.")[:-len(b'event: content_block_stop\n'
                                                          b'data: {"type":"content_block_stop",'
                                                          b'"index":0}\n\n')]
    tail = text_delta_event(0, "\n\n[unverified]") + b"event: content_block_stop\ndata: " \
        + orjson.dumps({"type": "content_block_stop", "index": 0}) + b"\n\n" \
        + message_end_events("end_turn", {"output_tokens": 4})
    final = final_message(head + tail)
    assert final.content[0].text == "Answer.\n\n[unverified]"  # type: ignore[union-attr]
    assert (final.usage.input_tokens, final.usage.output_tokens) == (3, 4)


def test_hold_back_pieces_block_after_a_tool_block() -> None:
    head = message_start_event("msg_1", "m") + text_block_events(0, "The moon is cheese.")
    out = head + refusal_events(1, "Blocked by policy.", {"output_tokens": 9})
    events(out)
    final = final_message(out)
    assert [b.text for b in final.content if b.type == "text"] == [
        "The moon is cheese.", "Blocked by policy."]
    assert final.stop_reason == "refusal"


def test_block_with_style_error_mid_stream() -> None:
    t = ChatStreamToMessages()
    out = t.feed(chunk({"content": "x"})) + t.fail(
        VerificationBlocked("Blocked by policy.", status=451))
    assert events(out)[-1]["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.APIStatusError):
        final_message(out)


@pytest.mark.parametrize("kinds, indexes", [
    (["content_block_start"], [0]),
    (["message_start", "content_block_start", "message_delta", "message_stop"],
     [None, 0, None, None]),
    (["message_start", "content_block_start", "content_block_start"], [None, 0, 1]),
    (["message_start", "content_block_start", "content_block_stop", "content_block_start"],
     [None, 1, 1, 0]),
    (["message_start", "content_block_delta"], [None, 0]),
    (["message_start", "message_stop"], [None, None]),
    (["message_start", "message_delta"], [None, None]),
    (["message_start", "message_delta", "message_stop", "message_delta"],
     [None, None, None, None]),
])
def test_the_order_check_itself_rejects_bad_sequences(kinds: list[str],
                                                      indexes: list[int | None]) -> None:
    with pytest.raises(AssertionError):
        check_order(kinds, indexes)


def hold_back_tail(kind: str) -> bytes:
    """The end of a pass-through stream as the engine's HoldBack.finish writes it."""
    verity = {"verdict": "fail", "action": kind}
    base = {"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-x"}
    if kind == "disclaimer":
        extra = [encode_event({**base, "choices": [{"index": 0, "delta": {
            "content": "\n\n[unverified]"}, "logprobs": None, "finish_reason": None}],
            "verity": verity}), chunk({}, "stop")]
    else:
        extra = [encode_event({**base, "choices": [{"index": 0, "delta": {
            "content": "Blocked by policy."}, "logprobs": None,
            "finish_reason": "content_filter"}], "verity": verity})]
    return b"".join([*extra, chunk(usage=USAGE), DONE])


@pytest.mark.parametrize("kind, text, stop", [
    ("disclaimer", "The answer.\n\n[unverified]", "end_turn"),
    ("block", "The answer.Blocked by policy.", "refusal"),
])
def test_the_engines_hold_back_output_translates(kind: str, text: str, stop: str) -> None:
    data = chunk({"role": "assistant", "content": ""}) + chunk({"content": "The answer."}) \
        + hold_back_tail(kind)
    out, _ = translate(data)
    final = final_message(out, allow_extra=frozenset({"verity"}))
    assert [b.text for b in final.content if b.type == "text"] == [text]
    assert final.stop_reason == stop
    delta = [e for e in events(out, allow_extra=frozenset({"verity"}))
             if e.type == "message_delta"]
    assert delta[0].model_extra == {"verity": {"verdict": "fail", "action": kind}}
