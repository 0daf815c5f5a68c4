"""The Anthropic Messages front door: ``POST /v1/messages`` and ``/v1/messages/count_tokens``.

For applications written against the official ``anthropic`` SDK with its ``base_url``
at the gateway. The caller's key comes as ``x-api-key`` (the SDK's) or a bearer token;
errors are in Anthropic's shape (:mod:`gateway.http.messages_send`).

Two ways through, chosen per request:

- **native** — no policy applies and every upstream the model may go to (its pool and
  fallbacks) is ``kind: anthropic``: the body goes upstream as it came
  (``POST {base_url}/messages``) and the answer, JSON or SSE, comes back as it arrives,
  with the same retries, fallbacks and balancing as every call
  (:mod:`gateway.http.attempts`). Fields the chat shape has no room for (thinking,
  server tools, ``cache_control``) survive.
- **through chat** — otherwise: the request is translated to a chat completion request
  (:func:`~gateway.wire.anthropic_messages.messages_to_chat`) and served by the same
  machinery as ``/v1/chat/completions`` — pass-through, or the engine with the
  policy's mode (inline, shadow) and actions — towards OpenAI-compatible upstreams as
  they are and Anthropic upstreams through their translating client; what the client
  receives is rewritten into Messages shapes on the way out (a disclaimer as text, a
  block as ``stop_reason: "refusal"``, verdict headers kept).

``count_tokens`` has no chat counterpart: it is relayed to an Anthropic upstream, and a
model served by an OpenAI-compatible one gets 404 ``not_found_error``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.errors import InvalidRequest, MethodNotAllowed, NotFound, UpstreamError
from gateway.http.asgi import DisconnectWatcher, read_body, read_object
from gateway.http.attempts import attempts
from gateway.http.auth import Authenticator, authorization
from gateway.http.chat import Engine, offload_for, serve_exchange, uncancel
from gateway.http.exchange import ChatExchange
from gateway.http.messages_send import MessagesSend
from gateway.http.relay import traced_chunks
from gateway.http.request_info import request_info
from gateway.telemetry import RequestTrace
from gateway.upstream.base import UpstreamClient, UpstreamResponse
from gateway.upstream.router import Upstreams
from gateway.wire.anthropic_messages import messages_to_chat
from gateway.wire.messages import check_messages

__all__ = ["COUNT_TOKENS_PATH", "MESSAGES_PATH", "MessagesEndpoint", "with_bearer"]

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
def with_bearer(scope: Mapping[str, Any]) -> dict[str, Any]:
    """``scope`` whose ``x-api-key`` (the Anthropic SDK's credential) is also an
    ``Authorization: Bearer`` header when it has none: authenticated as a gateway key,
    or, in forward mode, sent to an OpenAI-compatible upstream as its key. Several
    ``x-api-key`` headers become several ``Authorization`` headers: refused (401)."""
    headers = list(scope["headers"])
    if not any(k == b"authorization" for k, _ in headers):
        # Every x-api-key becomes one: several are refused as several Authorization
        # headers are (:func:`~gateway.http.auth.authorization`), never one picked.
        headers += [(b"authorization", b"Bearer " + v) for k, v in scope["headers"]
                    if k == b"x-api-key" and v]
    return {**scope, "headers": headers}


class MessagesEndpoint:
    """``POST /v1/messages`` (and ``count_tokens``) of one app."""

    def __init__(self, upstreams: Upstreams, auth: Authenticator, max_body_bytes: int,
                 engine: Engine | None = None) -> None:
        self.upstreams = upstreams
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        self.engine = engine

    def native(self, model: str) -> bool:
        """Every upstream ``model`` may go to speaks Anthropic's API."""
        b = self.upstreams.balancer
        return all(self.upstreams.client(m.upstream).config.kind == "anthropic"
                   for t in self.upstreams.targets(model) for m in b.members(t.pool))

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any,
                       trace: RequestTrace) -> int:
        """``send`` is the request's :class:`MessagesSend` (so the error a raised
        :class:`~gateway.errors.GatewayError` becomes is in Anthropic's shape too)."""
        out = send if isinstance(send, MessagesSend) else MessagesSend(send)
        path = COUNT_TOKENS_PATH if scope["path"].rstrip("/") == COUNT_TOKENS_PATH \
            else MESSAGES_PATH  # a route template, never the client's string
        # Authentication first: a caller without a key learns nothing of the route,
        # not even which methods it takes.
        scope = with_bearer(scope)
        principal = self.auth.authenticate(authorization(scope["headers"]))
        if scope["method"] != "POST":
            raise MethodNotAllowed(f"Use POST for {path}.", headers={"allow": "POST"})
        self.auth.authorize(principal, "POST", path)
        headers = dict(scope["headers"])
        raw_length = headers.get(b"content-length")
        body = await read_body(receive, self.max_body_bytes,
                               raw_length.decode() if raw_length is not None else None)
        payload = await read_object(body, offload_for(self.engine, len(body)))
        model = payload.get("model")
        if not isinstance(model, str) or not model:
            raise InvalidRequest("model: Field required (a model name)", param="model")
        native = self.native(model)
        if path == COUNT_TOKENS_PATH:
            if not native:
                raise NotFound(f"count_tokens is not supported for {model!r}: its upstream "
                               "is not an Anthropic one.", param="model")
            return await self._native(scope, receive, out, trace, body, payload, path)
        info = request_info(model=model, route=MESSAGES_PATH, headers=headers,
                            principal=principal, payload=payload)
        engine = self.engine
        plan = engine.select(info) if engine is not None else None
        if plan is None and native:
            return await self._native(scope, receive, out, trace, body, payload, path)
        chat = messages_to_chat(payload)
        if plan is not None:
            check_messages(chat["messages"])
        stops = payload.get("stop_sequences")
        out.model = model
        out.stop_sequences = stops if isinstance(stops, list) else None
        watcher = DisconnectWatcher(receive)
        exchange = ChatExchange(scope, receive, out, orjson.dumps(chat), chat, info,
                                self.upstreams.route(model), self.upstreams, principal,
                                trace, watcher)
        return await serve_exchange(exchange, engine, plan)

    async def _native(self, scope: Mapping[str, Any], receive: Any, send: MessagesSend,
                      trace: RequestTrace, body: bytes, payload: dict[str, Any],
                      path: str) -> int:
        """Relay the request to an Anthropic upstream as it is; the answer as it comes."""
        model = str(payload["model"])
        sub = path.removeprefix("/v1")
        stream = payload.get("stream") is True
        plan = self.upstreams.plan(model, path=sub)

        async def send_to(target: UpstreamClient, asked: str, h: dict[str, str]
                          ) -> UpstreamResponse:
            out = body if asked == model else orjson.dumps({**payload, "model": asked})
            return await target.send("POST", sub, h, out)

        watcher = DisconnectWatcher(receive)
        try:
            async with attempts(self.upstreams, trace, plan, send_to, scope["headers"],
                                stream=stream, operation="chat") as served:
                resp, up = served.resp, served.up
                send.native = True  # an Anthropic answer (or error): relayed as it is
                await send({"type": "http.response.start", "status": resp.status,
                            "headers": resp.headers})
                try:
                    async for chunk in traced_chunks(resp, up):
                        await send({"type": "http.response.body", "body": chunk,
                                    "more_body": True})
                except UpstreamError:
                    resp.close()  # the status is out: the client sees a cut body
                    return 502
                up.response(resp.status, None)
                watcher.disarm()
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return resp.status
        except asyncio.CancelledError:
            if not watcher.disconnected or uncancel() > 0:
                raise
            return 499
        finally:
            watcher.disarm()
