"""The chat completions format: the held tail of a passthrough stream, rewritten around
the verdict (``split_tail``, ``verdict_tail``), and the bodies built for a verdict."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.wire.chat import (
    CHAT_COMPLETIONS,
    answer_text,
    block_completion,
    relayable,
    split_tail,
    verdict_tail,
    with_appended,
)
from gateway.wire.sse import SSEParser

BASE = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def chunk(*choices: dict[str, Any], **extra: Any) -> bytes:
    return orjson.dumps({**BASE, "choices": list(choices), **extra})


def choice(index: int = 0, content: str | None = None, finish: str | None = None,
           **more: Any) -> dict[str, Any]:
    delta = {"content": content} if content is not None else {}
    return {"index": index, "delta": delta, "finish_reason": finish, **more}


USAGE = orjson.dumps({**BASE, "choices": [], "usage": {"total_tokens": 3}})
DONE = b"[DONE]"


def events(body: bytes) -> list[Any]:
    parser = SSEParser()
    out = []
    for data in parser.feed(body):
        out.append(DONE if data == DONE else orjson.loads(data))
    return out


# ---- split_tail ----------------------------------------------------------------------------

def test_split_tail_moves_choice_zero_finish_and_keeps_the_end_in_order() -> None:
    finish = chunk(choice(finish="stop"))
    body, finishes, end = split_tail([finish, USAGE, DONE], every_choice=False)
    assert body == [] and finishes == [chunk(choice(finish="stop"))] and end == [USAGE, DONE]


def test_split_tail_keeps_content_that_came_with_the_finish_in_the_body() -> None:
    last = chunk(choice(content="end.", finish="stop", logprobs={"content": []}))
    body, finishes, end = split_tail([last], every_choice=False)
    (kept,) = [orjson.loads(b) for b in body]
    (moved,) = [orjson.loads(f) for f in finishes]
    assert kept["choices"] == [{"index": 0, "delta": {"content": "end."}, "finish_reason": None,
                                "logprobs": {"content": []}}]
    assert moved["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop",
                                 "logprobs": None}]
    assert end == []


def test_split_tail_moves_only_choice_zero_unless_every_choice() -> None:
    both = chunk(choice(0, finish="stop"), choice(1, finish="length"))
    body, finishes, _ = split_tail([both], every_choice=False)
    assert [c["index"] for b in body for c in orjson.loads(b)["choices"]] == [1]
    assert [c["index"] for f in finishes for c in orjson.loads(f)["choices"]] == [0]
    body, finishes, _ = split_tail([both], every_choice=True)
    assert body == [] and [c["index"] for f in finishes
                           for c in orjson.loads(f)["choices"]] == [0, 1]


def test_split_tail_usage_on_a_finish_event_goes_to_the_end() -> None:
    finish_with_usage = chunk(choice(finish="stop"), usage={"total_tokens": 3})
    body, finishes, end = split_tail([finish_with_usage, DONE], every_choice=False)
    assert body == []
    assert "usage" not in orjson.loads(finishes[0])
    assert orjson.loads(end[0]) == {**BASE, "choices": [], "usage": {"total_tokens": 3}}
    assert end[1] == DONE


@pytest.mark.parametrize("odd", [b"not json", orjson.dumps({"error": {"message": "x"}}),
                                 orjson.dumps({**BASE, "choices": "no"}), orjson.dumps([1])])
def test_split_tail_leaves_what_it_cannot_read_in_the_body_byte_for_byte(odd: bytes) -> None:
    assert split_tail([odd], every_choice=True) == ([odd], [], [])


def test_split_tail_keeps_everything_after_done_at_the_end() -> None:
    late = chunk(choice(content="late"))
    assert split_tail([DONE, late], every_choice=False) == ([], [], [DONE, late])


def test_an_event_without_a_moved_finish_is_kept_whole() -> None:
    other = chunk(choice(1, finish="stop"))
    assert split_tail([other], every_choice=False) == ([other], [], [])


# ---- verdict_tail --------------------------------------------------------------------------

COMPLETION: dict[str, Any] = {"id": "c1", "created": 1, "model": "m", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "Text."}, "finish_reason": "stop"}]}


def test_pass_sends_the_tail_as_it_came() -> None:
    tail = [chunk(choice(finish="stop")), DONE]
    assert events(verdict_tail(tail, COMPLETION, action="pass")) == [
        orjson.loads(tail[0]), DONE]


def test_disclaimer_goes_before_the_finish_with_the_verity_field() -> None:
    tail = [chunk(choice(content="end.", finish="stop")), USAGE, DONE]
    out = events(verdict_tail(tail, COMPLETION, action="disclaimer", text=" [checked]",
                              verity={"verdict": "marginal"}))
    assert [e if e == DONE else (e["choices"], e.get("verity")) for e in out] == [
        ([{"index": 0, "delta": {"content": "end."}, "finish_reason": None}], None),
        ([{"index": 0, "delta": {"content": " [checked]"}, "logprobs": None,
           "finish_reason": None}], {"verdict": "marginal"}),
        ([{"index": 0, "delta": {}, "finish_reason": "stop"}], None),
        ([], None), DONE]


def test_block_ends_every_choice_with_content_filter() -> None:
    two = {**COMPLETION, "choices": [*COMPLETION["choices"], {"index": 1, "message": {}}]}
    tail = [chunk(choice(0, finish="stop"), choice(1, finish="stop")), DONE]
    out = events(verdict_tail(tail, two, action="block", text="No.", verity={"v": 1}))
    finishes = [(c["index"], c["delta"], c["finish_reason"]) for e in out if e != DONE
                for c in e["choices"]]
    assert finishes == [(0, {"content": "No."}, "content_filter"), (1, {}, "content_filter")]
    assert all(e["verity"] == {"v": 1} for e in out if e != DONE) and out[-1] == DONE


def test_an_error_body_replaces_the_whole_tail() -> None:
    out = verdict_tail([chunk(choice(finish="stop")), DONE], COMPLETION, action="block",
                       error_body={"error": {"message": "blocked"}})
    assert out == b'data: {"error":{"message":"blocked"}}\n\n'


# ---- the rest of the format -----------------------------------------------------------------

def test_relayable_holds_finishes_usage_and_anything_else() -> None:
    assert relayable(orjson.loads(chunk(choice(content="a"))))
    assert not relayable(orjson.loads(chunk(choice(finish="stop"))))
    assert not relayable(orjson.loads(USAGE))
    assert not relayable({"error": {}}) and not relayable(None)


def test_the_format_object_builds_the_same_bodies() -> None:
    fmt = CHAT_COMPLETIONS
    assert fmt.answer_text(COMPLETION) == answer_text(COMPLETION) == "Text."
    assert fmt.with_disclaimer(COMPLETION, " !") == with_appended(COMPLETION, " !")
    assert fmt.refusal(COMPLETION, "no")["choices"][0]["finish_reason"] == "content_filter"
    assert fmt.refusal(COMPLETION, "no") == block_completion(COMPLETION, "no")
    assert fmt.is_answer(COMPLETION) and not fmt.is_answer({"choices": []})
    assert fmt.stream_body(COMPLETION, include_usage=False).endswith(b"data: [DONE]\n\n")
