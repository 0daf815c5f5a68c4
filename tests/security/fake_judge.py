"""A recording, OpenAI-compatible judge server for the security tests.

Every ``POST …/chat/completions`` is answered 200 with ``reply`` as the content of
each of the ``n`` choices asked for (or with ``raw_body`` as the whole body) and a
fixed ``usage`` per call, and is counted: ``calls`` is what the judge *received*,
which the gateway's audit record must account for exactly.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.testing.scripted import read_all, serve_lifespan
from gateway.testing.servers import ServerThread

__all__ = ["FakeJudge", "serve_judge"]


@dataclass
class FakeJudge:
    reply: str = "{}"
    raw_body: bytes | None = None
    usage: dict[str, Any] = field(default_factory=lambda: {
        "prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120})
    bodies: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.bodies)

    def reset(self) -> None:
        with self._lock:
            self.bodies.clear()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await serve_lifespan(receive, send)
        body = await read_all(receive)
        if scope["method"] != "POST" or not scope["path"].endswith("/chat/completions"):
            return await _send(send, 404, b'{"error": {"message": "no route"}}')
        request = orjson.loads(body)
        with self._lock:
            self.bodies.append(request)
        if self.raw_body is not None:
            return await _send(send, 200, self.raw_body)
        n = int(request.get("n") or 1)
        await _send(send, 200, orjson.dumps({
            "id": "chatcmpl-judge", "object": "chat.completion", "created": 0,
            "model": request.get("model", "judge"),
            "choices": [{"index": i, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": self.reply}}
                        for i in range(n)],
            "usage": self.usage}))


async def _send(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


@contextmanager
def serve_judge(judge: FakeJudge) -> Iterator[str]:
    """Run ``judge`` under uvicorn; yields its OpenAI-style base URL (``…/v1``)."""
    with ServerThread(judge) as server:
        yield server.url + "/v1"
