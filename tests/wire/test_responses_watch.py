"""Responses streams relayed unparsed: the telemetry summary and the end watch read
what they need however the bytes are split, keep no answer text and bounded memory."""

from __future__ import annotations

import orjson
import pytest

from gateway.testing import scripted_responses as sr
from gateway.wire.responses import as_chat_completion
from gateway.wire.responses_watch import TAIL_LIMIT, ResponsesEndWatch, ResponsesSummary

TEXT = "The secret answer is forty-two."
FINAL = sr.response({"model": "gpt-x", "input": "hi"}, "resp_abc", 1700000000, TEXT)
STREAM = b"".join(sr.sse(e) for e in sr.events(FINAL))
CALL = sr.response({"model": "gpt-x", "input": "hi", "tools": [{"name": "weather"}]},
                   "resp_call", 1700000000, "", tool="weather")


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("size", [1, 7, 64, 1 << 16])
@pytest.mark.parametrize("crlf", [False, True])
def test_the_summary_keeps_ids_status_and_usage_not_text(size: int, crlf: bool) -> None:
    data = STREAM.replace(b"\n", b"\r\n") if crlf else STREAM
    summary = ResponsesSummary()
    for piece in _pieces(data, size):
        summary.feed_bytes(piece)
    out = summary.completion()
    assert (out["id"], out["model"], out["status"]) == ("resp_abc", "gpt-x", "completed")
    assert out["usage"] == FINAL["usage"]
    assert b"forty-two" not in orjson.dumps(out)
    chat = as_chat_completion(out)  # what the upstream span reads
    assert chat["id"] == "resp_abc" and chat["choices"][0]["finish_reason"] == "stop"
    assert chat["usage"]["completion_tokens"] == FINAL["usage"]["output_tokens"]


def test_the_summary_of_a_call_keeps_its_finish_reason() -> None:
    summary = ResponsesSummary()
    summary.feed_bytes(b"".join(sr.sse(e) for e in sr.events(CALL)))
    chat = as_chat_completion(summary.completion())
    assert chat["choices"][0]["finish_reason"] == "tool_calls"
    assert "Paris" not in str(chat)


def test_the_summary_drops_an_event_that_never_ends() -> None:
    summary = ResponsesSummary()
    summary.feed_bytes(b'data: {"type":"response.output_text.delta","delta":"')
    for _ in range(40):
        summary.feed_bytes(b"x" * 65536)
    assert len(summary._tail) <= TAIL_LIMIT
    assert summary.completion() == {"object": "response", "output": []}


@pytest.mark.parametrize("size", [1, 5, 100, 1 << 16])
def test_the_end_watch_sees_the_end_however_it_is_split(size: int) -> None:
    watch = ResponsesEndWatch()
    for piece in _pieces(STREAM, size):
        watch.feed(piece)
    assert watch.ended()


def test_a_stream_cut_before_or_inside_its_terminal_event_did_not_end() -> None:
    at = STREAM.index(b"event: response.completed")
    for cut in (STREAM[:at], STREAM[:at + 60], STREAM[:-1]):
        watch = ResponsesEndWatch()
        watch.feed(cut)
        assert not watch.ended()


def test_an_error_event_or_done_ends_a_stream() -> None:
    for end in (b'data: {"type":"error","error":{"message":"x"}}\n\n', b"data: [DONE]\n\n"):
        watch = ResponsesEndWatch()
        watch.feed(STREAM[:STREAM.index(b"event: response.completed")])
        watch.feed(end)
        assert watch.ended()
