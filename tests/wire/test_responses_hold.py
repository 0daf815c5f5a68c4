"""gateway.wire.responses_hold: the passthrough hold-back of a Responses stream, and what
the official SDK reads of each ending."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import orjson
import pytest

from gateway.errors import VerificationBlocked
from gateway.wire.sse import SSEParser
from gateway.wire.responses_hold import TailHold
from wire import samples as S
from wire.canned import Canned, canned_server

NOTE = "\n\n---\n*Verity: unverified.*"
VERITY = {"verdict": "marginal", "action": "disclaimer"}
TWO_PARTS = S.response([S.reasoning(), S.message("Paris is the capital ", "of France."),
                        S.function_call()])


@pytest.fixture(scope="module")
def canned() -> Iterator[Canned]:
    with canned_server() as srv:
        yield srv


def relay(events: list[dict[str, Any]]) -> tuple[TailHold, list[bytes]]:
    """Feed every event; what was sent after each one."""
    hold = TailHold()
    return hold, [hold.feed(data) for data in S.datas(events)]


def types_of(raw: bytes) -> list[str]:
    return [orjson.loads(d)["type"] for d in SSEParser().feed(raw)]


def test_text_streams_and_the_tail_from_the_last_text_part_is_held() -> None:
    events = S.stream_events(TWO_PARTS)
    hold, sent = relay(events)
    first_done, last_done = [k for k, e in enumerate(events)
                             if e["type"] == "response.output_text.done"]
    # every delta went out as it came
    for k, e in enumerate(events):
        if e["type"] == "response.output_text.delta":
            assert sent[k] != b""
    # the first part's done waited for the next part to be added, then went out with it
    added = next(k for k in range(first_done, len(events))
                 if events[k]["type"] == "response.content_part.added")
    assert all(s == b"" for s in sent[first_done:added])
    assert types_of(sent[added]) == ["response.output_text.done", "response.content_part.done",
                                     "response.content_part.added"]
    assert all(s == b"" for s in sent[last_done:])
    assert hold.held == len(events) - last_done
    assert hold.sent_sequence == last_done - 1


def test_release_sends_the_stream_as_it_came() -> None:
    events = S.stream_events(TWO_PARTS)
    hold, sent = relay(events)
    assert b"".join(sent) + hold.release() == S.sse(events)
    assert hold.held == 0 and hold.acc.consistent()


def test_append_delivers_a_disclaimer_the_sdk_shows(canned: Canned) -> None:
    events = S.stream_events(TWO_PARTS)
    hold, sent = relay(events)
    raw = b"".join(sent) + hold.append(NOTE, VERITY)
    out = [orjson.loads(d) for d in SSEParser().feed(raw)]
    for event in out:
        S.EVENT.validate_python(event)
    assert [e["sequence_number"] for e in out] == list(range(len(events) + 1))
    canned.reply(raw)
    with canned.client().responses.stream(model="m", input="q") as stream:
        deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert deltas == final.output_text == "Paris is the capital of France." + NOTE
    assert final.model_extra["verity"] == VERITY
    assert final.output[2].type == "function_call"


def test_append_with_no_text_adds_a_message_before_the_end(canned: Canned) -> None:
    events = S.stream_events(S.response([S.reasoning(), S.function_call()]))
    hold, sent = relay(events)
    assert hold.held == 1  # only the terminal event
    raw = b"".join(sent) + hold.append(NOTE)
    canned.reply(raw)
    with canned.client().responses.stream(model="m", input="q") as stream:
        final = stream.get_final_response()
    assert final.output_text == NOTE and final.output[2].type == "message"


def test_fail_drops_the_tail_and_the_sdk_raises(canned: Canned) -> None:
    events = S.stream_events(TWO_PARTS)
    hold, sent = relay(events)
    err = VerificationBlocked("Blocked: it failed verification.")
    raw = b"".join(sent) + hold.fail(err.body()["error"])
    tail = types_of(raw)[-2:]
    assert tail == ["error", "response.failed"]
    assert "response.completed" not in types_of(raw)
    canned.reply(raw)
    text = ""
    with pytest.raises(openai.APIError) as info, \
            canned.client().responses.stream(model="m", input="q") as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                text += event.delta
    assert info.value.message == "Blocked: it failed verification."
    assert text == "Paris is the capital of France."  # already streamed: cannot be taken back


def test_after_an_unreadable_event_nothing_is_released_early() -> None:
    events = S.stream_events(TWO_PARTS)
    first_done = next(k for k, e in enumerate(events)
                      if e["type"] == "response.output_text.done")
    hold = TailHold()
    sent = [hold.feed(d) for d in S.datas(events[:first_done + 1])]
    assert hold.feed(b"{not json") == b""
    rest = [hold.feed(d) for d in S.datas(events[first_done + 1:])]
    assert all(s == b"" for s in rest) and hold.acc.unreadable == 1
    assert b"".join(sent) + hold.release() != b""


@pytest.mark.parametrize("end", [
    {"type": "error", "sequence_number": 7, "error": {"message": "x", "type": "server_error"}},
    "[DONE]"])
def test_an_end_is_held(end: Any) -> None:
    events = S.stream_events(S.response([S.message("Hi.")]))[:3]
    hold, _ = relay(events)
    data = end.encode() if isinstance(end, str) else orjson.dumps(end)
    assert hold.feed(data) == b""
    more = {"type": "response.content_part.added", "output_index": 0, "content_index": 1,
            "item_id": "msg_1", "sequence_number": 8,
            "part": {"type": "output_text", "text": "", "annotations": []}}
    assert hold.feed(orjson.dumps(more)) == b""  # locked: nothing after an end goes early
