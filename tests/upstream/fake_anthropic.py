"""A small fake of Anthropic's API (plain ASGI) for end-to-end tests.

Serves ``POST /v1/messages/count_tokens`` (words of the messages) and
``POST /v1/messages`` (JSON, and SSE with Anthropic's documented event
sequence: message_start, content_block_start / ping / content_block_delta /
content_block_stop per block, message_delta, message_stop) and ``GET /v1/models``.
Every request is recorded (method, path, headers, parsed body).

It checks what Anthropic checks first: ``x-api-key`` (401 ``authentication_error``
when ``key`` is set and it differs) and ``anthropic-version`` (400), then that a
``temperature`` is within 0–1 (400 ``invalid_request_error``, as Anthropic answers).
What it answers is steered by the last user text:

- ``status:<code>`` -> that HTTP error in Anthropic's error shape (429 with
  ``retry-after: 7``; 529 ``overloaded_error``);
- ``hold:<n>[:<seconds>]`` -> waits until ``n`` message requests are in flight (at
  most ``seconds``, default 5), then answers; ``max_in_flight`` records the most seen
  at once (how a test sees requests sent together, without timing them);
- ``stream-error`` -> (streams) an ``error`` event after the first text delta;
- ``stream-cut`` -> (streams) the body ends after the first text delta;
- ``use-tool`` or ``tool_choice`` any/tool with tools given -> a ``tool_use`` block
  for the first (or named) tool with input ``{"city": "Paris", "days": 2}``;
- anything else -> ``You said: <text>``; ``stop_sequences`` and ``max_tokens``
  (counted in words) cut it with ``stop_sequence`` / ``max_tokens``.

Each SSE event is sent in two pieces split mid-way, so the gateway sees events
that straddle network reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["FakeAnthropic"]

MODELS = (("claude-sonnet-4-5", "2025-09-29T00:00:00Z"), ("claude-haiku-4-5",
                                                          "2025-10-01T00:00:00Z"))
ERRORS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 429: "rate_limit_error", 500: "api_error",
          529: "overloaded_error"}
TOOL_INPUT = {"city": "Paris", "days": 2}


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for msg in reversed(messages):
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or () if b.get("type") == "text"]
        if texts:
            return " ".join(texts)
        results = [b for b in content or () if b.get("type") == "tool_result"]
        if results:
            return f"tool said {results[-1].get('content')}"
    return ""


@dataclass
class FakeAnthropic:
    key: str | None = None
    url: str = ""
    """Set by whoever serves it (``http://127.0.0.1:<port>``)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def last(self) -> dict[str, Any]:
        assert self.requests, "the fake Anthropic received no request"
        return self.requests[-1]

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        payload: Any = orjson.loads(body) if body else None
        self.requests.append({"method": scope["method"], "path": scope["path"],
                              "query": scope.get("query_string", b"").decode(),
                              "headers": headers, "body": payload})
        if self.key is not None and headers.get("x-api-key") != self.key:
            return await _error(send, 401, "invalid x-api-key")
        if "anthropic-version" not in headers:
            return await _error(send, 400, "anthropic-version: header is required")
        if scope["path"] == "/v1/models" and scope["method"] == "GET":
            data = [{"type": "model", "id": m, "display_name": m, "created_at": c}
                    for m, c in MODELS]
            return await _json(send, 200, {"data": data, "has_more": False,
                                           "first_id": data[0]["id"],
                                           "last_id": data[-1]["id"]})
        if scope["path"] == "/v1/messages/count_tokens" and scope["method"] == "POST":
            words = sum(len(str(m.get("content")).split()) for m in payload["messages"])
            return await _json(send, 200, {"input_tokens": words})
        if scope["path"] == "/v1/messages" and scope["method"] == "POST":
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                return await self._messages(payload, send)
            finally:
                self.in_flight -= 1
        await _error(send, 404, f"Not found: {scope['path']}")

    async def _messages(self, req: dict[str, Any], send: Any) -> None:
        temperature = req.get("temperature")
        if temperature is not None and not 0 <= temperature <= 1:
            return await _error(send, 400, "temperature: range: 0..1")
        text = _last_user_text(req["messages"])
        if text.startswith("hold:"):
            want, _, most = text.split()[0][5:].partition(":")
            for _ in range(int(float(most or 5) * 100)):  # a caller sending one at a time
                if self.in_flight >= int(want):           # never gets there: it waits it out
                    break
                await asyncio.sleep(0.01)
        if text.startswith("status:"):
            code = int(text.split(":", 1)[1].split()[0])
            extra = [(b"retry-after", b"7")] if code == 429 else []
            return await _error(send, code, f"fake {ERRORS.get(code, 'error')}", extra)
        blocks, stop = self._answer(req, text)
        words = sum(len(str(m.get("content")).split()) for m in req["messages"])
        usage = {"input_tokens": words, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0, "output_tokens": 0}
        out_tokens = sum(len(b["text"].split()) if b["type"] == "text" else 5 for b in blocks)
        message = {"id": "msg_fake0001", "type": "message", "role": "assistant",
                   "model": req["model"], "content": blocks, "stop_reason": stop,
                   "stop_sequence": None, "usage": {**usage, "output_tokens": out_tokens}}
        if not req.get("stream"):
            return await _json(send, 200, message)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream; charset=utf-8"),
                                (b"request-id", b"req_fake_stream")]})

        async def event(name: str, data: dict[str, Any]) -> None:
            raw = f"event: {name}\ndata: ".encode() + orjson.dumps(data) + b"\n\n"
            half = len(raw) // 2
            for piece in (raw[:half], raw[half:]):
                await send({"type": "http.response.body", "body": piece, "more_body": True})

        await event("message_start", {"type": "message_start", "message": {
            **message, "content": [], "stop_reason": None, "usage": {**usage,
                                                                     "output_tokens": 1}}})
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                await event("content_block_start", {"type": "content_block_start", "index": i,
                                                    "content_block": {"type": "text",
                                                                      "text": ""}})
                await event("ping", {"type": "ping"})
                pieces = [w + " " for w in block["text"].split(" ")]
                pieces[-1] = pieces[-1][:-1]
                for n, piece in enumerate(pieces):
                    await event("content_block_delta", {
                        "type": "content_block_delta", "index": i,
                        "delta": {"type": "text_delta", "text": piece}})
                    if n == 0 and "stream-error" in text:
                        await event("error", {"type": "error", "error": {
                            "type": "overloaded_error", "message": "Overloaded"}})
                        return await _end(send)
                    if n == 0 and "stream-cut" in text:
                        return await _end(send)
            else:
                await event("content_block_start", {"type": "content_block_start", "index": i,
                                                    "content_block": {**block, "input": {}}})
                raw = orjson.dumps(block["input"]).decode()
                for piece in ("", raw[:7], raw[7:]):
                    await event("content_block_delta", {
                        "type": "content_block_delta", "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": piece}})
            await event("content_block_stop", {"type": "content_block_stop", "index": i})
        await event("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": out_tokens}})
        await event("message_stop", {"type": "message_stop"})
        await _end(send)

    def _answer(self, req: dict[str, Any], text: str) -> tuple[list[dict[str, Any]], str]:
        tools = req.get("tools") or []
        choice = req.get("tool_choice") or {}
        if tools and ("use-tool" in text or choice.get("type") in ("any", "tool")):
            name = choice.get("name") or tools[0]["name"]
            return [{"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_fake01", "name": name,
                     "input": TOOL_INPUT}], "tool_use"
        reply = f"You said: {text}"
        stop = "end_turn"
        for seq in req.get("stop_sequences") or ():
            if seq in reply:
                reply, stop = reply[:reply.index(seq)], "stop_sequence"
        words = reply.split(" ")
        if len(words) > req["max_tokens"]:
            reply, stop = " ".join(words[:req["max_tokens"]]), "max_tokens"
        return [{"type": "text", "text": reply}], stop


async def _end(send: Any) -> None:
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _json(send: Any, status: int, obj: Any,
                extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = orjson.dumps(obj)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"request-id", b"req_fake0001"), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


async def _error(send: Any, status: int, message: str,
                 extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await _json(send, status, {"type": "error", "error": {
        "type": ERRORS.get(status, "api_error"), "message": message},
        "request_id": "req_fake0001"}, extra)
