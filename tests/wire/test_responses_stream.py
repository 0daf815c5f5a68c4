"""gateway.wire.responses_stream: folding a Responses API stream into its response."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.wire.sse import SSEParser
from gateway.wire.responses import read_response
from gateway.wire.responses_stream import ResponsesAccumulator, encode_event
from wire import samples as S

FINAL = S.response([S.reasoning(), S.message("Paris is the capital ", "of France."),
                    S.function_call()])


def fold(events: list[dict[str, Any]], **kw: Any) -> ResponsesAccumulator:
    acc = ResponsesAccumulator(**kw)
    for data in S.datas(events):
        acc.feed_data(data)
    return acc


def test_a_whole_stream_gives_its_final_response() -> None:
    events = S.stream_events(FINAL)
    acc = fold(events)
    assert acc.terminal == "response.completed" and not acc.truncated
    assert acc.response() == FINAL
    assert acc.streamed_text() == "Paris is the capital of France." == \
        read_response(acc.response()).text
    assert acc.consistent() and acc.unreadable == 0 and not acc.mismatch
    assert (acc.id, acc.model) == ("resp_abc123", "gpt-4o-2024-08-06")
    assert acc.last_sequence == len(events) - 1 and acc.next_output_index == 3


def test_split_anywhere_the_parser_gives_the_same_answer() -> None:
    raw = S.sse(S.stream_events(FINAL, chunk=1))
    for step in (1, 7, 64):
        parser, acc = SSEParser(), ResponsesAccumulator()
        for k in range(0, len(raw), step):
            for data in parser.feed(raw[k:k + step]):
                acc.feed_data(data)
        assert acc.response() == FINAL and acc.consistent()


def test_a_stream_cut_before_its_terminal_event_is_truncated() -> None:
    events = S.stream_events(FINAL)
    cut = next(k for k, e in enumerate(events) if e["type"] == "response.function_call_arguments.delta")
    acc = fold(events[:cut])
    assert acc.truncated and acc.terminal is None
    rebuilt = acc.response()
    assert rebuilt["status"] == "in_progress" and rebuilt["id"] == "resp_abc123"
    assert read_response(rebuilt).text == acc.streamed_text() == "Paris is the capital of France."


def test_an_error_event_ends_the_stream_without_truncation() -> None:
    events = S.stream_events(FINAL)[:5]
    events.append({"type": "error", "sequence_number": 5, "error": {
        "type": "server_error", "code": "server_error", "message": "boom", "param": None}})
    acc = fold(events)
    assert not acc.truncated and acc.error is not None and acc.terminal is None
    assert acc.response()["status"] == "failed"


@pytest.mark.parametrize("status", ["incomplete", "failed"])
def test_other_terminal_events(status: str) -> None:
    final = S.response([S.message("Cut sh")], status=status)
    acc = fold(S.stream_events(final))
    assert acc.terminal == f"response.{status}" and not acc.truncated
    assert acc.response()["status"] == status


def test_a_terminal_response_without_output_is_rebuilt_from_the_events() -> None:
    events = S.stream_events(FINAL)
    events[-1] = {**events[-1], "response": {**FINAL, "output": None}}
    acc = fold(events)
    assert acc.response()["output"] == FINAL["output"] and acc.consistent()


def test_a_terminal_response_that_contradicts_the_deltas_is_inconsistent() -> None:
    events = S.stream_events(FINAL)
    other = S.response([S.message("Lyon is the capital.")])
    events[-1] = {**events[-1], "response": other}
    acc = fold(events)
    assert not acc.mismatch and not acc.consistent()


def test_a_done_event_that_contradicts_its_deltas_is_a_mismatch() -> None:
    events = S.stream_events(S.response([S.message("Paris.")]))
    k = next(k for k, e in enumerate(events) if e["type"] == "response.output_text.done")
    events[k] = {**events[k], "text": "Lyon."}
    acc = fold(events)
    assert acc.mismatch and not acc.consistent()


def test_a_server_that_sends_no_deltas_streamed_its_done_text() -> None:
    events = [e for e in S.stream_events(FINAL) if e["type"] != "response.output_text.delta"]
    acc = fold(events)
    assert acc.consistent() and acc.streamed_text() == "Paris is the capital of France."


def test_past_the_cap_the_output_is_dropped_and_the_end_still_seen() -> None:
    events = S.stream_events(FINAL)
    acc = fold(events, max_bytes=2000)
    assert acc.over_cap and not acc.consistent() and acc.final is None
    assert acc.terminal == "response.completed" and not acc.truncated
    assert acc.response()["output"] == []
    cut = fold(events[:-1], max_bytes=2000)
    assert cut.truncated


@pytest.mark.parametrize("data", [
    b"not json", b"[1, 2]", b'{"no": "type"}', b'{"type": 3}',
    b'{"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": 5}',
    b'{"type": "response.output_text.delta", "output_index": 9, "content_index": 0, '
    b'"delta": "x"}',
    b'{"type": "response.output_item.added", "output_index": -1, "item": {}}',
    b'{"type": "response.content_part.added", "output_index": 1, "content_index": 7, '
    b'"part": {"type": "output_text", "text": ""}}',
    b'{"type": "response.created", "response": "x"}'])
def test_unreadable_events_are_counted(data: bytes) -> None:
    events = S.stream_events(FINAL)
    acc = fold(events[:4])  # created, in_progress, reasoning added + done
    acc.feed_data(data)
    assert acc.unreadable == 1


def test_done_marker_and_unknown_event_types_are_not_unreadable() -> None:
    acc = fold(S.stream_events(FINAL))
    acc.feed_data(b"[DONE]")
    acc.feed_event({"type": "response.web_search_call.searching", "output_index": 0,
                    "item_id": "ws", "sequence_number": 99})
    assert acc.unreadable == 0 and acc.last_sequence == 99


def test_encode_event_writes_event_and_data_lines() -> None:
    event = {"type": "response.output_text.delta", "delta": "a\nb", "sequence_number": 3}
    raw = encode_event(event)
    assert raw == b"event: response.output_text.delta\ndata: " + orjson.dumps(event) + b"\n\n"
    assert SSEParser().feed(raw) == [orjson.dumps(event)]
