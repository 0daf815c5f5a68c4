"""A scripted OpenAI-compatible upstream: no key, no network, deterministic.

Used by ``gateway demo``, ``gateway eval``, the tests and the benchmarks. It is a
plain ASGI app serving:

- ``POST /v1/chat/completions`` (JSON and SSE, ``stream_options.include_usage``,
  tool calls), ``GET /v1/models``, ``POST /v1/embeddings``, ``POST /v1/completions``;
- ``POST /v1/responses`` (the Responses API, JSON and typed SSE events, function
  calls: :mod:`gateway.testing.scripted_responses`); ``responses_api=False`` answers it
  404, as a chat-only server does.

What it answers, first match wins:

1. ``x-scripted-reply-id: <id>`` header -> ``replies[id]``;
2. a rule whose regex matches the last user message -> its reply;
3. ``default_reply`` (by default an echo of the last user message).

Behaviour can be steered per request with headers (tests use ``extra_headers``):
``x-mock-status`` / ``x-mock-retry-after`` (error answer), ``x-mock-delay-ms``
(before the headers), ``x-mock-chunk-delay-ms``, ``x-mock-end-delay-ms`` (between a
chat stream's last event and its end), ``x-mock-cut-after`` (drop the
connection after N stream chunks), ``x-mock-tool-call`` (answer with a tool
call), ``x-mock-reply`` (literal reply text), ``x-mock-gzip`` (gzip the chat
answer, JSON or SSE, whatever the request's ``accept-encoding``). Every request is
recorded in ``requests`` (method, path, query, headers, parsed JSON body).

An upstream that fails on its own (retries, fallbacks, load balancing): ``failures``
(statuses answered to the next requests, one each, before anything else: "fails N
times"), then ``fail_rate`` (that fraction of requests answered ``fail_status``, drawn
from ``random.Random(seed)``: reproducible), with ``fail_retry_after`` as their
``retry-after``.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.testing import scripted_responses

__all__ = ["Rule", "ScriptedUpstream", "read_all", "serve_lifespan"]


async def serve_lifespan(receive: Any, send: Any) -> None:
    """Acknowledge ASGI lifespan startup and shutdown (fake servers have no resources)."""
    while True:
        message = await receive()
        await send({"type": message["type"] + ".complete"})
        if message["type"] == "lifespan.shutdown":
            return


async def read_all(receive: Any) -> bytes:
    """The whole request body."""
    body = b""
    while True:
        message = await receive()
        chunk: bytes = message.get("body", b"")
        body += chunk
        if not message.get("more_body"):
            return body


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: str
    reply: str

    def matches(self, text: str) -> bool:
        return re.search(self.pattern, text, re.IGNORECASE | re.DOTALL) is not None


def _words(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text) or [text]


@dataclass
class ScriptedUpstream:
    replies: dict[str, str] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)
    default_reply: str | None = None
    models: tuple[str, ...] = ("scripted-small", "scripted-large")
    latency_ms: float = 0.0
    chunk_delay_ms: float = 0.0
    record: bool = True
    requests: list[dict[str, Any]] = field(default_factory=list)
    cancelled: int = 0
    """How many requests the client abandoned while this upstream was still answering."""
    failures: list[int] = field(default_factory=list)
    """Error statuses for the next requests, one per request, consumed in order."""
    fail_rate: float = 0.0
    fail_status: int = 503
    fail_retry_after: str | None = None
    seed: int = 0
    responses_api: bool = True
    """Whether ``POST /v1/responses`` is served (else 404, as a chat-only server)."""

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def _scripted_failure(self) -> int | None:
        if self.failures:
            return self.failures.pop(0)
        if self.fail_rate > 0 and self._rng.random() < self.fail_rate:
            return self.fail_status
        return None

    # ---- ASGI ----------------------------------------------------------------------------

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await serve_lifespan(receive, send)
        if scope["type"] != "http":
            return
        body = await read_all(receive)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            payload = orjson.loads(body) if body else {}
        except orjson.JSONDecodeError:
            payload = None
        if self.record:
            self.requests.append({"method": scope["method"], "path": scope["path"],
                                  "query": scope.get("query_string", b"").decode("latin-1"),
                                  "headers": headers, "json": payload})
        await self._answer(scope, headers, payload, receive, send)

    async def _answer(self, scope: Mapping[str, Any], headers: dict[str, str], payload: Any,
                      receive: Any, send: Any) -> None:
        """Dispatch, cancelled (and counted) if the client disconnects first.

        uvicorn never cancels an app whose client went away, and its ``send``
        silently drops messages after a disconnect, so watch ``receive``.
        """
        finished = gone = False

        async def tracked_send(message: Any) -> None:
            nonlocal finished
            if message["type"] == "http.response.body" and not message.get("more_body"):
                finished = True
            await send(message)

        task = asyncio.ensure_future(self._dispatch(scope, headers, payload, tracked_send))

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            if not finished and not task.done():
                gone = True
                task.cancel()

        watcher = asyncio.ensure_future(watch())
        try:
            await task
        except asyncio.CancelledError:
            if not gone:
                raise  # the server cancelled us: not a client disconnect
            self.cancelled += 1
        finally:
            watcher.cancel()

    async def _dispatch(self, scope: Mapping[str, Any], headers: dict[str, str],
                        payload: Any, send: Any) -> None:
        delay = float(headers.get("x-mock-delay-ms", self.latency_ms))
        if delay:
            try:
                await asyncio.sleep(delay / 1000)
            except asyncio.CancelledError:
                raise
        status = int(headers.get("x-mock-status", "200"))
        retry_after = headers.get("x-mock-retry-after")
        failure = self._scripted_failure()
        if failure is not None:
            status, retry_after = failure, retry_after or self.fail_retry_after
        if status >= 400:
            extra = [(b"x-request-id", b"req_mock_error")]
            if retry_after is not None:
                extra.append((b"retry-after", retry_after.encode()))
                extra.append((b"x-ratelimit-remaining-requests", b"0"))
            return await _json(send, status, {"error": {
                "message": f"scripted error {status}", "type": "scripted_error",
                "param": None, "code": f"scripted_{status}"}}, extra)
        path, method = scope["path"], scope["method"]
        if path == "/v1/models" and method == "GET":
            return await _json(send, 200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "scripted"}
                for m in self.models]})
        if payload is None:
            return await _json(send, 400, {"error": {"message": "invalid JSON",
                                                     "type": "invalid_request_error",
                                                     "param": None, "code": None}})
        if path == "/v1/chat/completions" and method == "POST":
            if "x-mock-gzip" in headers:
                send = _gzipped(send)
            return await self._chat(headers, payload, send)
        if path == "/v1/responses" and method == "POST" and self.responses_api:
            return await self._responses(headers, payload, send)
        if path == "/v1/embeddings" and method == "POST":
            return await self._embeddings(payload, send)
        if path == "/v1/completions" and method == "POST":
            text = self.answer(headers, str(payload.get("prompt", "")))
            return await _json(send, 200, {"id": "cmpl-scripted", "object": "text_completion",
                                           "model": payload.get("model"), "choices": [
                                               {"index": 0, "text": text, "finish_reason": "stop"}]})
        return await _json(send, 404, {"error": {"message": f"no route {path}",
                                                 "type": "invalid_request_error",
                                                 "param": None, "code": "not_found"}})

    # ---- answers -------------------------------------------------------------------------

    def answer(self, headers: Mapping[str, str], user_text: str) -> str:
        if "x-mock-reply" in headers:
            return headers["x-mock-reply"]
        rid = headers.get("x-scripted-reply-id")
        if rid is not None and rid in self.replies:
            return self.replies[rid]
        for rule in self.rules:
            if rule.matches(user_text):
                return rule.reply
        if self.default_reply is not None:
            return self.default_reply
        return f"You said: {user_text}"

    async def _chat(self, headers: dict[str, str], payload: dict[str, Any], send: Any) -> None:
        messages = payload.get("messages") or []
        user = next((m.get("content") for m in reversed(messages)
                     if isinstance(m, dict) and m.get("role") == "user"), "") or ""
        user_text = user if isinstance(user, str) else str(user)
        model = payload.get("model", "scripted")
        text = self.answer(headers, user_text)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages
                            if isinstance(m, dict))
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(text.split()),
                 "total_tokens": prompt_tokens + len(text.split())}
        cid = "chatcmpl-" + hashlib.sha1(f"{time.time_ns()}".encode()).hexdigest()[:16]
        tool = "x-mock-tool-call" in headers and payload.get("tools")
        if payload.get("stream") is True:
            return await self._stream(headers, payload, send, cid, model, text, usage, bool(tool))
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        finish = "stop"
        if tool:
            fn = payload["tools"][0]["function"]["name"]
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_scripted", "type": "function",
                "function": {"name": fn, "arguments": '{"city": "Paris"}'}}]}
            finish = "tool_calls"
        await _json(send, 200, {
            "id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish}],
            "usage": usage, "system_fingerprint": "fp_scripted",
            "x_scripted": {"note": "unknown fields survive the proxy"},
        }, [(b"x-request-id", b"req_scripted")])

    async def _stream(self, headers: dict[str, str], payload: dict[str, Any], send: Any,
                      cid: str, model: str, text: str, usage: dict[str, int],
                      tool: bool) -> None:
        chunk_delay = float(headers.get("x-mock-chunk-delay-ms", self.chunk_delay_ms)) / 1000
        cut_after = int(headers.get("x-mock-cut-after", "-1"))
        created = int(time.time())
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"), (b"x-request-id", b"req_scripted")]})

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return b"data: " + orjson.dumps({
                "id": cid, "object": "chat.completion.chunk", "created": created,
                "model": model, "system_fingerprint": "fp_scripted",
                "choices": [{"index": 0, "delta": delta, "logprobs": None,
                             "finish_reason": finish}]}) + b"\n\n"

        pieces = [chunk({"role": "assistant", "content": ""})]
        if tool:
            fn = payload["tools"][0]["function"]["name"]
            pieces.append(chunk({"tool_calls": [{"index": 0, "id": "call_scripted",
                                                 "type": "function", "function": {
                                                     "name": fn, "arguments": ""}}]}))
            pieces.append(chunk({"tool_calls": [{"index": 0, "function": {
                "arguments": '{"city": "Paris"}'}}]}))
            pieces.append(chunk({}, "tool_calls"))
        else:
            pieces += [chunk({"content": w}) for w in _words(text)]
            pieces.append(chunk({}, "stop"))
        options = payload.get("stream_options") or {}
        if options.get("include_usage"):
            pieces.append(b"data: " + orjson.dumps({
                "id": cid, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [], "usage": usage}) + b"\n\n")
        pieces.append(b"data: [DONE]\n\n")
        for n, piece in enumerate(pieces):
            if n == cut_after:
                raise ConnectionAbortedError("scripted cut")  # uvicorn drops the connection
            if chunk_delay and n:
                await asyncio.sleep(chunk_delay)
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        end_delay = float(headers.get("x-mock-end-delay-ms", "0")) / 1000
        if end_delay:  # the whole answer is out; the connection's end comes later
            await asyncio.sleep(end_delay)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _responses(self, headers: dict[str, str], payload: dict[str, Any],
                         send: Any) -> None:
        text = self.answer(headers, scripted_responses.user_text(payload))
        rid = "resp_" + hashlib.sha1(f"{time.time_ns()}".encode()).hexdigest()[:16]
        tools = payload.get("tools")
        tool = None
        if "x-mock-tool-call" in headers and isinstance(tools, list) and tools:
            tool = str(tools[0].get("name") or "tool")
        final = scripted_responses.response(payload, rid, int(time.time()), text, tool=tool)
        if payload.get("stream") is not True:
            return await _json(send, 200, final, [(b"x-request-id", b"req_scripted")])
        chunk_delay = float(headers.get("x-mock-chunk-delay-ms", self.chunk_delay_ms)) / 1000
        cut_after = int(headers.get("x-mock-cut-after", "-1"))
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"), (b"x-request-id", b"req_scripted")]})
        for n, event in enumerate(scripted_responses.events(final)):
            if n == cut_after:
                raise ConnectionAbortedError("scripted cut")  # uvicorn drops the connection
            if chunk_delay and n:
                await asyncio.sleep(chunk_delay)
            await send({"type": "http.response.body", "body": scripted_responses.sse(event),
                        "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _embeddings(self, payload: dict[str, Any], send: Any) -> None:
        inputs = payload.get("input")
        items = inputs if isinstance(inputs, list) else [inputs]
        data = []
        for i, item in enumerate(items):
            digest = hashlib.sha256(str(item).encode()).digest()
            data.append({"object": "embedding", "index": i,
                         "embedding": [b / 255 for b in digest[:8]]})
        await _json(send, 200, {"object": "list", "data": data, "model": payload.get("model"),
                                "usage": {"prompt_tokens": len(items), "total_tokens": len(items)}})


def _gzipped(send: Any) -> Any:
    """Wrap ``send``: gzip the body as it goes (each piece flushed, so SSE still streams)."""
    gz = zlib.compressobj(wbits=31)

    async def gzip_send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message["headers"] if k != b"content-length"]
            message = {**message, "headers": [*headers, (b"content-encoding", b"gzip")]}
        elif message["type"] == "http.response.body":
            more = message.get("more_body", False)
            body = gz.compress(message.get("body", b""))
            body += gz.flush(zlib.Z_SYNC_FLUSH if more else zlib.Z_FINISH)
            message = {**message, "body": body}
        await send(message)

    return gzip_send


async def _json(send: Any, status: int, obj: Any,
                extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = orjson.dumps(obj)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        *(extra or [])]})
    await send({"type": "http.response.body", "body": body, "more_body": False})
