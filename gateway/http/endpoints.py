"""The endpoints of one app, and what they share: :class:`Endpoints`.

Built by the lifespan with the app's resources (the upstream clients, the
authenticator, the telemetry, the verification engine). The chat, Responses and
forward endpoints run inside the request's trace (:meth:`Endpoints.serve`): its SERVER span
starts with the request and ends with the response's status, and a gateway error
becomes its OpenAI error body.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from gateway.errors import GatewayError
from gateway.http.asgi import ClientGone, send_error
from gateway.http.auth import Authenticator
from gateway.http.chat import CHAT_PATH, ChatEndpoint, Engine
from gateway.http.forward import ForwardEndpoint
from gateway.http.forward_path import route_template
from gateway.http.messages import MessagesEndpoint, with_bearer
from gateway.http.messages_send import MessagesSend, models_page
from gateway.http.models import ModelsEndpoint
from gateway.http.responses import RESPONSES_PATH, ResponsesEndpoint
from gateway.settings import Settings
from gateway.telemetry import RequestTrace, Telemetry
from gateway.upstream.router import Upstreams

__all__ = ["Endpoints"]

Handler = Callable[[Mapping[str, Any], Any, Any, RequestTrace], Awaitable[int]]


class Endpoints:
    """The ASGI endpoints of one app, holding the lifespan's resources."""

    def __init__(self, settings: Settings, upstreams: Upstreams, auth: Authenticator,
                 telemetry: Telemetry, engine: Engine | None = None) -> None:
        self.settings = settings
        self.upstreams = upstreams
        self.auth = auth
        self.telemetry = telemetry
        self.chat = ChatEndpoint(upstreams, auth, settings.max_body_bytes, engine)
        self.responses = ResponsesEndpoint(upstreams, auth, settings.max_body_bytes, engine)
        self.forwarder = ForwardEndpoint(upstreams, auth, settings.max_body_bytes)
        self.model_list = ModelsEndpoint(upstreams, auth)
        self.messages_door = MessagesEndpoint(upstreams, auth, settings.max_body_bytes, engine)

    @property
    def engine(self) -> Engine | None:
        """The verification engine (None: pure pass-through)."""
        return self.chat.engine

    @engine.setter
    def engine(self, engine: Engine | None) -> None:
        self.chat.engine = engine
        self.messages_door.engine = engine
        self.responses.engine = engine

    async def chat_completions(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        await self.serve(self.chat, CHAT_PATH, scope, receive, send)

    async def responses_api(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        await self.serve(self.responses, RESPONSES_PATH, scope, receive, send)

    async def models(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        await self.model_list(scope, receive, send)

    async def messages(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        """``POST /v1/messages`` and ``count_tokens``: every answer, errors included, in
        Anthropic's shape (:mod:`gateway.http.messages`)."""
        await self.serve(self.messages_door, scope["path"].rstrip("/"), scope, receive,
                         MessagesSend(send))

    async def anthropic_models(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        """``GET /v1/models`` from the Anthropic SDK (it sends ``anthropic-version``):
        the merged list as Anthropic's page."""
        scope = with_bearer(scope)
        out = MessagesSend(send)  # an error in Anthropic's shape; the list rewritten here
        status = 0

        async def rewritten(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status == 200:
                message = {**message, "body": models_page(message.get("body", b""))}
            await out(message)

        await self.model_list(scope, receive, rewritten)

    async def forward(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        """Forward any other ``/v1/*`` request verbatim, streaming both ways."""
        # A route template, never the client's path: span names stay few.
        await self.serve(self.forwarder, route_template(scope["path"]), scope, receive, send)

    async def serve(self, handler: Handler, route: str, scope: Mapping[str, Any], receive: Any,
                    send: Any) -> None:
        """Run ``handler`` inside the request's trace; gateway errors become OpenAI bodies."""
        trace = self.telemetry.start_request(scope, route)
        status = 500
        error_type: str | None = None
        try:
            status = await handler(scope, receive, send, trace)
        except GatewayError as err:
            status, error_type = err.status, type(err).__name__
            await send_error(send, err)
        except ClientGone:
            status, error_type = 499, "ClientGone"
        finally:
            trace.end(status, error_type)
