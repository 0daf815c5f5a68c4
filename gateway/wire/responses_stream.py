"""Responses API streams (``stream: true`` on ``/v1/responses``): typed SSE events. Pure.

The stream, as OpenAI sends it (every event has a ``type`` and a ``sequence_number``
counting from 0; there is no ``[DONE]``)::

    response.created            {response: in_progress, output: []}
    response.in_progress
    response.output_item.added  {output_index, item}          per output item, then
      response.content_part.added {item_id, output_index, content_index, part}
      response.output_text.delta  {…, delta, logprobs}        (refusal parts:
      response.output_text.done   {…, text, logprobs}          response.refusal.delta/done)
      response.content_part.done  {…, part}
    response.output_item.done   {output_index, item}
    response.completed | response.incomplete | response.failed   {response: final}

An ``error`` event may come instead of (or before) ``response.failed``; OpenAI
sends ``{"type": "error", "sequence_number", "error": {type, code, message, param}}``
and the SDK raises ``APIError`` on any event with an ``error`` object.

- :class:`ResponsesAccumulator` folds events into the final response (byte-capped):
  what streamed (``output_text`` deltas), the terminal event, whether the stream was
  cut (:attr:`~ResponsesAccumulator.truncated`: no terminal event, no error event),
  and whether the terminal response says what the deltas said
  (:meth:`~ResponsesAccumulator.consistent`: the SDK's ``get_final_response()`` reads
  the terminal response, a streaming display reads the deltas).
- :func:`encode_event` — ``event: <type>`` and ``data: <json>`` lines.
- Building events (whole streams, error endings, a disclaimer added to a held tail):
  :mod:`gateway.wire.responses_events`; the passthrough hold-back:
  :mod:`gateway.wire.responses_hold`.

**The verdict in a stream** travels as an extra ``verity`` object in the terminal
event's ``response`` (and on an injected delta event), never as a new event type: an
unknown event type is one more case for every client's event switch (typed clients
with closed enums reject it), while an unknown field is kept by the SDK's models —
``stream.get_final_response().model_extra["verity"]``, and on the raw events of
``responses.create(stream=True)``. Headers carry it whenever they can (nothing sent
before the verdict: non-stream, buffered streams).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

import orjson

from gateway.wire.responses import read_response

__all__ = ["TERMINAL", "ResponsesAccumulator", "encode_event"]

TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_LIFECYCLE = frozenset({"response.created", "response.queued", "response.in_progress"})
_TEXT = {"response.output_text.delta": ("output_text", "text"),
         "response.refusal.delta": ("refusal", "refusal")}
_DONE = {"response.output_text.done": ("output_text", "text"),
         "response.refusal.done": ("refusal", "refusal")}


def encode_event(event: Mapping[str, Any]) -> bytes:
    """One SSE event: ``event: <type>`` (when it has one) and ``data: <json>``."""
    data = b"data: " + orjson.dumps(event) + b"\n\n"
    kind = event.get("type")
    return b"event: " + kind.encode() + b"\n" + data if isinstance(kind, str) else data


def _is_index(value: Any) -> TypeGuard[int]:
    return type(value) is int and value >= 0


class ResponsesAccumulator:
    """Fold a Responses stream's events into its final response.

    ``max_bytes`` bounds what is held: past it the output gathered so far is dropped
    (:attr:`over_cap`) and only the stream's end is still tracked (terminal event,
    error, id). Never raises on an event's shape: an event that is not JSON, not an
    object, has no string ``type``, or has a field of the wrong type
    (``output_index`` not an index, ``delta`` not a string, an event for an item or
    part never added, …) is counted in :attr:`unreadable`."""

    def __init__(self, max_bytes: int = 8 << 20) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.over_cap = False
        self.id: str | None = None
        self.model: str | None = None
        self.created: dict[str, Any] | None = None
        """The response of the first lifecycle event (``response.created``)."""
        self.terminal: str | None = None
        """The terminal event's type, once one arrived."""
        self.final: dict[str, Any] | None = None
        """The terminal event's response (None past the cap)."""
        self.error: dict[str, Any] | None = None
        """An ``error`` event, if one arrived."""
        self.unreadable = 0
        self.mismatch = False
        """A ``*.done`` event's text differs from the deltas that preceded it."""
        self.last_sequence: int | None = None
        self.next_output_index = 0
        self._items: dict[int, dict[str, Any]] = {}
        self._streamed: dict[tuple[int, int], list[str]] = {}

    @property
    def truncated(self) -> bool:
        """The stream ended without its end: no terminal event and no error event."""
        return self.terminal is None and self.error is None

    def drop_content(self) -> None:
        """Forget the output gathered so far, as past the cap: only the stream's end
        (terminal event, error, id) is still tracked."""
        self.over_cap = True
        self.final = None
        self._items.clear()
        self._streamed.clear()

    def feed_data(self, data: bytes) -> dict[str, Any] | None:
        """Fold one event's ``data`` in (as ``gateway.wire.sse.SSEParser`` yields it); the
        parsed event when it is a JSON object with a string ``type``."""
        self.size += len(data)
        if self.size > self.max_bytes and not self.over_cap:
            self.over_cap = True
            self._items.clear()
            self._streamed.clear()
        if data.strip() == b"[DONE]":  # not sent by OpenAI; some compatible servers do
            return None
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            self.unreadable += 1
            return None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            self.unreadable += 1
            return None
        if not self.feed_event(event):
            self.unreadable += 1
        return event

    def feed_event(self, event: dict[str, Any]) -> bool:
        """Fold one parsed event in; False when its shape is wrong (then nothing of it
        is kept). Event types that do not change the output (tool progress, reasoning
        summaries, annotations, unknown future types) are accepted and ignored."""
        kind = event.get("type")
        seq = event.get("sequence_number")
        if type(seq) is int:
            self.last_sequence = seq
        if kind in _LIFECYCLE or kind in TERMINAL:
            return self._lifecycle(str(kind), event.get("response"))
        if kind == "error":
            self.error = event
            return True
        if kind in ("response.output_item.added", "response.output_item.done"):
            return self._item(event, kind == "response.output_item.done")
        if kind in ("response.content_part.added", "response.content_part.done"):
            return self._part(event)
        if kind in _TEXT or kind in _DONE:
            return self._text(event, str(kind))
        if kind in ("response.function_call_arguments.delta",
                    "response.function_call_arguments.done"):
            return self._arguments(event, kind.endswith(".done"))
        return True

    def _lifecycle(self, kind: str, response: Any) -> bool:
        if not isinstance(response, dict):
            return False
        if self.id is None and isinstance(value := response.get("id"), str):
            self.id = value
        if self.model is None and isinstance(value := response.get("model"), str):
            self.model = value
        if kind in TERMINAL:
            self.terminal = kind
            self.final = None if self.over_cap else response
        elif self.created is None and not self.over_cap:
            self.created = response
        return True

    def _item(self, event: Mapping[str, Any], done: bool) -> bool:
        index, item = event.get("output_index"), event.get("item")
        if not _is_index(index) or not isinstance(item, dict):
            return False
        self.next_output_index = max(self.next_output_index, index + 1)
        if self.over_cap:
            return True
        item = dict(item)
        if item.get("type") == "message":
            if not isinstance(item.get("content"), list):
                return False
            item["content"] = [dict(p) if isinstance(p, dict) else p for p in item["content"]]
            if done:
                for ci, part in enumerate(item["content"]):
                    self._check(index, ci, part, "text")
        self._items[index] = item
        return True

    def _slot(self, event: Mapping[str, Any]) -> tuple[int, int, list[Any]] | None:
        """``(output_index, content_index, content)`` of a part event's message item."""
        oi, ci = event.get("output_index"), event.get("content_index")
        if not _is_index(oi) or not _is_index(ci):
            return None
        item = self._items.get(oi)
        if item is None or item.get("type") != "message":
            return None
        content = item["content"]
        return (oi, ci, content) if isinstance(content, list) else None

    def _part(self, event: Mapping[str, Any]) -> bool:
        part = event.get("part")
        if not isinstance(part, dict):
            return False
        if self.over_cap:
            return True
        slot = self._slot(event)
        if slot is None:
            return False
        oi, ci, content = slot
        if ci > len(content):
            return False
        part = dict(part)
        if event.get("type") == "response.content_part.done":
            self._check(oi, ci, part, "text")
        content[ci:ci + 1] = [part]
        return True

    def _text(self, event: Mapping[str, Any], kind: str) -> bool:
        part_type, key = _TEXT.get(kind) or _DONE[kind]
        value = event.get("delta" if kind in _TEXT else key)
        if not isinstance(value, str):
            return False
        if self.over_cap:
            return True
        slot = self._slot(event)
        if slot is None or slot[1] >= len(slot[2]):
            return False
        oi, ci, content = slot
        part = content[ci]
        if not isinstance(part, dict) or part.get("type") != part_type:
            return False
        if kind in _TEXT:
            part[key] = str(part.get(key) or "") + value
            self._streamed.setdefault((oi, ci), []).append(value)
        else:
            self._check(oi, ci, {"type": part_type, key: value}, key)
            part[key] = value
        return True

    def _check(self, oi: int, ci: int, part: Any, key: str) -> None:
        """A done event's text against the deltas streamed for that part (a part that
        streamed none — a server that sends only done events — streamed its text)."""
        if isinstance(part, dict) and part.get("type") == "output_text" \
                and isinstance(text := part.get(key), str):
            streamed = self._streamed.setdefault((oi, ci), [text] if text else [])
            if text != "".join(streamed):
                self.mismatch = True

    def _arguments(self, event: Mapping[str, Any], done: bool) -> bool:
        oi, value = event.get("output_index"), event.get("arguments" if done else "delta")
        if not _is_index(oi) or not isinstance(value, str):
            return False
        if self.over_cap:
            return True
        item = self._items.get(oi)
        if item is None:
            return False
        item["arguments"] = value if done else str(item.get("arguments") or "") + value
        return True

    def streamed_text(self) -> str:
        """The ``output_text`` deltas in output order: what a streaming display showed."""
        return "".join("".join(self._streamed[key]) for key in sorted(self._streamed))

    def response(self) -> dict[str, Any]:
        """The final response: the terminal event's (what the SDK's
        ``get_final_response()`` returns) when it has an ``output`` array; else one
        rebuilt from the events (the SDK too rebuilds an omitted ``output``)."""
        if self.final is not None and isinstance(self.final.get("output"), list):
            return self.final
        out = dict(self.final or self.created or {"object": "response"})
        out["output"] = [self._items[i] for i in sorted(self._items)]
        if self.final is None:
            out["status"] = "failed" if self.error is not None else "in_progress"
        return out

    def consistent(self) -> bool:
        """The final response's answer text is the text that streamed, and no done event
        contradicted its deltas. False past the cap (nothing to compare)."""
        if self.over_cap or self.mismatch:
            return False
        return read_response(self.response()).text == self.streamed_text()
