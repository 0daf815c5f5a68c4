"""The chat completions front door: ``POST /v1/chat/completions``.

Parse and check the request, authenticate and authorize the caller, route its model
to an upstream, and ask the engine for a policy. With none, the request is pure
pass-through (:func:`gateway.http.relay.passthrough`: the body goes upstream byte for
byte, the answer comes back as it arrives). With one, the request is handed to the
engine (``gateway.modes``) as a :class:`~gateway.http.exchange.ChatExchange`.

:class:`ChatEndpoint` is also the base of the other OpenAI front doors
(``gateway.http.responses``): a subclass names its path and
:class:`~gateway.wire.base.ResponseFormat` and checks its own body shape
(:meth:`ChatEndpoint.check_shape`, :meth:`ChatEndpoint.check_verified`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

from gateway.errors import InvalidRequest, MethodNotAllowed
from gateway.http.asgi import DisconnectWatcher, Offload, read_body, read_object
from gateway.http.auth import Authenticator, authorization
from gateway.http.exchange import ChatExchange
from gateway.http.relay import passthrough
from gateway.http.request_info import request_info
from gateway.telemetry import RequestTrace
from gateway.types import RequestInfo
from gateway.upstream.router import Upstreams
from gateway.wire.base import ResponseFormat
from gateway.wire.chat import CHAT_COMPLETIONS
from gateway.wire.messages import check_messages, json_type

__all__ = ["CHAT_PATH", "ChatEndpoint", "Engine", "offload_for", "serve_exchange"]

CHAT_PATH = "/v1/chat/completions"


class Engine(Protocol):
    """The verification engine as the front door sees it (``gateway.modes.dispatch``)."""

    def select(self, info: RequestInfo) -> Any | None:
        """Return a plan when a policy applies, else ``None`` (pure pass-through)."""

    async def handle(self, exchange: ChatExchange, plan: Any) -> None:
        """Serve the request (call upstream, verify, act, respond)."""

    def status(self) -> tuple[bool, dict[str, Any]]:
        """(ready, detail) for ``/readyz``: policies loaded, broken files, queue state."""

    def offload(self, size: int) -> Offload | None:
        """Where a request body of ``size`` bytes is parsed: another process's call
        (:data:`~gateway.http.asgi.Offload`), or None — in the relay."""


def offload_for(engine: Engine | None, size: int) -> Offload | None:
    """``engine``'s :meth:`Engine.offload` (None without an engine: pass-through)."""
    return engine.offload(size) if engine is not None else None


class ChatEndpoint:
    """The chat completions endpoint of one app."""

    path = CHAT_PATH
    fmt: ResponseFormat = CHAT_COMPLETIONS

    def __init__(self, upstreams: Upstreams, auth: Authenticator, max_body_bytes: int,
                 engine: Engine | None = None) -> None:
        self.upstreams = upstreams
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        self.engine = engine

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any,
                       trace: RequestTrace) -> int:
        # Authentication first: a caller without a key learns nothing of the route,
        # not even which methods it takes.
        principal = self.auth.authenticate(authorization(scope["headers"]))
        if scope["method"] != "POST":
            raise MethodNotAllowed(f"Use POST for {self.path}.",
                                   headers={"allow": "POST"})
        self.auth.authorize(principal, "POST", self.path)
        headers = dict(scope["headers"])
        raw_length = headers.get(b"content-length")
        body = await read_body(receive, self.max_body_bytes,
                               raw_length.decode() if raw_length is not None else None)
        payload = await read_object(body, offload_for(self.engine, len(body)))
        model = payload.get("model")
        if not isinstance(model, str) or not model:
            if model is None or model == "":
                raise InvalidRequest("You must provide a model parameter.", param="model")
            raise InvalidRequest(f"Invalid type for 'model': expected a string, but got "
                                 f"{json_type(model)} instead.", param="model",
                                 code="invalid_type")
        self.check_shape(payload)
        upstream = self.upstreams.route(model)
        info = request_info(model=model, route=self.path, headers=headers,
                            principal=principal, payload=payload)
        engine = self.engine
        plan = engine.select(info) if engine is not None else None
        if plan is not None:
            # Verification reads the messages: reject the shapes no server accepts
            # before the upstream is called (and bills). Pass-through leaves them to it.
            self.check_verified(payload)
        watcher = DisconnectWatcher(receive)
        exchange = ChatExchange(scope, receive, send, body, payload, info, upstream,
                                self.upstreams, principal, trace, watcher, fmt=self.fmt)
        return await serve_exchange(exchange, engine, plan)

    def check_shape(self, payload: dict[str, Any]) -> None:
        """Reject a body every request must not have (``messages`` not an array)."""
        if not isinstance(payload.get("messages"), list):
            raise InvalidRequest("'messages' must be an array of message objects.",
                                 param="messages")

    def check_verified(self, payload: dict[str, Any]) -> None:
        """Reject, before a verified request is sent, the shapes no server accepts."""
        check_messages(payload["messages"])


async def serve_exchange(exchange: ChatExchange, engine: Engine | None, plan: Any) -> int:
    """Serve ``exchange`` — through the engine when a policy applies, else pass-through —
    and return its status (499 when its client left)."""
    watcher = exchange.watcher
    try:
        if plan is None or engine is None:
            await passthrough(exchange)
        else:
            await engine.handle(exchange, plan)
    except asyncio.CancelledError:
        # The watcher's cancel ends here (the engine has written its record); any
        # other cancel (the server shutting down) still propagates.
        if not watcher.disconnected or uncancel() > 0:
            raise
        return 499
    finally:
        watcher.disarm()
    return exchange.status


def uncancel() -> int:
    """Withdraw the current task's one cancel request (the disconnect watcher's, now
    handled); return the cancel requests still pending."""
    task = asyncio.current_task()
    return task.uncancel() if task is not None else 0
