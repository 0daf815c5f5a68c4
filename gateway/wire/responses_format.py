"""The Responses API response format (``/v1/responses``), with no I/O.

:data:`RESPONSES` is the :class:`~gateway.wire.base.ResponseFormat` the modes and the
actions use for a ``/v1/responses`` request; it bundles the pieces of
:mod:`gateway.wire.responses` (the layers' view of requests and answers),
:mod:`gateway.wire.responses_actions` (disclaimer, refusal, regenerate),
:mod:`gateway.wire.responses_stream` (folding a stream), :mod:`gateway.wire.responses_events`
(building events), :mod:`gateway.wire.responses_hold` (the passthrough hold-back) and
:mod:`gateway.wire.responses_watch` (a stream relayed unparsed: its telemetry summary
and end, bounded).

- **readable answer** — a ``response`` object (:func:`gateway.wire.responses.read_response`
  reads it) whose ``status`` is ``completed`` or ``incomplete`` (as chat verifies
  ``finish_reason: length``). ``failed``, ``cancelled`` and background answers
  (``queued``, ``in_progress``) are not verified.
- **readable stream** — typed events folded by
  :class:`~gateway.wire.responses_stream.ResponsesAccumulator`, none unreadable, and
  the terminal response's text the text that streamed
  (:meth:`~gateway.wire.responses_stream.ResponsesAccumulator.consistent`). An
  ``error`` event or ``response.failed`` is the upstream failing the stream (relayed
  unverified, as chat's in-band error).
- **the verdict in a stream** — ``disclaimer`` / a passthrough ``block``: text
  appended to the answer's last text part, with a ``verity`` object on the added
  delta and the terminal response; ``style: error`` and fail-closed: ``error`` then
  ``response.failed`` (the SDK raises ``APIError``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.wire import chat
from gateway.wire.responses import as_chat_completion, read_request, read_response
from gateway.wire.responses_actions import (
    blocked_response,
    regenerate_body,
    with_disclaimer,
    with_text,
)
from gateway.wire.responses_events import error_events, synthesize
from gateway.wire.responses_hold import TailHold
from gateway.wire.responses_stream import ResponsesAccumulator, encode_event
from gateway.wire.responses_watch import ResponsesEndWatch, ResponsesSummary
from gateway.wire.sse import SSEParser

__all__ = ["RESPONSES", "ResponsesFold", "ResponsesFormat", "ResponsesHold", "unseen_note"]

_UNCAPPED = 1 << 62
"""The accumulator's own cap: the callers count what they hold (``max_response_bytes``)."""
_PENDING = ("queued", "in_progress")


def unseen_note(payload: Mapping[str, Any]) -> str | None:
    """The audit note for context the request points at but does not carry."""
    unseen = read_request(payload).unseen
    if not unseen:
        return None
    return ("verified against the context this request carries; not seen (server-side "
            "state): " + ", ".join(unseen))


class ResponsesFold:
    """A Responses stream folded into its final response (a
    :class:`~gateway.wire.base.StreamFold`)."""

    __slots__ = ("_checked", "acc", "parser")

    def __init__(self, acc: ResponsesAccumulator | None = None) -> None:
        self.acc = acc if acc is not None else ResponsesAccumulator(_UNCAPPED)
        self.parser = SSEParser()
        self._checked: tuple[int, bool] | None = None

    @property
    def id(self) -> str | None:
        return self.acc.id

    @property
    def error(self) -> Any:
        if self.acc.error is not None:
            return self.acc.error
        return self.acc.final if self.acc.terminal == "response.failed" else None

    def _inconsistent(self) -> bool:
        """The terminal response says other than the deltas (checked once per size)."""
        acc = self.acc
        if acc.terminal is None or acc.over_cap:
            return False
        if self._checked is None or self._checked[0] != acc.size:
            self._checked = (acc.size, not acc.consistent())
        return self._checked[1]

    @property
    def unreadable(self) -> int:
        return self.acc.unreadable + int(self._inconsistent())

    @property
    def truncated(self) -> bool:
        return self.acc.truncated

    def feed_bytes(self, chunk: bytes) -> None:
        for data in self.parser.feed(chunk):
            self.acc.feed_data(data)

    def completion(self) -> dict[str, Any]:
        return self.acc.response()

    def drop_content(self) -> None:
        self.acc.drop_content()

    def problem(self) -> str:
        """Why the folded stream is not a readable Responses stream."""
        acc = self.acc
        if acc.unreadable:
            return (f"{acc.unreadable} event(s) not valid JSON or UTF-8, or not Responses "
                    "events of the expected shape")
        if self._inconsistent():
            return "the terminal response's text is not the text that streamed"
        view = read_response(self.completion())
        if view.problem is not None:
            return f"the final response is not readable ({view.problem})"
        return f"the response is {view.status}"


class ResponsesHold:
    """The passthrough hold-back of a Responses stream (a
    :class:`~gateway.wire.base.StreamHold`) over
    :class:`~gateway.wire.responses_hold.TailHold`."""

    __slots__ = ("acc", "tail")

    def __init__(self) -> None:
        self.tail = TailHold(ResponsesAccumulator(_UNCAPPED))
        self.acc = ResponsesFold(self.tail.acc)

    def feed(self, data: bytes) -> bytes:
        return self.tail.feed(data)

    def end(self, *, action: str, text: str | None = None,
            verity: Mapping[str, Any] | None = None,
            error_body: Mapping[str, Any] | None = None) -> bytes:
        if error_body is not None:
            error = error_body.get("error")
            return self.tail.fail(error if isinstance(error, Mapping) else {})
        if action == "block" or (action == "disclaimer" and text):
            return self.tail.append(text or "", verity)
        return self.tail.release()


class ResponsesFormat:
    """The Responses API :class:`~gateway.wire.base.ResponseFormat`."""

    name = "responses"
    path = "/responses"
    noun = "response"
    chat_shaped = False

    # ---- the request -------------------------------------------------------------------

    def request_messages(self, payload: Mapping[str, Any]) -> list[Any]:
        messages: list[Any] = read_request(payload).messages
        return messages

    def unseen_context(self, payload: Mapping[str, Any]) -> str | None:
        return unseen_note(payload)

    def structured(self, payload: Mapping[str, Any]) -> bool:
        text = payload.get("text")
        fmt = text.get("format") if isinstance(text, Mapping) else None
        return isinstance(fmt, Mapping) and fmt.get("type") in ("json_schema", "json_object")

    def regenerate_body(self, payload: Mapping[str, Any], messages: list[Any], failed: str,
                        feedback: str, model: str | None) -> dict[str, Any]:
        return regenerate_body(payload, failed, feedback, model)

    # ---- answers -----------------------------------------------------------------------

    def is_answer(self, body: Any) -> bool:
        view = read_response(body)
        return view.problem is None and view.status not in ("failed", "cancelled", *_PENDING)

    def body_problem(self, data: bytes, parsed: Any) -> str:
        if parsed is None:
            return chat.body_problem(data, None)
        view = read_response(parsed)
        if view.problem is not None:
            return view.problem
        if view.status in _PENDING:
            return f"a background response, still {view.status}"
        return f"the response is {view.status}"

    def job_answer(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return as_chat_completion(body)

    def answer_text(self, body: Mapping[str, Any]) -> str:
        return read_response(body).text

    def calls_only(self, body: Mapping[str, Any]) -> bool:
        view = read_response(body)
        return bool(view.calls) and not view.text and not view.refusal

    def with_disclaimer(self, body: Mapping[str, Any], text: str) -> dict[str, Any]:
        return with_disclaimer(body, text)

    def refusal(self, body: Mapping[str, Any], message: str) -> dict[str, Any]:
        return blocked_response(body, message)

    def with_text(self, body: Mapping[str, Any], text: str) -> dict[str, Any]:
        return with_text(body, text)

    # ---- streams -----------------------------------------------------------------------

    def stream_body(self, body: Mapping[str, Any], *, include_usage: bool) -> bytes:
        return b"".join(encode_event(event) for event in synthesize(body))

    def fold(self) -> ResponsesFold:
        return ResponsesFold()

    def stream_problem(self, acc: Any) -> str:
        return acc.problem() if isinstance(acc, ResponsesFold) else "not a Responses stream"

    def hold(self) -> ResponsesHold:
        return ResponsesHold()

    def summary(self) -> ResponsesSummary:
        return ResponsesSummary()

    def end_watch(self) -> ResponsesEndWatch:
        return ResponsesEndWatch()

    def error_event(self, body: Mapping[str, Any], acc: Any = None) -> bytes:
        error = body.get("error")
        last = acc.acc.last_sequence if isinstance(acc, ResponsesFold) else None
        events = error_events(error if isinstance(error, Mapping) else {},
                              sequence_number=0 if last is None else last + 1)
        return b"".join(encode_event(event) for event in events)


RESPONSES = ResponsesFormat()
"""The format of ``/v1/responses``."""
