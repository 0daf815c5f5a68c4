"""SSE paths of the engine: relay-and-accumulate, buffer, hold-back, synthesize.

- :func:`relay_accumulating` — shadow streams: forward upstream bytes exactly as
  they arrive (same chunks, same timing) while folding them into a
  :class:`StreamAccumulator`.
- :func:`read_all` — ``streaming: buffer``: read the whole upstream stream (raw bytes
  kept, so an unchanged answer is replayed byte for byte).
- :class:`CheckedAccumulator` — a :class:`StreamAccumulator` that counts the data
  events it cannot read (not JSON, e.g. invalid UTF-8): their content is not in
  the accumulated answer, so the inline paths treat such a stream as unverifiable.
- :func:`synthesize` — a ``chat.completion.chunk`` stream built from a completion
  dict (role chunk, content / tool-call chunks, finish chunk, usage chunk when the
  client asked ``stream_options.include_usage``, ``[DONE]``).
- :class:`HoldBack` — ``streaming: passthrough``: forward events as they arrive but
  keep back the *tail* — the first event carrying a ``finish_reason``, the usage
  chunk, ``[DONE]``, an unreadable event, and anything after — until the answer is
  verified;
  :meth:`HoldBack.finish` then sends the verdict's addition and the tail.

Passthrough signalling (the body has started, so headers cannot change):

- ``disclaimer`` — one more content chunk with the disclaimer text (and a ``verity``
  field), just before choice 0's finish event (split from the content it may carry).
- ``block`` (``style: completion``) — a chunk with the block message as content,
  ``finish_reason: "content_filter"`` and a ``verity`` field replaces the upstream
  finish chunk; then the usage chunk and ``[DONE]``. The official SDK accepts
  both the finish reason and the extra field (``chunk.model_extra["verity"]``).
- ``block`` (``style: error``) — an OpenAI error event ``data: {"error": …}``
  ends the stream (no ``[DONE]``): the SDK raises ``APIError`` while iterating.
- ``pass`` / ``flag`` — the tail unchanged; the verdict is only in the audit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.errors import UpstreamError
from gateway.proxy import ChatExchange, traced_chunks
from gateway.sse import DONE, SSEParser, StreamAccumulator, encode_event
from gateway.telemetry import UpstreamTrace
from gateway.upstream.client import UpstreamResponse

__all__ = ["CheckedAccumulator", "HoldBack", "is_sse", "read_all", "relay_accumulating",
           "synthesize"]

Headers = list[tuple[bytes, bytes]]

_NOOP_RESPONSE = UpstreamTrace.response


def is_sse(resp: UpstreamResponse) -> bool:
    return resp.content_type.startswith("text/event-stream")


async def _start(x: ChatExchange, status: int, headers: Headers) -> None:
    await x.send({"type": "http.response.start", "status": status, "headers": headers})


async def _body(x: ChatExchange, data: bytes, more: bool = True) -> None:
    await x.send({"type": "http.response.body", "body": data, "more_body": more})


async def relay_accumulating(x: ChatExchange, resp: UpstreamResponse, up: UpstreamTrace,
                             headers: Headers) -> StreamAccumulator | None:
    """Relay the upstream stream verbatim; return the accumulated stream (None if cut)."""
    acc = StreamAccumulator()
    x.status = resp.status
    await _start(x, resp.status, headers)
    ok = True
    try:
        async for chunk in traced_chunks(resp, up):
            await _body(x, chunk)
            acc.feed_bytes(chunk)
    except UpstreamError as err:
        x.status, ok = err.status, False
        await _body(x, encode_event(err.body()))
    else:
        if type(up).response is not _NOOP_RESPONSE:  # no completion dict for the no-op
            up.response(resp.status, acc.completion())
    x.watcher.disarm()
    await _body(x, b"", more=False)
    return acc if ok and acc.error is None else None


class CheckedAccumulator(StreamAccumulator):
    """A :class:`StreamAccumulator` that counts, in :attr:`unreadable`, the data events
    it had to skip: not JSON (invalid UTF-8 included) or not a JSON object. Empty
    data and ``[DONE]`` are not counted."""

    def __init__(self) -> None:
        super().__init__()
        self.unreadable = 0

    def feed_data(self, data: bytes) -> None:
        if data.strip() == b"[DONE]":
            self.done = True
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            if data.strip():
                self.unreadable += 1
            return
        if isinstance(obj, dict):
            self.feed_chunk(obj)
        else:
            self.unreadable += 1


async def read_all(resp: UpstreamResponse, up: UpstreamTrace) -> tuple[bytes, CheckedAccumulator]:
    """Read a whole SSE body; UpstreamError (a cut stream) propagates."""
    acc = CheckedAccumulator()
    parts: list[bytes] = []
    async for chunk in traced_chunks(resp, up):  # a cut stream's UpstreamError propagates
        parts.append(chunk)
        acc.feed_bytes(chunk)
    if type(up).response is not _NOOP_RESPONSE:
        up.response(resp.status, acc.completion())
    return b"".join(parts), acc


def _chunk_base(completion: Mapping[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = {"id": completion.get("id") or "chatcmpl-verity",
                            "object": "chat.completion.chunk",
                            "created": completion.get("created") or 0,
                            "model": completion.get("model") or ""}
    if completion.get("system_fingerprint"):
        base["system_fingerprint"] = completion["system_fingerprint"]
    return base


def synthesize(completion: Mapping[str, Any], *, include_usage: bool,
               extra: Mapping[str, Any] | None = None) -> bytes:
    """The SSE body for ``completion``; ``extra`` fields go on each finish chunk."""
    base = _chunk_base(completion)
    events: list[bytes] = []

    def emit(choice: dict[str, Any], **more: Any) -> None:
        events.append(encode_event({**base, "choices": [choice], **more}))

    for choice in completion.get("choices") or ():
        index = choice.get("index", 0)
        message = choice.get("message") or {}
        emit({"index": index, "delta": {"role": "assistant", "content": ""},
              "logprobs": None, "finish_reason": None})
        content = message.get("content")
        if isinstance(content, str) and content:
            emit({"index": index, "delta": {"content": content}, "logprobs": None,
                  "finish_reason": None})
        for j, call in enumerate(message.get("tool_calls") or ()):
            emit({"index": index, "delta": {"tool_calls": [{**call, "index": j}]},
                  "logprobs": None, "finish_reason": None})
        emit({"index": index, "delta": {}, "logprobs": None,
              "finish_reason": choice.get("finish_reason") or "stop"}, **(extra or {}))
    if include_usage:
        events.append(encode_event({**base, "choices": [],
                                    "usage": completion.get("usage")}))
    events.append(DONE)
    return b"".join(events)


def _is_tail(data: bytes) -> bool:
    if data.strip() == b"[DONE]":
        return True
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(obj, dict):
        return False
    choices = obj.get("choices")
    if obj.get("usage") and not choices:
        return True
    return any(isinstance(c, dict) and c.get("finish_reason") for c in choices or ())


class HoldBack:
    """``streaming: passthrough``: relay events, hold the tail until :meth:`finish`."""

    def __init__(self, x: ChatExchange) -> None:
        self.x = x
        self.acc = CheckedAccumulator()
        self.tail: list[bytes] = []
        self.error: UpstreamError | None = None
        self._parser = SSEParser()

    async def relay(self, resp: UpstreamResponse, up: UpstreamTrace, headers: Headers) -> None:
        """Forward events until the tail starts; a cut stream sets :attr:`error`."""
        self.x.status = resp.status
        await _start(self.x, resp.status, headers)
        try:
            async for chunk in traced_chunks(resp, up):
                out: list[bytes] = []
                for data in self._parser.feed(chunk):
                    self.acc.feed_data(data)
                    # From an unreadable event on, everything is held: it cannot be
                    # verified, and on_error decides at finish() whether it goes out.
                    if self.tail or self.acc.unreadable or _is_tail(data):
                        self.tail.append(data)
                    else:
                        out.append(b"data: " + data + b"\n\n")
                if out:
                    await _body(self.x, b"".join(out))
        except UpstreamError as err:
            self.error = err
            self.x.status = err.status
        else:
            if type(up).response is not _NOOP_RESPONSE:
                up.response(resp.status, self.acc.completion())

    def completion(self) -> dict[str, Any]:
        return self.acc.completion()

    async def abort(self) -> None:
        """After a cut stream: the error event, as pass-through would send it."""
        assert self.error is not None
        self.x.watcher.disarm()
        await _body(self.x, encode_event(self.error.body()), more=False)

    async def finish(self, *, action: str, text: str | None = None,
                     verity: Mapping[str, Any] | None = None,
                     error_body: Mapping[str, Any] | None = None) -> None:
        """Send the verdict's addition and the held tail, and end the body.

        ``action`` ``disclaimer`` appends ``text`` as a content chunk; ``block``
        sends ``text`` with ``finish_reason: content_filter`` in place of the
        upstream finish chunk; ``error_body`` ends the stream with an error event.
        """
        x = self.x
        base = _chunk_base(self.completion())
        extra = {"verity": dict(verity)} if verity is not None else {}
        out: list[bytes] = []
        tail = self.tail
        if error_body is not None:
            out.append(encode_event(error_body))
            tail = []
        elif action == "disclaimer" and text:
            tail = _before_finish(tail, orjson.dumps({**base, "choices": [{
                "index": 0, "delta": {"content": text}, "logprobs": None,
                "finish_reason": None}], **extra}))
        elif action == "block":
            out.append(encode_event({**base, "choices": [{
                "index": 0, "delta": {"content": text or ""}, "logprobs": None,
                "finish_reason": "content_filter"}], **extra}))
            tail = [d for d in tail if not _has_finish(d)]
        out.extend(b"data: " + d + b"\n\n" for d in tail)
        x.watcher.disarm()
        await _body(x, b"".join(out), more=False)


def _before_finish(tail: list[bytes], addition: bytes) -> list[bytes]:
    """``tail`` with ``addition`` placed just before choice 0's finish.

    The event carrying choice 0's ``finish_reason`` may also carry its last
    content (or tool-call) delta — servers often send the final token with the
    finish reason, and with ``n > 1`` another choice may finish first: the
    addition goes after that content, and the finish follows it in an event of
    its own. Without such an event it opens the tail.
    """
    for i, data in enumerate(tail):
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        choices = obj.get("choices") or ()
        k = next((k for k, c in enumerate(choices) if isinstance(c, dict)
                  and c.get("index", 0) == 0 and c.get("finish_reason")), None)
        if k is None:
            continue
        choice = choices[k]
        delta = choice.get("delta") or {}
        if not any(v for key, v in delta.items() if key != "role"):
            return [*tail[:i], addition, *tail[i:]]
        head = {**obj, "choices": [*choices[:k], {**choice, "finish_reason": None},
                                   *choices[k + 1:]]}
        finish = {**obj, "choices": [{**choice, "delta": {}}]}
        finish.pop("usage", None)
        return [*tail[:i], orjson.dumps(head), addition, orjson.dumps(finish), *tail[i + 1:]]
    return [addition, *tail]


def _has_finish(data: bytes) -> bool:
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and any(
        isinstance(c, dict) and c.get("finish_reason") for c in obj.get("choices") or ())
