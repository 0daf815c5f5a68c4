"""gateway.wire.responses_events: the events the gateway writes, read by the official
SDK — its event models (strict validation) and its streaming helpers over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from gateway.errors import VerificationBlocked
from gateway.wire.responses_actions import blocked_response, with_disclaimer
from gateway.wire.responses_events import append_text, error_events, synthesize
from gateway.wire.responses_stream import ResponsesAccumulator, encode_event
from wire import samples as S
from wire.canned import Canned, canned_server

NOTE = "\n\n---\n*Verity: unverified.*"
VERITY = {"verdict": "marginal", "action": "disclaimer", "score": 0.42, "audit_id": "a1"}
FINAL = S.response([S.reasoning(), S.message("Paris is the capital ", "of France."),
                    S.function_call()])


@pytest.fixture(scope="module")
def canned() -> Iterator[Canned]:
    with canned_server() as srv:
        yield srv


def body(events: list[dict[str, Any]]) -> bytes:
    return b"".join(encode_event(e) for e in events)


def sdk_stream(canned: Canned, events: list[dict[str, Any]]) -> tuple[list[Any], Any]:
    """The events and final response as ``client.responses.stream`` gives them."""
    canned.reply(body(events))
    with canned.client().responses.stream(model="m", input="q") as stream:
        seen = list(stream)
        return seen, stream.get_final_response()


def check_numbers(events: list[dict[str, Any]]) -> None:
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def validated(events: list[dict[str, Any]]) -> None:
    for event in events:
        S.EVENT.validate_python(event)


# ---- synthesize ----------------------------------------------------------------------------


def test_synthesized_stream_is_valid_and_rebuilds_the_response() -> None:
    events = synthesize(FINAL)
    validated(events)
    check_numbers(events)
    assert [e["type"] for e in events][:2] == ["response.created", "response.in_progress"]
    assert events[0]["response"]["output"] == [] and events[0]["response"]["usage"] is None
    acc = ResponsesAccumulator()
    for data in S.datas(events):
        acc.feed_data(data)
    assert acc.response() == FINAL and acc.consistent() and acc.unreadable == 0


def test_the_sdk_streams_a_synthesized_response(canned: Canned) -> None:
    seen, final = sdk_stream(canned, synthesize(FINAL, verity=VERITY))
    deltas = "".join(e.delta for e in seen if e.type == "response.output_text.delta")
    assert deltas == final.output_text == "Paris is the capital of France."
    assert final.output[2].arguments == '{"city":"Paris"}'
    assert final.usage.total_tokens == 19
    assert final.model_extra["verity"] == VERITY


def test_a_synthesized_refusal_and_a_block(canned: Canned) -> None:
    blocked = blocked_response(FINAL, "Blocked: it failed verification.")
    events = synthesize(blocked)
    validated(events)
    seen, final = sdk_stream(canned, events)
    assert final.output_text == "" and final.status == "completed"
    assert final.output[0].content[0].refusal == "Blocked: it failed verification."
    assert [e.delta for e in seen if e.type == "response.refusal.delta"] == [
        "Blocked: it failed verification."]


def test_a_synthesized_disclaimer(canned: Canned) -> None:
    _, final = sdk_stream(canned, synthesize(with_disclaimer(FINAL, NOTE)))
    assert final.output_text == "Paris is the capital of France." + NOTE


def test_an_incomplete_response_ends_with_response_incomplete(canned: Canned) -> None:
    cut = S.response([S.message("Cut sh")], status="incomplete",
                     incomplete_details={"reason": "max_output_tokens"})
    events = synthesize(cut)
    validated(events)
    assert events[-1]["type"] == "response.incomplete"
    canned.reply(body(events))
    raw = list(canned.client().responses.create(model="m", input="q", stream=True))
    assert raw[-1].type == "response.incomplete"
    assert raw[-1].response.output_text == "Cut sh"


# ---- append_text ---------------------------------------------------------------------------


def split_at_last_text_done(events: list[dict[str, Any]]) -> int:
    return max(k for k, e in enumerate(events) if e["type"] == "response.output_text.done")


def test_disclaimer_appended_to_a_held_tail(canned: Canned) -> None:
    events = S.stream_events(FINAL)
    k = split_at_last_text_done(events)
    head, tail = events[:k], events[k:]
    out = head + append_text(tail, NOTE, next_output_index=3, next_sequence=k, verity=VERITY)
    validated(out)
    check_numbers(out)
    assert len(out) == len(events) + 1
    acc = ResponsesAccumulator()
    for data in S.datas(out):
        acc.feed_data(data)
    assert acc.consistent() and acc.streamed_text() == "Paris is the capital of France." + NOTE
    seen, final = sdk_stream(canned, out)
    deltas = "".join(e.delta for e in seen if e.type == "response.output_text.delta")
    assert deltas == final.output_text == "Paris is the capital of France." + NOTE
    assert final.output[1].content[1].text == "of France." + NOTE
    assert final.model_extra["verity"] == VERITY
    canned.reply(body(out))
    raw = list(canned.client().responses.create(model="m", input="q", stream=True))
    added = [e for e in raw if e.type == "response.output_text.delta" and e.delta == NOTE]
    assert len(added) == 1 and added[0].model_extra["verity"] == VERITY


@pytest.mark.parametrize("output", [[S.function_call()], [S.message(refusal="No.")], []])
def test_disclaimer_on_an_answer_without_text_is_a_new_message(
        canned: Canned, output: list[dict[str, Any]]) -> None:
    events = S.stream_events(S.response(output))
    k = len(events) - 1  # only the terminal event held
    out = events[:k] + append_text(events[k:], NOTE, next_output_index=len(output),
                                   next_sequence=k)
    validated(out)
    check_numbers(out)
    _, final = sdk_stream(canned, out)
    assert final.output_text == NOTE and len(final.output) == len(output) + 1


def test_sequence_numbers_continue_when_the_upstream_sends_none() -> None:
    events = [{k: v for k, v in e.items() if k != "sequence_number"}
              for e in S.stream_events(S.response([S.message("x")]))]
    k = split_at_last_text_done(events)
    out = append_text(events[k:], NOTE, next_output_index=1, next_sequence=40)
    assert [e["sequence_number"] for e in out] == list(range(40, 40 + len(out)))


# ---- error_events --------------------------------------------------------------------------


def test_error_events_make_the_sdk_raise(canned: Canned) -> None:
    err = VerificationBlocked("I can't provide that answer.", status=422)
    events = S.stream_events(FINAL)[:6]
    created = events[0]["response"]
    out = events + error_events(err.body()["error"], sequence_number=6, response=created)
    validated(out)
    check_numbers(out)
    assert out[-1]["type"] == "response.failed"
    assert out[-1]["response"]["error"]["code"] == "server_error"
    canned.reply(body(out))
    with pytest.raises(openai.APIError) as info, \
            canned.client().responses.stream(model="m", input="q") as stream:
        for _ in stream:
            pass
    assert info.value.message == "I can't provide that answer."
    assert info.value.code == "content_filter" and info.value.type == "content_filter"


def test_error_events_without_a_known_response() -> None:
    out = error_events({"type": "upstream_error", "code": "x", "message": "m"},
                       sequence_number=0)
    assert [e["type"] for e in out] == ["error"]
    validated(out)


def test_a_tail_holding_several_text_parts_gets_the_text_on_the_last(canned: Canned) -> None:
    events = S.stream_events(FINAL)
    out = append_text(events, NOTE, next_output_index=3, next_sequence=0)
    check_numbers(out)
    _, final = sdk_stream(canned, out)
    assert final.output[1].content[0].text == "Paris is the capital "
    assert final.output[1].content[1].text == "of France." + NOTE
