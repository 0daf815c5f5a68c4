"""Anthropic Messages streams from OpenAI chat completion streams, and built ones: pure.

The event sequence (Anthropic's streaming docs): ``message_start`` (a Message with
empty ``content``), then per content block ``content_block_start`` /
``content_block_delta``\\* / ``content_block_stop``, then ``message_delta`` (stop
reason, cumulative usage) and ``message_stop``; ``ping`` may come anywhere; an
``error`` event ends a stream that failed after its response began. Every event is
``event: <type>`` plus ``data: <json>`` (the SDK dispatches on the event name).

- :class:`ChatStreamToMessages` — ``chat.completion.chunk`` SSE bytes in (split
  anywhere), Anthropic SSE bytes out, as they arrive. Text deltas (and OpenAI
  ``refusal`` deltas) extend an open text block; each tool call is a ``tool_use`` block
  whose argument fragments are ``input_json_delta`` events; the finish reason and the
  usage chunk (the request asks for it: ``stream_options.include_usage``) make the
  ``message_delta``; ``[DONE]`` ends the stream. An upstream error chunk becomes an
  ``error`` event; :meth:`~ChatStreamToMessages.finish` ends a stream that stopped
  after its finish reason but without ``[DONE]``, and turns one that just stopped into
  an ``error`` event (:class:`~gateway.errors.UpstreamTruncated`).
- :func:`message_events` — a whole stream for a Message (``streaming: buffer``, a
  blocked answer in its :func:`~gateway.wire.anthropic_response.block_message` shape).
- :func:`text_block_events`, :func:`text_delta_event`, :func:`message_end_events`,
  :func:`refusal_events`, :data:`PING` — the pieces a hold-back writes after the
  verdict: a disclaimer is a text delta on the last text block while it is still open
  (its ``content_block_stop`` held back) or a text block of its own, then the held
  end; a ``block`` is :func:`refusal_events` (the block message in a text block of its
  own and ``stop_reason: "refusal"``); a ``block`` with ``style: error`` is an
  :func:`~gateway.wire.anthropic_errors.error_event`.

Verification results may ride along as a ``verity`` field of ``message_delta`` (the SDK
keeps unknown fields: ``event.model_extra["verity"]``), as chunks carry it on the OpenAI
side; :class:`ChatStreamToMessages` moves a chunk's ``verity`` there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from gateway.errors import GatewayError, UpstreamError, UpstreamStreamError, UpstreamTruncated
from gateway.wire.anthropic_errors import error_body, error_event, error_from_gateway, error_type
from gateway.wire.anthropic_response import message_id, stop_reason, usage_to_anthropic
from gateway.wire.sse import SSEParser

__all__ = [
    "PING", "ChatStreamToMessages", "encode_event", "message_end_events", "message_events",
    "message_start_event", "refusal_events", "text_block_events", "text_delta_event",
]


def encode_event(obj: Mapping[str, Any]) -> bytes:
    """One SSE event named after ``obj["type"]``."""
    return b"event: " + str(obj["type"]).encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


PING = encode_event({"type": "ping"})


def message_start_event(id: str, model: str, usage: Mapping[str, Any] | None = None) -> bytes:
    """``usage``: what is known at the start (an OpenAI stream tells nothing until its
    end; the ``message_delta`` then carries every count, which the SDK takes over)."""
    u = {"input_tokens": 0, "output_tokens": 0, **(usage or {})}
    return encode_event({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": u}})


def _block_start(index: int, block: Mapping[str, Any]) -> bytes:
    return encode_event({"type": "content_block_start", "index": index,
                         "content_block": block})


def _block_stop(index: int) -> bytes:
    return encode_event({"type": "content_block_stop", "index": index})


def text_delta_event(index: int, text: str) -> bytes:
    return encode_event({"type": "content_block_delta", "index": index,
                         "delta": {"type": "text_delta", "text": text}})


def _json_delta(index: int, partial: str) -> bytes:
    return encode_event({"type": "content_block_delta", "index": index,
                         "delta": {"type": "input_json_delta", "partial_json": partial}})


def text_block_events(index: int, text: str) -> bytes:
    """A whole text block: start, one delta (none for ""), stop."""
    return b"".join((_block_start(index, {"type": "text", "text": ""}),
                     text_delta_event(index, text) if text else b"", _block_stop(index)))


def message_end_events(stop: str, usage: Mapping[str, Any], *,
                       stop_sequence: str | None = None,
                       verity: Mapping[str, Any] | None = None) -> bytes:
    """``message_delta`` (stop reason, cumulative ``usage`` in Anthropic's shape) and
    ``message_stop``."""
    delta: dict[str, Any] = {"type": "message_delta",
                             "delta": {"stop_reason": stop, "stop_sequence": stop_sequence},
                             "usage": {"output_tokens": 0, **usage}}
    if verity is not None:
        delta["verity"] = dict(verity)
    return encode_event(delta) + encode_event({"type": "message_stop"})


def refusal_events(index: int, text: str, usage: Mapping[str, Any], *,
                   verity: Mapping[str, Any] | None = None) -> bytes:
    """A blocked stream's end: ``text`` in a text block of its own at ``index`` (the next
    free one), then ``stop_reason: "refusal"``."""
    return text_block_events(index, text) + message_end_events("refusal", usage,
                                                               verity=verity)


def message_events(message: Mapping[str, Any], *,
                   verity: Mapping[str, Any] | None = None) -> bytes:
    """The whole stream for ``message`` (text and ``tool_use`` blocks; others skipped)."""
    usage = message.get("usage") if isinstance(message.get("usage"), Mapping) else {}
    assert isinstance(usage, Mapping)
    out = [message_start_event(str(message.get("id") or ""), str(message.get("model") or ""),
                               {"input_tokens": usage.get("input_tokens", 0)})]
    index = 0
    for block in message.get("content") or ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            out.append(text_block_events(index, str(block.get("text") or "")))
        elif block.get("type") == "tool_use":
            out.append(_block_start(index, {"type": "tool_use", "id": block.get("id"),
                                            "name": block.get("name"), "input": {}}))
            out.append(_json_delta(index, orjson.dumps(block.get("input") or {}).decode()))
            out.append(_block_stop(index))
        else:
            continue
        index += 1
    out.append(message_end_events(str(message.get("stop_reason") or "end_turn"), usage,
                                  stop_sequence=message.get("stop_sequence"), verity=verity))
    return b"".join(out)


class ChatStreamToMessages:
    """OpenAI ``chat.completion.chunk`` SSE bytes in, Anthropic Messages SSE bytes out.

    :meth:`feed` returns the events completed by what arrived (possibly ``b""``);
    :meth:`finish` at the upstream's end of body; :meth:`fail` when reading it raised.
    After :attr:`done` nothing more is produced. :attr:`error` is set when the stream
    ended in an ``error`` event. Only choice 0 is read (the request never asks for more).
    A stream that failed before :attr:`started` can still be answered with an HTTP
    error status instead (:func:`~gateway.wire.anthropic_errors.error_from_gateway`).
    """

    def __init__(self, *, model: str = "", ping: bool = True,
                 stop_sequences: Sequence[str] | None = None) -> None:
        self.model = model
        self.ping = ping
        self.stop_sequences = stop_sequences
        self.id = ""
        self.started = False
        self.done = False
        self.error: GatewayError | None = None
        self.finish_reason: str | None = None
        self.stop_sequence: str | None = None
        self.usage: Mapping[str, Any] | None = None
        self.verity: Mapping[str, Any] | None = None
        self._parser = SSEParser()
        self._open: int | None = None  # index of the open block
        self._open_kind = ""
        self._next = 0
        self._tools: dict[int, int] = {}  # OpenAI tool-call index -> block index
        self._refused = False

    @property
    def pending(self) -> int:
        """Bytes of an event not complete yet (the caller bounds it)."""
        return self._parser.pending

    def feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        for payload in self._parser.feed(data):
            if self.done:
                break
            if payload.strip() == b"[DONE]":
                self._end(out)
                continue
            try:
                obj = orjson.loads(payload)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(obj, dict):
                continue
            if "error" in obj and not isinstance(obj.get("choices"), list):
                self._upstream_error(obj.get("error"), out)
            else:
                self._chunk(obj, out)
        return b"".join(out)

    def finish(self) -> bytes:
        """The end of the upstream body: the closing events if the finish reason came
        (``[DONE]`` missing), else an ``error`` event (the stream was truncated)."""
        if self.done:
            return b""
        out: list[bytes] = []
        if self.finish_reason is not None:
            self._end(out)
            return b"".join(out)
        return self.fail(UpstreamTruncated(
            "the upstream ended the stream before the answer was complete"))

    def fail(self, err: GatewayError) -> bytes:
        """The ``error`` event ending the stream for ``err`` (a cut, a timeout, a
        verification block with ``style: error``)."""
        if self.done:
            return b""
        self.done = True
        self.error = err
        return error_event(error_from_gateway(err)[1])

    # ---- chunks -----------------------------------------------------------------------------

    def _start(self, obj: Mapping[str, Any], out: list[bytes]) -> None:
        self.started = True
        self.id = message_id(obj.get("id"))
        model = obj.get("model")
        self.model = model if isinstance(model, str) and model else self.model
        out.append(message_start_event(self.id, self.model))
        if self.ping:
            out.append(PING)

    def _chunk(self, obj: Mapping[str, Any], out: list[bytes]) -> None:
        if not self.started:
            self._start(obj, out)
        usage = obj.get("usage")
        if isinstance(usage, Mapping):
            self.usage = usage
        verity = obj.get("verity")  # the engine's verdict on a hold-back's chunk
        if isinstance(verity, Mapping):
            self.verity = verity
        for choice in obj.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                self._delta(delta, out)
            if self.done:
                return
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
                found = choice.get("stop_reason")  # vLLM: the stop string that matched
                if isinstance(found, str) and (self.stop_sequences is None
                                               or found in self.stop_sequences):
                    self.stop_sequence = found

    def _delta(self, delta: Mapping[str, Any], out: list[bytes]) -> None:
        for key in ("content", "refusal"):
            text = delta.get(key)
            if isinstance(text, str) and text and not self.done:
                self._refused = self._refused or key == "refusal"
                if self._open_kind != "text":
                    self._begin(out, {"type": "text", "text": ""}, "text")
                assert self._open is not None
                out.append(text_delta_event(self._open, text))
        for call in delta.get("tool_calls") or ():
            if isinstance(call, Mapping) and not self.done:
                self._tool(call, out)

    def _tool(self, call: Mapping[str, Any], out: list[bytes]) -> None:
        index = call.get("index", 0)
        fn = call.get("function")
        fn = fn if isinstance(fn, Mapping) else {}
        args = fn.get("arguments") if isinstance(fn.get("arguments"), str) else ""
        block = self._tools.get(index) if isinstance(index, int) else None
        if block is None:
            call_id = call.get("id")
            name = fn.get("name")
            block = self._begin(out, {
                "type": "tool_use", "input": {},
                "id": call_id if isinstance(call_id, str) and call_id else f"toolu_{self._next}",
                "name": name if isinstance(name, str) else ""}, "tool_use")
            if isinstance(index, int):
                self._tools[index] = block
        elif block != self._open:
            if args:  # a block cannot reopen: the arguments would be lost
                self._fail_stream(UpstreamStreamError(
                    "the upstream interleaved the arguments of parallel tool calls"), out)
            return
        if args:
            out.append(_json_delta(block, args))

    def _begin(self, out: list[bytes], block: Mapping[str, Any], kind: str) -> int:
        self._close(out)
        index = self._next
        self._next += 1
        self._open, self._open_kind = index, kind
        out.append(_block_start(index, block))
        return index

    def _close(self, out: list[bytes]) -> None:
        if self._open is not None:
            out.append(_block_stop(self._open))
            self._open, self._open_kind = None, ""

    def _end(self, out: list[bytes]) -> None:
        if not self.started:
            self._start({}, out)
        self._close(out)
        reason = "refusal" if self._refused else stop_reason(self.finish_reason)
        if reason == "end_turn" and self._tools:
            reason = "tool_use"
        sequence = self.stop_sequence if reason == "end_turn" else None
        usage = usage_to_anthropic(self.usage)
        out.append(message_end_events("stop_sequence" if sequence is not None else reason,
                                      usage, stop_sequence=sequence, verity=self.verity))
        self.done = True

    def _upstream_error(self, err: Any, out: list[bytes]) -> None:
        err = err if isinstance(err, Mapping) else {}
        message = err.get("message") if isinstance(err.get("message"), str) else None
        otype = err.get("type") if isinstance(err.get("type"), str) else None
        code = err.get("code") if isinstance(err.get("code"), str) else None
        text = message or "the upstream stream failed"
        self.done = True
        self.error = UpstreamError(text, code=code)
        out.append(error_event(error_body(error_type(502, otype, code), text)))

    def _fail_stream(self, err: GatewayError, out: list[bytes]) -> None:
        out.append(self.fail(err))
