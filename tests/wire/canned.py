"""A real server that answers every request with canned bytes, and the official SDK in
front of it: the wire modules' outputs are read by the SDK's own parsers, over HTTP.

``with canned_server() as srv: srv.reply(body, content_type); srv.client()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import openai

from gateway.testing.servers import ServerThread

SSE = "text/event-stream"
JSON = "application/json"


@dataclass
class CannedApp:
    """ASGI app: every request gets ``body`` with ``content_type`` (status 200)."""

    body: bytes = b""
    content_type: str = JSON
    requests: list[bytes] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.requests.append(body)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", self.content_type.encode()),
                                (b"content-length", str(len(self.body)).encode())]})
        await send({"type": "http.response.body", "body": self.body})


@dataclass
class Canned:
    app: CannedApp
    server: ServerThread
    clients: list[openai.OpenAI] = field(default_factory=list)

    def reply(self, body: bytes, content_type: str = SSE) -> None:
        self.app.body, self.app.content_type = body, content_type

    def client(self) -> openai.OpenAI:
        c = openai.OpenAI(base_url=self.server.url + "/v1", api_key="sk-test", max_retries=0)
        self.clients.append(c)
        return c


@contextmanager
def canned_server() -> Iterator[Canned]:
    app = CannedApp()
    with ServerThread(app) as server:
        canned = Canned(app, server)
        try:
            yield canned
        finally:
            for c in canned.clients:
                c.close()
