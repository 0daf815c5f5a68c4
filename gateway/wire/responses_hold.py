"""Passthrough hold-back for Responses API streams: relay events as they arrive, keep
back the tail a verdict may change. Pure (the caller does the I/O).

What is held, from where: the ``response.output_text.done`` of a text part — it may be
the answer's last, where a disclaimer goes, and once it is sent that part is closed —
and everything after it, until a ``response.content_part.added`` of another
``output_text`` part shows more text is coming: the held events are then sent
unchanged and holding starts again at that part's ``done``. A terminal event
(``response.completed`` / ``incomplete`` / ``failed``), an ``error`` event, an
unreadable event (see :class:`~gateway.wire.responses_stream.ResponsesAccumulator`) or
``[DONE]`` is always held, with everything after it. So the text deltas stream as they
come; what waits for the verdict is the last part's closing events, the items after
it (tool calls' arguments included) and the stream's end.

Then one of:

- :meth:`TailHold.release` — the tail as it came (``pass`` / ``flag``; fail-open);
- :meth:`TailHold.append` — text appended to the answer (``disclaimer``; a passthrough
  ``block`` appends its message, as the chat path does: the text already sent cannot
  be taken back), with ``verity`` on the added delta and the terminal response
  (:func:`gateway.wire.responses_events.append_text`);
- :meth:`TailHold.fail` — the tail dropped, the stream ended with ``error`` and
  ``response.failed`` (``block`` with ``style: error``; fail-closed): the SDK raises
  ``APIError`` while iterating.

Held bytes are bounded by what the upstream may send (the caller's response cap); the
accumulator keeps its own cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.wire.responses_events import append_text, error_events
from gateway.wire.responses_stream import TERMINAL, ResponsesAccumulator, encode_event

__all__ = ["TailHold"]


def _frame(data: bytes, event: Mapping[str, Any] | None) -> bytes:
    """An event as received (its data bytes unchanged), with its ``event:`` line."""
    if b"\n" in data:
        data = data.replace(b"\n", b"\ndata: ")
    kind = event.get("type") if event is not None else None
    head = b"event: " + kind.encode() + b"\n" if isinstance(kind, str) else b""
    return head + b"data: " + data + b"\n\n"


def _more_text(event: Mapping[str, Any]) -> bool:
    part = event.get("part")
    return event.get("type") == "response.content_part.added" and isinstance(part, Mapping) \
        and part.get("type") == "output_text"


class TailHold:
    """Feed each event's ``data`` (as ``gateway.wire.sse.SSEParser`` yields it) to
    :meth:`feed` and send what it returns; at the end send what one of
    :meth:`release`, :meth:`append` or :meth:`fail` returns. :attr:`acc` has the
    answer (its ``unreadable`` count, ``truncated``, ``consistent()``)."""

    def __init__(self, acc: ResponsesAccumulator | None = None) -> None:
        self.acc = acc if acc is not None else ResponsesAccumulator()
        self.sent_sequence: int | None = None
        """The last ``sequence_number`` sent to the client."""
        self._held: list[tuple[bytes, dict[str, Any] | None]] = []
        self._locked = False
        """The tail holds an event after which nothing is released early."""

    @property
    def held(self) -> int:
        """Events held back."""
        return len(self._held)

    def feed(self, data: bytes) -> bytes:
        """Fold one event in; the bytes to send now (often ``b""`` while holding)."""
        before = self.acc.unreadable
        event = self.acc.feed_data(data)
        readable = event is not None and self.acc.unreadable == before
        kind = event.get("type") if event is not None and readable else None
        if self._held and not self._locked and readable and event is not None \
                and _more_text(event):
            return self._flush() + self._send(data, event)
        ends = not readable or kind in TERMINAL or kind == "error"
        if self._held or ends or kind == "response.output_text.done":
            self._held.append((data, event if readable else None))
            self._locked = self._locked or ends
            return b""
        return self._send(data, event)

    def _send(self, data: bytes, event: Mapping[str, Any] | None) -> bytes:
        if event is not None and type(seq := event.get("sequence_number")) is int:
            self.sent_sequence = seq
        return _frame(data, event)

    def _flush(self) -> bytes:
        out = b"".join(self._send(data, event) for data, event in self._held)
        self._held.clear()
        return out

    def release(self) -> bytes:
        """The held tail unchanged."""
        self._locked = False
        return self._flush()

    def _next_sequence(self) -> int:
        return 0 if self.sent_sequence is None else self.sent_sequence + 1

    def append(self, text: str, verity: Mapping[str, Any] | None = None) -> bytes:
        """The held tail with ``text`` appended to the answer's last text part (a new
        message item when the answer has none). Events held unreadable go after, as
        they came (an unreadable stream is not acted on: it is not verified)."""
        events = [event for _, event in self._held if event is not None]
        raw = [data for data, event in self._held if event is None]
        self._held.clear()
        changed = append_text(events, text, next_output_index=self.acc.next_output_index,
                              next_sequence=self._next_sequence(), verity=verity)
        out = b"".join(encode_event(event) for event in changed)
        if changed and type(seq := changed[-1].get("sequence_number")) is int:
            self.sent_sequence = seq
        return out + b"".join(_frame(data, None) for data in raw)

    def fail(self, error: Mapping[str, Any]) -> bytes:
        """Drop the held tail; end with ``error`` (an OpenAI error body's ``error``
        object) and, when the stream's response is known, ``response.failed``."""
        self._held.clear()
        events = error_events(error, sequence_number=self._next_sequence(),
                              response=self.acc.created)
        self.sent_sequence = events[-1]["sequence_number"]
        return b"".join(encode_event(event) for event in events)
