"""StreamSummary (what telemetry reads from a stream) agrees with StreamAccumulator
on id, model, finish reasons and usage, however the bytes are split."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from gateway.wire.sse import StreamAccumulator, StreamSummary


def chunk(content: str | None = None, finish: str | None = None, index: int = 0,
          **extra: Any) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-x-2024", "choices": [{"index": index, "delta": delta,
                                                "finish_reason": finish}], **extra}


TRICKY = ['"usage": {"prompt_tokens": 1}', '"finish_reason":"stop"', "data: x\n\n", "\\"]
EVENTS = ([chunk("", usage=None)] + [chunk(t) for t in TRICKY]
          + [chunk(None, "length", index=1), chunk(None, "stop"),
             {"id": "chatcmpl-9", "model": "gpt-x-2024", "choices": [],
              "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}}])


def encode(events: list[dict[str, Any]], *, spaced: bool = False, crlf: bool = False) -> bytes:
    nl = b"\r\n" if crlf else b"\n"
    out = b""
    for e in events:
        data = json.dumps(e).encode() if spaced else orjson.dumps(e)
        out += b"data: " + data + nl + nl
    return out + b"data: [DONE]" + nl + nl


def expected(raw: bytes) -> dict[str, Any]:
    acc = StreamAccumulator()
    acc.feed_bytes(raw)
    c = acc.completion()
    out = {"id": c["id"], "model": c["model"],
           "choices": [{"index": ch["index"], "finish_reason": ch["finish_reason"]}
                       for ch in c["choices"] if ch["finish_reason"]]}
    if "usage" in c:
        out["usage"] = c["usage"]
    return out


@pytest.mark.parametrize("spaced", [False, True], ids=["compact", "spaced"])
@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("step", [1, 3, 17, 100, 10**6])
def test_summary_matches_accumulator(spaced: bool, crlf: bool, step: int) -> None:
    raw = encode(EVENTS, spaced=spaced, crlf=crlf)
    summary = StreamSummary()
    for i in range(0, len(raw), step):
        summary.feed_bytes(raw[i:i + step])
    got = summary.completion()
    assert got == expected(raw)
    assert got["id"] == "chatcmpl-9" and got["model"] == "gpt-x-2024"
    assert summary.finish_reasons() == ["stop", "length"]
    assert got["usage"]["prompt_tokens"] == 7


def test_content_that_looks_like_a_field_changes_nothing() -> None:
    raw = encode([chunk("a"), *(chunk(t) for t in TRICKY)])
    summary = StreamSummary()
    summary.feed_bytes(raw)
    assert summary.completion() == {"id": "chatcmpl-9", "model": "gpt-x-2024", "choices": []}


def test_error_event_and_garbage_are_ignored() -> None:
    summary = StreamSummary()
    summary.feed_bytes(b"data: not json\n\n: comment\n\n")
    summary.feed_bytes(b'data: {"error": {"message": "overloaded"}}\n\n')
    summary.feed_bytes(encode([chunk("hi"), chunk(None, "stop")]))
    assert summary.completion() == {"id": "chatcmpl-9", "model": "gpt-x-2024",
                                    "choices": [{"index": 0, "finish_reason": "stop"}]}


def test_chunks_of_any_shape_never_raise() -> None:
    """The no-policy relay feeds every upstream stream to StreamSummary: an odd chunk
    must cost a missing attribute, never the relay."""
    import orjson

    odd = [{"choices": 5}, {"choices": [{"index": [0], "finish_reason": "stop"}]},
           {"choices": [{"index": "a", "finish_reason": "stop"}]},
           {"choices": [{"index": 1, "finish_reason": 7}]}, {"id": {"x": 1}, "model": [1]},
           {"choices": "abc"}, {"usage": "many"},
           {"id": "c1", "model": "m", "choices": [{"index": 0, "finish_reason": "stop"}]}]
    s = StreamSummary()
    s.feed_bytes(b"".join(b"data: " + orjson.dumps(o) + b"\n\n" for o in odd)
                 + b"data: [DONE]\n\n")
    assert (s.id, s.model, s.finish_reasons()) == ("c1", "m", ["stop"])
    s.completion()
