"""The Messages front door's responses: chat-shaped responses rewritten as Messages ones.

:class:`MessagesSend` wraps an ASGI ``send``. The chat machinery behind
``POST /v1/messages`` (pass-through relay, the inline and shadow modes, the gateway's
own errors) writes chat completion responses into it; the client receives:

- a ``chat.completion`` JSON body → an Anthropic Message
  (:func:`~gateway.wire.anthropic_response.chat_to_message`; a ``verity`` field the
  gateway added is kept beside it; a block's ``content_filter`` is
  ``stop_reason: "refusal"``);
- an error JSON body (status ≥ 400: an upstream's, or the gateway's own) → the
  Anthropic error shape, status unchanged
  (:func:`~gateway.wire.anthropic_errors.error_from_openai`);
- a ``chat.completion.chunk`` SSE stream → Messages events as they arrive
  (:class:`~gateway.wire.anthropic_stream.ChatStreamToMessages`: a disclaimer the
  hold-back adds is a text delta, a block a refusal, an error event an ``error``
  event);
- any other body as it is.

Response headers (``x-verity-*``, ``x-request-id``, ``retry-after`` …) are kept; a JSON
body's ``content-length`` is recomputed. With :attr:`MessagesSend.native` (an
Anthropic upstream's own answer, relayed) nothing is rewritten.

:func:`models_page` rewrites ``GET /v1/models`` for the Anthropic SDK.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from gateway.errors import UpstreamTooLarge
from gateway.wire.anthropic_errors import error_body, error_from_openai
from gateway.wire.anthropic_response import chat_to_message, models_to_anthropic
from gateway.wire.anthropic_stream import ChatStreamToMessages
from gateway.wire.chat import is_completion

__all__ = ["MessagesSend", "models_page"]

_MAX_JSON = 64 * 1024 * 1024
"""A JSON body (or one stream event) held for rewriting, at most (the gateway already bounds what it reads
from upstream by ``max_response_bytes``; this bounds the rewrite's buffer too)."""


def _content_type(headers: Sequence[tuple[bytes, bytes]]) -> bytes:
    return next((v for k, v in headers if k.lower() == b"content-type"), b"").lower()


def _sized(headers: Sequence[tuple[bytes, bytes]], length: int, *,
           json: bool) -> list[tuple[bytes, bytes]]:
    """``headers`` with the new ``content-length`` (and a JSON ``content-type``)."""
    drop = (b"content-length", b"content-type") if json else (b"content-length",)
    out = [(k, v) for k, v in headers if k.lower() not in drop]
    if json or not any(k.lower() == b"content-type" for k, _ in out):
        out.append((b"content-type", b"application/json"))
    return [*out, (b"content-length", str(length).encode())]


class MessagesSend:
    """An ASGI ``send`` turning the chat responses written into it into Messages ones."""

    def __init__(self, send: Any, *, model: str = "",
                 stop_sequences: Sequence[str] | None = None) -> None:
        self.send = send
        self.model = model
        self.stop_sequences = stop_sequences
        self.native = False
        """Relay as written: the body is already an Anthropic upstream's answer."""
        self._start: dict[str, Any] | None = None
        self._stream: ChatStreamToMessages | None = None
        self._buf: list[bytes] = []
        self._size = 0

    async def __call__(self, message: dict[str, Any]) -> None:
        if self.native:
            await self.send(message)
            return
        kind = message["type"]
        if kind == "http.response.start":
            headers = list(message.get("headers") or ())
            if message["status"] < 400 and b"text/event-stream" in _content_type(headers):
                self._stream = ChatStreamToMessages(model=self.model,
                                                    stop_sequences=self.stop_sequences)
                await self.send({**message, "headers": [
                    (k, v) for k, v in headers if k.lower() != b"content-length"]})
                return
            self._start = {**message, "headers": headers}
            return None
        if kind != "http.response.body":
            await self.send(message)
            return
        body: bytes = message.get("body", b"")
        more = bool(message.get("more_body"))
        if self._stream is not None:
            out = self._stream.feed(body) if body else b""
            if self._stream.pending > _MAX_JSON:  # one event that never ends
                out += self._stream.fail(UpstreamTooLarge(
                    f"a stream event is over {_MAX_JSON} bytes: not translated"))
            if not more:
                out += self._stream.finish()
            if out or not more:
                await self.send({"type": "http.response.body", "body": out, "more_body": more})
            return None
        start = self._start
        if start is None:  # a body without a start: let the server refuse it
            await self.send(message)
            return
        self._size += len(body)
        if self._size <= _MAX_JSON:
            self._buf.append(body)
        if more:
            return None
        status = start["status"]
        if self._size > _MAX_JSON:
            status, data = 502, orjson.dumps(error_body(
                "api_error", f"the response is over {_MAX_JSON} bytes: not translated"))
        else:
            data = self._rewrite(status, _content_type(start["headers"]), b"".join(self._buf))
        self._buf.clear()
        await self.send({**start, "status": status,
                         "headers": _sized(start["headers"], len(data), json=status >= 400)})
        await self.send({"type": "http.response.body", "body": data, "more_body": False})
        return None

    def _rewrite(self, status: int, content_type: bytes, data: bytes) -> bytes:
        """The Messages body for a held chat body."""
        if status >= 400:
            return orjson.dumps(error_from_openai(status, data)[1])
        if b"json" not in content_type:
            return data
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            return data
        if not is_completion(parsed):
            return data
        message = chat_to_message(parsed, stop_sequences=self.stop_sequences,
                                  model=self.model or None)
        if isinstance(parsed.get("verity"), dict):
            message["verity"] = parsed["verity"]
        return orjson.dumps(message)


def models_page(data: bytes) -> bytes:
    """An OpenAI model list (``GET /v1/models``) as Anthropic's page; else as it is."""
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data
    if not isinstance(parsed, dict) or not isinstance(parsed.get("data"), list):
        return data
    return orjson.dumps(models_to_anthropic(parsed))
