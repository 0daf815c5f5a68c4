"""One request of a front door on its way through the gateway: :class:`ChatExchange`.

It carries the request (ASGI scope, body, parsed payload, :class:`~gateway.types.
RequestInfo`, the routed upstream, the caller, the request's trace, the front door's
:class:`~gateway.wire.base.ResponseFormat`: chat completions unless the front door
says otherwise) and offers the two things every path needs:

- **the upstream call** — :meth:`ChatExchange.call_upstream` (the calls of one
  exchange — retries, fallbacks, load balancing — each inside its ``chat``
  CLIENT span, the response handed on released after) and
  :meth:`ChatExchange.complete` (a non-streaming call with another payload, routed
  by its model: a regenerate attempt);
- **the response** — :meth:`respond`, :meth:`respond_error`, or a stream
  (:meth:`start_stream`, :meth:`send_body`, :meth:`end_stream`). They own the
  disconnect watcher: it stays armed while the gateway waits (on the upstream, on
  verification, on a relayed stream), so a client that leaves cancels the work, and
  is disarmed just before the last bytes are written, so that a client leaving then
  does not cancel what is already done. No path disarms it by hand.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.errors import GatewayError
from gateway.http.asgi import DisconnectWatcher, send_bytes, send_error
from gateway.http.attempts import attempts
from gateway.http.auth import Principal
from gateway.http.forward_path import forwarded_query
from gateway.telemetry import RequestTrace, UpstreamTrace
from gateway.types import Headers, RequestInfo
from gateway.upstream.base import UpstreamClient, UpstreamResponse
from gateway.upstream.router import Upstreams
from gateway.wire.base import ResponseFormat
from gateway.wire.chat import CHAT_COMPLETIONS
from gateway.wire.messages import maybe_json

__all__ = ["ChatExchange"]


class _ChatShapedTrace(UpstreamTrace):
    """An upstream span that reads a format's answers as chat completions."""

    __slots__ = ("_fmt", "_up")

    def __init__(self, up: UpstreamTrace, fmt: ResponseFormat) -> None:
        self._up = up
        self._fmt = fmt
        self.recording = up.recording

    def headers(self) -> Headers:
        return self._up.headers()

    def first_chunk(self) -> None:
        self._up.first_chunk()

    def response(self, status: int, body: Mapping[str, Any] | None) -> None:
        chat = self._fmt.job_answer(body) if body is not None and status < 400 else body
        self._up.response(status, chat)

    def error(self, error_type: str) -> None:
        self._up.error(error_type)


@dataclass(slots=True, eq=False)
class ChatExchange:
    """One chat completion request (see the module docstring)."""

    scope: Mapping[str, Any]
    receive: Any
    send: Any
    body: bytes
    payload: dict[str, Any]
    info: RequestInfo
    upstream: UpstreamClient
    """The first upstream the request's model routes to (of its pool, if it has one)."""
    upstreams: Upstreams
    principal: Principal | None
    trace: RequestTrace
    watcher: DisconnectWatcher
    status: int = 0
    """The status the client got (or the upstream's, while it is being relayed)."""
    served: dict[str, Any] = field(default_factory=dict)
    """The upstream that answered the request and the calls it took (retries,
    fallbacks), filled in place once it did: ``{"name", "attempts"[, "tried",
    "reasons", "fallback", "model"]}`` (the audit record's ``upstream``; records made
    before the call hold this mapping and read it when written)."""
    fmt: ResponseFormat = CHAT_COMPLETIONS
    """The front door's request and response shapes."""
    _messages: list[Any] | None = None

    @property
    def stream(self) -> bool:
        return self.info.stream

    @property
    def messages(self) -> list[Any]:
        """The request as chat-shaped messages (chat: its ``messages``, checked to be a
        list by the front door): what the layers read."""
        if self._messages is None:
            self._messages = self.fmt.request_messages(self.payload)
        return self._messages

    # ---- the upstream ---------------------------------------------------------------------

    @asynccontextmanager
    async def call_upstream(self, body: bytes, *, stream: bool, path: str | None = None,
                            model: str | None = None, payload: dict[str, Any] | None = None
                            ) -> AsyncIterator[tuple[UpstreamResponse, UpstreamTrace]]:
        """One upstream exchange (retries, fallbacks, load balancing:
        :mod:`gateway.http.attempts`), each call inside its CLIENT span; the response
        handed on is released after.

        ``body`` is ``payload`` serialized (default: the request's own); a fallback that
        asks another model gets ``payload`` with that model. The first exchange of the
        request (its answer) is what :attr:`served` describes."""
        path = path or self.fmt.path
        model = model or self.info.model
        source = payload if payload is not None else self.payload
        # store: false (Responses) keeps nothing upstream: retried like a chat completion.
        plan = self.upstreams.plan(model, path=path, stateless=source.get("store") is False)

        async def send(client: UpstreamClient, asked: str, headers: dict[str, str]
                       ) -> UpstreamResponse:
            out = body if asked == model else orjson.dumps({**source, "model": asked})
            return await self.send_upstream(client, path, headers, out, source)

        async with attempts(self.upstreams, self.trace, plan, send, self.scope["headers"],
                            stream=stream) as served:
            if not self.served:  # the request's answer; a regenerate call's is not kept
                self.served.update(served.record())
            up = served.up if self.fmt.chat_shaped else _ChatShapedTrace(served.up, self.fmt)
            yield served.resp, up

    async def send_upstream(self, client: UpstreamClient, path: str, headers: dict[str, str],
                            body: bytes, payload: dict[str, Any]) -> UpstreamResponse:
        """Send one attempt (a front door that talks to some upstreams in its own API
        overrides this: ``gateway.http.messages``)."""
        return await client.send("POST", path, headers, body, forwarded_query(self.scope))

    async def complete(self, payload: dict[str, Any]) -> tuple[int, Any, bytes]:
        """Non-streaming call with ``payload``; return (status, parsed JSON or None, raw).

        A payload naming another model (a regenerate ``fallback_model``) is routed by
        it, with that model's pool and fallbacks."""
        body = orjson.dumps(payload)
        model = str(payload.get("model") or self.info.model)
        async with self.call_upstream(body, stream=False, model=model,
                                      payload=payload) as (resp, up):
            raw = await resp.read()
            parsed = maybe_json(raw)
            up.response(resp.status, parsed if isinstance(parsed, dict) else None)
            return resp.status, parsed, raw

    # ---- the response ---------------------------------------------------------------------

    async def respond(self, status: int, body: bytes, headers: Headers, *,
                      content_type: tuple[bytes, bytes] | None = None) -> None:
        """The whole response at once (``headers`` complete unless ``content_type``)."""
        self.status = status
        self.watcher.disarm()
        await send_bytes(self.send, status, body, headers, content_type=content_type)

    async def respond_error(self, err: GatewayError, headers: Headers | None = None) -> None:
        """The gateway's own error, as an OpenAI error body."""
        self.status = err.status
        self.watcher.disarm()
        await send_error(self.send, err, headers or ())

    async def start_stream(self, status: int, headers: Headers) -> None:
        """Start a streamed response; the watcher stays armed while it is relayed."""
        self.status = status
        await self.send({"type": "http.response.start", "status": status, "headers": headers})

    async def send_body(self, data: bytes) -> None:
        """More of a streamed response."""
        await self.send({"type": "http.response.body", "body": data, "more_body": True})

    async def end_stream(self, data: bytes = b"") -> None:
        """The last bytes of a streamed response."""
        self.watcher.disarm()
        await self.send({"type": "http.response.body", "body": data, "more_body": False})
