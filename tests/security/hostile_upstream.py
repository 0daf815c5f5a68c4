"""A small misbehaving OpenAI-compatible upstream for the security tests.

It records exactly what reached it (method, ``raw_path`` as sent on the wire, the
decoded ``path``, the query string, every header) and adds ``forged`` headers to
every response it sends, so a test can check what a hostile upstream would get
through the gateway to a client.

Routes (everything under any path is answered, so a request that escapes the
gateway's ``/v1`` prefix is recorded, not refused):

- ``POST …/chat/completions``: a fixed completion, JSON or SSE (``"stream": true``);
- ``GET …/models``: one model;
- ``x-hostile-status: NNN`` request header: that status with an OpenAI error body;
- anything else: 200 ``{"object": "echo", "path": <decoded path>}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["ANSWER", "HostileUpstream"]

ANSWER = "Paris is the capital of France."


@dataclass
class HostileUpstream:
    forged: list[tuple[bytes, bytes]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def last(self) -> dict[str, Any]:
        assert self.requests, "the upstream received no request"
        return self.requests[-1]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        self.requests.append({
            "method": scope["method"], "path": scope["path"],
            "raw_path": scope.get("raw_path", b"").decode("latin-1"),
            "query": scope.get("query_string", b"").decode("latin-1"),
            "headers": headers, "body": body,
        })
        path: str = scope["path"]
        status = int(headers.get("x-hostile-status", "200"))
        if status >= 400:
            await self._send(send, status, orjson.dumps({"error": {
                "message": "hostile error", "type": "server_error", "param": None,
                "code": "hostile"}}))
            return
        if path.endswith("/chat/completions"):
            payload = orjson.loads(body or b"{}")
            if payload.get("stream"):
                await self._stream(send, str(payload.get("model", "m")))
                return
            await self._send(send, 200, orjson.dumps(_completion(str(payload.get("model", "m")))))
            return
        if path.endswith("/models"):
            await self._send(send, 200, orjson.dumps({"object": "list", "data": [
                {"id": "hostile-model", "object": "model", "created": 0, "owned_by": "x"}]}))
            return
        await self._send(send, 200, orjson.dumps({"object": "echo", "path": path}))

    async def _send(self, send: Any, status: int, body: bytes) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), *self.forged]})
        await send({"type": "http.response.body", "body": body})

    async def _stream(self, send: Any, model: str) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), *self.forged]})
        base = {"id": "chatcmpl-h", "object": "chat.completion.chunk", "created": 0,
                "model": model}
        for delta, finish in (({"role": "assistant", "content": ANSWER}, None), ({}, "stop")):
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await send({"type": "http.response.body",
                        "body": b"data: " + orjson.dumps(chunk) + b"\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


def _completion(model: str) -> dict[str, Any]:
    return {"id": "chatcmpl-h", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": ANSWER}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10}}
