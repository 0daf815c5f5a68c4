"""One chat completion request on its way through the gateway: :class:`ChatExchange`.

It carries the request (ASGI scope, body, parsed payload, :class:`~gateway.types.
RequestInfo`, the routed upstream, the caller, the request's trace) and offers the
two things every path needs:

- **the upstream call** — :meth:`ChatExchange.call_upstream` (one call inside its
  ``chat`` CLIENT span, the response released after) and
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
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.errors import GatewayError, UpstreamError
from gateway.http.asgi import DisconnectWatcher, send_bytes, send_error
from gateway.http.auth import Principal
from gateway.http.forward_path import forwarded_query
from gateway.telemetry import RequestTrace, UpstreamTrace
from gateway.types import Headers, RequestInfo
from gateway.upstream.base import UpstreamClient, UpstreamResponse
from gateway.upstream.router import Upstreams
from gateway.wire.messages import maybe_json

__all__ = ["ChatExchange"]


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
    """The upstream the request's model routes to."""
    upstreams: Upstreams
    principal: Principal | None
    trace: RequestTrace
    watcher: DisconnectWatcher
    status: int = 0
    """The status the client got (or the upstream's, while it is being relayed)."""

    @property
    def stream(self) -> bool:
        return self.info.stream

    @property
    def messages(self) -> list[Any]:
        """The request's ``messages`` (checked to be a list by the front door)."""
        messages: list[Any] = self.payload.get("messages") or []
        return messages

    # ---- the upstream ---------------------------------------------------------------------

    @asynccontextmanager
    async def call_upstream(self, body: bytes, *, stream: bool, path: str = "/chat/completions",
                            model: str | None = None, upstream: UpstreamClient | None = None
                            ) -> AsyncIterator[tuple[UpstreamResponse, UpstreamTrace]]:
        """Open one upstream call inside its CLIENT span; the response is released after.

        ``upstream`` defaults to the one the request was routed to."""
        target = upstream or self.upstream
        with self.trace.upstream(model=model or self.info.model, provider=target.config.kind,
                                 server_address=target.server_address, stream=stream,
                                 server_url=target.base_url) as up:
            try:
                resp = await target.send(
                    "POST", path, target.build_headers(self.scope["headers"],
                                                       use_own_key=self.upstreams.use_own_key,
                                                       extra=up.headers()), body,
                    forwarded_query(self.scope))
            except UpstreamError as err:
                up.error(type(err).__name__)
                raise
            try:
                yield resp, up
            except BaseException as exc:
                if isinstance(exc, UpstreamError):  # reading the body failed (cut, too large)
                    up.error(type(exc).__name__)
                resp.close()
                raise
            finally:
                resp.release()

    async def complete(self, payload: dict[str, Any]) -> tuple[int, Any, bytes]:
        """Non-streaming call with ``payload``; return (status, parsed JSON or None, raw).

        A payload naming another model (a regenerate ``fallback_model``) is routed by it."""
        body = orjson.dumps(payload)
        model = str(payload.get("model") or self.info.model)
        target = self.upstream if model == self.info.model else self.upstreams.route(model)
        async with self.call_upstream(body, stream=False, model=model,
                                      upstream=target) as (resp, up):
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
