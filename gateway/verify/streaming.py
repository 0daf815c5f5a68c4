"""SSE paths of the engine: relay-and-accumulate, buffer, hold-back, synthesize.

- :func:`relay_accumulating` — shadow streams: forward upstream bytes exactly as
  they arrive (same chunks, same timing) while folding them into a
  :class:`StreamAccumulator`.
- :func:`read_all` — ``streaming: buffer``: read the whole upstream stream (raw bytes
  kept, so an unchanged answer is replayed byte for byte).
  Its ``unreadable`` count (data events that are not JSON, e.g. invalid UTF-8, or
  not chat completion chunks: their content is not in the accumulated answer) makes the inline paths treat
  such a stream as unverifiable.
- :func:`synthesize` — a ``chat.completion.chunk`` stream built from a completion
  dict (role chunk, content / tool-call chunks, finish chunk, usage chunk when the
  client asked ``stream_options.include_usage``, ``[DONE]``).
- :class:`HoldBack` — ``streaming: passthrough``: forward events as they arrive but
  keep back the *tail* — the first event carrying a ``finish_reason``, the usage
  chunk, ``[DONE]``, an unreadable event or any other event that is not a chat
  completion chunk (no ``choices`` list: an error event, other JSON), and anything
  after — until the answer is verified;
  :meth:`HoldBack.finish` then sends the held tail with the verdict's addition.

Passthrough signalling (the body has started, so headers cannot change). For
``disclaimer`` and ``block`` the held tail is reordered around the addition: all
upstream content (and tool-call) deltas first — content sent after a finish
chunk, or another choice's last content, included (it was verified too) — then
the addition, then the finish events it concerns, then usage chunks and
``[DONE]``:

- ``disclaimer`` — one more content chunk with the disclaimer text (and a ``verity``
  field), just before choice 0's finish (split from the content its event may
  carry). Other choices keep their finish events where the upstream sent them.
- ``block`` (``style: completion``) — a chunk with the block message as content,
  ``finish_reason: "content_filter"`` and a ``verity`` field replaces choice 0's
  finish; with ``n > 1`` every other choice gets a finish-only chunk with
  ``content_filter`` (and ``verity``) in place of its own, so each choice ends
  exactly once. The official SDK accepts both the finish reason and the extra
  field (``chunk.model_extra["verity"]``).
- ``block`` (``style: error``) — an OpenAI error event ``data: {"error": …}``
  ends the stream (no ``[DONE]``): the SDK raises ``APIError`` while iterating.
- ``pass`` / ``flag`` — the tail unchanged; the verdict is only in the audit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.errors import UpstreamError, UpstreamTooLarge, UpstreamTruncated
from gateway.proxy import ChatExchange, traced_chunks
from gateway.telemetry import UpstreamTrace
from gateway.upstream.base import UpstreamResponse
from gateway.wire.sse import (
    DONE,
    SSEParser,
    StreamAccumulator,
    encode_data,
    encode_event,
    ended_cleanly,
)

__all__ = ["HoldBack", "is_sse", "read_all", "relay_accumulating", "synthesize"]

Headers = list[tuple[bytes, bytes]]

_NOOP_RESPONSE = UpstreamTrace.response


def is_sse(resp: UpstreamResponse) -> bool:
    return resp.content_type.startswith("text/event-stream")


async def _start(x: ChatExchange, status: int, headers: Headers) -> None:
    await x.send({"type": "http.response.start", "status": status, "headers": headers})


async def _body(x: ChatExchange, data: bytes, more: bool = True) -> None:
    await x.send({"type": "http.response.body", "body": data, "more_body": more})


async def relay_accumulating(x: ChatExchange, resp: UpstreamResponse, up: UpstreamTrace,
                             headers: Headers, acc: StreamAccumulator | None = None,
                             ) -> tuple[StreamAccumulator | None, str | None]:
    """Relay the upstream stream verbatim, folding it into ``acc`` (a new one if not
    given: a caller that passes its own can read the answer so far meanwhile).

    Return ``(acc, None)``, or ``(None, note)`` when the answer cannot be verified: the
    stream was cut or truncated (it then ends with an error event), or went over
    ``max_response_bytes``: from there on it is relayed without being held (the client
    gets it all; the accumulated answer is dropped)."""
    acc = acc if acc is not None else StreamAccumulator()
    x.status = resp.status
    await _start(x, resp.status, headers)
    note: str | None = None
    limit, held = resp.max_bytes, 0
    before = last = b""
    try:
        async for chunk in traced_chunks(resp, up):
            await _body(x, chunk)
            if note is None:
                held += len(chunk)
                if held <= limit:
                    acc.feed_bytes(chunk)
                    continue
                resp.too_large()  # logged; the stream goes on, unheld
                note = f"not verified: {UpstreamTooLarge.code}"
                acc.drop_content()
            before, last = last, chunk
        if acc.truncated if note is None else not ended_cleanly(before, last):
            raise resp.truncated()
    except UpstreamError as err:
        up.error(type(err).__name__)
        x.status = err.status
        note = f"not verified: {err.code}" if isinstance(err, UpstreamTruncated) \
            else "not verified: the upstream stream was cut"
        await _body(x, encode_event(err.body()))
    else:
        if note is None and type(up).response is not _NOOP_RESPONSE:
            up.response(resp.status, acc.completion())
    x.watcher.disarm()
    await _body(x, b"", more=False)
    if note is None and acc.error is not None:
        note = "not verified: the upstream stream was cut"
    return (acc, None) if note is None else (None, note)


async def read_all(resp: UpstreamResponse, up: UpstreamTrace) -> tuple[bytes, StreamAccumulator]:
    """Read a whole SSE body, at most ``max_response_bytes`` (else UpstreamTooLarge);
    UpstreamError (a cut or truncated stream) propagates."""
    acc = StreamAccumulator()
    parts: list[bytes] = []
    limit, held = resp.max_bytes, 0
    async for chunk in traced_chunks(resp, up):  # a cut stream's UpstreamError propagates
        held += len(chunk)
        if held > limit:
            raise _failed(up, resp.too_large())
        parts.append(chunk)
        acc.feed_bytes(chunk)
    if acc.truncated:
        raise _failed(up, resp.truncated())
    if type(up).response is not _NOOP_RESPONSE:
        up.response(resp.status, acc.completion())
    return b"".join(parts), acc


def _failed(up: UpstreamTrace, err: UpstreamError) -> UpstreamError:
    up.error(type(err).__name__)
    return err


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


def _relayable(obj: dict[str, Any] | None) -> bool:
    """A chat completion chunk (a ``choices`` list) that does not start the tail: no
    ``finish_reason`` and not usage-only. Anything else — ``[DONE]``, an event that is
    not JSON, an error event, any other object — is held."""
    if obj is None:
        return False
    choices = obj.get("choices")
    if type(choices) is not list or (not choices and obj.get("usage")):
        return False
    return not any(type(c) is dict and c.get("finish_reason") for c in choices)


class HoldBack:
    """``streaming: passthrough``: relay events, hold the tail until :meth:`finish`."""

    def __init__(self, x: ChatExchange) -> None:
        self.x = x
        self.acc = StreamAccumulator()
        self.tail: list[bytes] = []
        self.error: UpstreamError | None = None
        self._parser = SSEParser()

    async def relay(self, resp: UpstreamResponse, up: UpstreamTrace, headers: Headers) -> None:
        """Forward events until the tail starts; a cut or truncated stream, or one over
        ``max_response_bytes`` (the answer and tail are held), sets :attr:`error`."""
        self.x.status = resp.status
        await _start(self.x, resp.status, headers)
        limit, held = resp.max_bytes, 0
        try:
            async for chunk in traced_chunks(resp, up):
                held += len(chunk)
                if held > limit:
                    raise _failed(up, resp.too_large())
                out: list[bytes] = []
                for data in self._parser.feed(chunk):
                    obj = self.acc.feed_data(data)
                    # From the first event that is not a readable chat completion chunk
                    # on, everything is held: it cannot be verified, and on_error decides
                    # at finish() whether it goes out.
                    if self.tail or self.acc.unreadable or not _relayable(obj):
                        self.tail.append(data)
                    else:
                        out.append(encode_data(data))
                if out:
                    await _body(self.x, b"".join(out))
            if self.acc.truncated:
                raise _failed(up, resp.truncated())
        except UpstreamError as err:
            self.error = err
            self.x.status = err.status
            self.acc.drop_content()  # not verified: nothing of it is needed any more
            self.tail = []
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
        """Send the held tail with the verdict's addition, and end the body.

        ``action`` ``disclaimer`` adds ``text`` as a content chunk before choice 0's
        finish; ``block`` sends ``text`` with ``finish_reason: content_filter`` in
        place of the upstream finish chunks (every choice's); ``error_body`` ends
        the stream with an error event. Otherwise the tail goes out as it came.
        """
        x = self.x
        out: list[bytes] = []
        tail = self.tail
        if error_body is not None:
            out.append(encode_event(error_body))
            tail = []
        elif action == "block" or (action == "disclaimer" and text):
            completion = self.completion()
            base = _chunk_base(completion)
            extra = {"verity": dict(verity)} if verity is not None else {}
            block = action == "block"
            body, finishes, end = _split_tail(tail, every_choice=block)
            if block:  # the verdict is the response's: every choice ends content_filter
                others = sorted({c.get("index", 0) for c in completion["choices"]} - {0})
                finishes = [orjson.dumps({**base, "choices": [{
                    "index": i, "delta": {} if i else {"content": text or ""},
                    "logprobs": None, "finish_reason": "content_filter"}], **extra})
                    for i in (0, *others)]
            else:
                body.append(orjson.dumps({**base, "choices": [{
                    "index": 0, "delta": {"content": text}, "logprobs": None,
                    "finish_reason": None}], **extra}))
            tail = [*body, *finishes, *end]
        out.extend(encode_data(d) for d in tail)
        x.watcher.disarm()
        await _body(x, b"".join(out), more=False)


def _has_delta(choice: Mapping[str, Any]) -> bool:
    delta = choice.get("delta")
    return isinstance(delta, dict) and any(v for key, v in delta.items() if key != "role")


def _split_tail(tail: list[bytes], *, every_choice: bool
                ) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """The held ``tail`` as ``(body, finishes, end)``, each in upstream order.

    ``finishes``: choice 0's finish (every choice's with ``every_choice``), each in
    an event of its own; ``end``: usage-only chunks, ``[DONE]`` and anything after
    it; ``body``: the rest. An event that carried a moved finish as well as content
    (servers often send the last token with the finish reason; with ``n > 1``
    another choice may share the event) keeps that content, and its usage, in
    ``body``. Events left whole are kept byte for byte.
    """
    body: list[bytes] = []
    finishes: list[bytes] = []
    end: list[bytes] = []
    done = False
    for data in tail:
        if done or data.strip() == b"[DONE]":
            done = True
            end.append(data)
            continue
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            body.append(data)
            continue
        choices = obj.get("choices") if isinstance(obj, dict) else None
        if not isinstance(obj, dict) or "error" in obj \
                or (choices is not None and not isinstance(choices, list)):
            body.append(data)
            continue
        if not choices:
            (end if obj.get("usage") else body).append(data)
            continue
        kept: list[Any] = []
        moved: list[dict[str, Any]] = []
        for c in choices:
            if isinstance(c, dict) and c.get("finish_reason") \
                    and (every_choice or c.get("index", 0) == 0):
                finish = {**c, "delta": {}}
                if _has_delta(c):
                    kept.append({**c, "finish_reason": None})
                    if "logprobs" in c:
                        finish["logprobs"] = None
                moved.append(finish)
            else:
                kept.append(c)
        if not moved:
            body.append(data)
            continue
        rest = {k: v for k, v in obj.items() if k != "usage"}
        finishes.extend(orjson.dumps({**rest, "choices": [c]}) for c in moved)
        if kept:
            body.append(orjson.dumps({**obj, "choices": kept}))
        elif obj.get("usage"):
            end.append(orjson.dumps({**obj, "choices": []}))
    return body, finishes, end
