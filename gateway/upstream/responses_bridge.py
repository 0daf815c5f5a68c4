"""``POST /responses`` for an upstream that has only chat completions.

An upstream whose ``responses_api`` is false (``kind: anthropic`` always; an
OpenAI-compatible server that has no ``/v1/responses``) is sent a Responses request
as a chat completion (:func:`gateway.upstream.responses_chat.responses_to_chat`: exact
for the text-and-function-tools subset, a 400 naming the field for the rest) and its
answer comes back in the Responses shape (:mod:`gateway.upstream.chat_responses`):

- a JSON ``chat.completion`` -> a ``response`` object;
- a ``chat.completion.chunk`` stream -> Responses events, translated as the chunks
  arrive; a stream that stops before its finish reason is cut (``truncated()``);
- an error (status >= 400) as it came: OpenAI's error body is the same for both APIs.

:func:`send_via_chat` does it with the client's own ``send`` (the chat call then goes
through the client as any chat call does: an Anthropic client translates it on).
Translated requests carry ``max_tokens`` (the field every chat completions server
accepts; OpenAI's own, which wants ``max_completion_tokens`` for reasoning models,
speaks the Responses API natively).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import orjson

from gateway.errors import InvalidJSON, InvalidRequest, UpstreamTooLarge, UpstreamTruncated
from gateway.upstream.base import UpstreamResponse, read_chunks
from gateway.upstream.chat_responses import ChatStreamToResponses, chat_to_response
from gateway.upstream.responses_chat import responses_to_chat
from gateway.wire.responses_stream import encode_event
from gateway.wire.sse import SSEParser

__all__ = ["ChatAsResponses", "Send", "read_json_object", "send_via_chat"]

Send = Callable[[str, str, dict[str, str], "bytes | AsyncIterator[bytes] | None", str],
                Awaitable[UpstreamResponse]]
"""An :meth:`~gateway.upstream.base.UpstreamClient.send`."""


async def read_json_object(body: bytes | AsyncIterator[bytes] | None) -> dict[str, Any]:
    """A request body (bytes or a byte stream) that must be a JSON object, else the
    client's 400."""
    if body is None:
        data = b""
    elif isinstance(body, bytes):
        data = body
    else:
        data = b"".join([chunk async for chunk in body])
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise InvalidJSON("We could not parse the JSON body of your request.") from None
    if not isinstance(payload, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return payload


async def send_via_chat(send: Send, headers: dict[str, str],
                        body: bytes | AsyncIterator[bytes] | None,
                        query: str = "") -> UpstreamResponse:
    """Send a Responses request ``body`` as a chat completion with ``send``; the answer
    in the Responses shape. :class:`~gateway.errors.InvalidRequest` (400, nothing
    sent) for a field with no exact chat counterpart."""
    request = await read_json_object(body)
    chat = responses_to_chat(request)
    raw = await send("POST", "/chat/completions", headers, orjson.dumps(chat), query)
    return ChatAsResponses(raw, request)


class ChatAsResponses(UpstreamResponse):
    """A chat completions response read in the Responses shape (see the module)."""

    __slots__ = ("_body", "_raw", "_request", "headers", "max_bytes", "status")

    def __init__(self, raw: UpstreamResponse, request: Mapping[str, Any]) -> None:
        self._raw = raw
        self._request = request
        self._body: bytes | None = None
        self.status = raw.status
        self.headers = raw.headers
        self.max_bytes = raw.max_bytes

    @property
    def content_type(self) -> str:
        return self._raw.content_type

    def header(self, name: str) -> str | None:
        return self._raw.header(name)

    def too_large(self) -> UpstreamTooLarge:
        return self._raw.too_large()

    def truncated(self) -> UpstreamTruncated:
        return self._raw.truncated()

    def _stream(self) -> bool:
        return self.status < 400 and self._raw.content_type.startswith("text/event-stream")

    async def read(self) -> bytes:
        if self._body is not None:
            return self._body
        if self._stream():  # translated as it arrives: the output is counted
            self._body = await read_chunks(self)
            return self._body
        data = await self._raw.read()
        if self.status >= 400:
            self._body = data
            return data
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            parsed = None
        # Not a chat completion: handed on as it came (it is then not a response either,
        # and whoever reads it says so).
        ok = isinstance(parsed, dict) and isinstance(parsed.get("choices"), list) \
            and bool(parsed["choices"])
        self._body = orjson.dumps(chat_to_response(parsed, self._request)) if ok else data
        return self._body

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        if not self._stream():
            yield await self.read()
            return
        parser = SSEParser()
        translator = ChatStreamToResponses(self._request)
        async for chunk in self._raw.iter_chunks():
            events: list[dict[str, Any]] = []
            for data in parser.feed(chunk):
                events += translator.feed_data(data)
            if events:
                yield b"".join(encode_event(event) for event in events)
            if translator.ended:
                return
            if parser.pending > self.max_bytes:  # one event that never ends
                raise self.too_large()
        if not translator.finished:  # no finish reason, no [DONE]: the upstream stopped
            raise self.truncated()
        yield b"".join(encode_event(event) for event in translator.finish())

    def release(self) -> None:
        self._raw.release()

    def close(self) -> None:
        self._raw.close()
