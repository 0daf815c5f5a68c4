"""Check Anthropic shapes with the official ``anthropic`` SDK, so a mismatch fails a test.

- :func:`message` — validate a Message body with ``anthropic.types.Message`` and refuse
  fields the SDK does not know (the SDK's models allow extras silently).
- :func:`events` — split SSE bytes into pieces, decode them with the SDK's own
  ``SSEDecoder``, check each event's name against its ``type`` and validate it with
  ``RawMessageStreamEvent`` (no unknown fields but ``allow_extra``).
  The sequence must follow Anthropic's documented order (:func:`check_order`).
- :func:`final_message` — check the bytes as :func:`events` does, then run them through
  ``anthropic.Stream`` and the SDK's ``MessageStream`` (what ``client.messages.stream()``
  does) and return the message it accumulates; an ``error`` event raises the SDK's
  ``APIStatusError`` from there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import orjson
from anthropic._streaming import SSEDecoder
from anthropic._types import NOT_GIVEN
from anthropic.lib.streaming import MessageStream
from anthropic.types import Message, RawMessageStreamEvent
from pydantic import BaseModel, TypeAdapter

__all__ = ["check_order", "events", "final_message", "message", "no_extras", "pieces"]

_EVENT = TypeAdapter(RawMessageStreamEvent)


def no_extras(model: Any, where: str = "", allow: frozenset[str] = frozenset()) -> None:
    """Fail on any field an SDK model did not declare, at any depth."""
    if isinstance(model, BaseModel):
        extra = set(model.model_extra or {}) - allow
        assert not extra, f"{where or type(model).__name__}: fields unknown to the SDK: {extra}"
        for name in type(model).model_fields:
            no_extras(getattr(model, name), f"{where}.{name}", allow)
    elif isinstance(model, (list, tuple)):
        for i, item in enumerate(model):
            no_extras(item, f"{where}[{i}]", allow)


def message(body: dict[str, Any] | bytes) -> Message:
    data = orjson.loads(body) if isinstance(body, bytes) else body
    parsed = Message.model_validate(data)
    no_extras(parsed, "message")
    return parsed


def pieces(data: bytes, size: int) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i:i + size]


def events(data: bytes, *, size: int = 7, allow_extra: frozenset[str] = frozenset()
           ) -> list[Any]:
    """Every event but pings, validated; ``error`` events as their parsed bodies."""
    out: list[Any] = []
    for sse in SSEDecoder().iter_bytes(pieces(data, size)):
        assert sse.event is not None, "an event without a name: the SDK would skip it"
        body = sse.json()
        assert body["type"] == sse.event, f"event {sse.event!r} carries type {body['type']!r}"
        if sse.event == "ping":
            continue
        if sse.event == "error":
            out.append(body)
            continue
        parsed = _EVENT.validate_python(body)
        no_extras(parsed, sse.event, allow_extra)
        out.append(parsed)
    check_order([e.type if not isinstance(e, dict) else "error" for e in out],
                [getattr(e, "index", None) for e in out])
    return out


def check_order(kinds: list[str], indexes: list[int | None]) -> None:
    """``message_start``, then blocks (start, deltas, stop; indexes 0, 1, 2, ... one open
    at a time), then ``message_delta`` (one or more) and ``message_stop``; an ``error``
    may end it anywhere."""
    state, open_block, next_block = "start", None, 0
    for kind, index in zip(kinds, indexes, strict=True):
        assert state != "stopped", f"{kind} after the end of the stream"
        if kind == "error":
            state = "stopped"
        elif kind == "message_start":
            assert state == "start", "message_start is not first"
            state = "blocks"
        elif kind == "content_block_start":
            assert state == "blocks" and open_block is None, "a block starts while one is open"
            assert index == next_block, f"block {index} starts, {next_block} expected"
            open_block, next_block = index, next_block + 1
        elif kind == "content_block_delta":
            assert open_block is not None and index == open_block, "a delta outside its block"
        elif kind == "content_block_stop":
            assert open_block is not None and index == open_block, "stop of a block not open"
            open_block = None
        elif kind == "message_delta":
            assert state in ("blocks", "delta") and open_block is None, \
                "message_delta before every block stopped"
            state = "delta"
        elif kind == "message_stop":
            assert state == "delta", "message_stop without message_delta"
            state = "stopped"
    assert state == "stopped", "the stream did not end (message_stop or error)"


def final_message(data: bytes, *, size: int = 7,
                  allow_extra: frozenset[str] = frozenset()) -> Message:
    events(data, size=size, allow_extra=allow_extra)  # each event valid, in order
    client = anthropic.Anthropic(api_key="test", base_url="http://127.0.0.1:9")
    try:
        request = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")
        response = httpx2.Response(200, content=pieces(data, size), request=request,
                                   headers={"content-type": "text/event-stream"})
        raw = anthropic.Stream(cast_to=RawMessageStreamEvent, response=response, client=client)
        return MessageStream(raw, NOT_GIVEN).get_final_message()
    finally:
        client.close()
