"""A scripted judge server with the structured-output behaviours of real ones.

A plain ASGI app serving ``POST …/chat/completions``, for tests of the judge's
structured-output chain, its ``n`` handling and the layers' repair retry
(``gateway.upstream.judge``, ``gateway.layers._judged``). What it does with each
request field is set per instance, as the servers measured in
``docs/design/judge-structured-output.md`` do:

- ``json_schema`` (``response_format.type == "json_schema"``): ``"enforce"`` (OpenAI,
  vLLM, llama.cpp's server), ``"reject"`` (llama-cpp-python: HTTP 500 whose body
  names ``response_format``), ``"reject-400"`` (400 naming it), ``"ignore"``, or
  ``"error"`` (503 that names nothing: an outage, not a refusal);
- ``json_object`` (with or without a ``schema``): ``"enforce"`` (llama-cpp-python:
  decoding constrained to the schema), ``"reject"`` or ``"ignore"``;
- ``n``: ``"honour"``, ``"ignore"`` (one choice) or ``"reject"`` (llama.cpp's server:
  HTTP 500 "Only one completion choice is allowed").

Replies: the next string in ``script`` while it lasts (whatever the request asks);
then, when a schema is enforced, the schema's smallest valid instance (what a
perfect constrained decoder could say); else ``prose``. A reply in ``truncate`` (by
its position, 0-based, among all replies) ends with ``finish_reason: length``. Each
request is recorded in ``bodies``; every reply reports ``usage``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.testing.scripted import read_all, serve_lifespan

__all__ = ["StructuredJudge", "schema_instance"]


def schema_instance(schema: Mapping[str, Any]) -> Any:
    """The smallest value valid under ``schema`` (the strict subset the layers use):
    first enum value, fewest items — item ``i`` takes the ``i``-th id of an enum."""
    if "enum" in schema:
        return schema["enum"][0]
    types = schema.get("type")
    kind = types[0] if isinstance(types, list) else types
    if kind == "object":
        return {k: schema_instance(s) for k, s in (schema.get("properties") or {}).items()}
    if kind == "array":
        sub = schema.get("items") or {}
        items = [schema_instance(sub) for _ in range(int(schema.get("minItems", 0)))]
        for i, item in enumerate(items):
            for key, spec in (sub.get("properties") or {}).items():
                if key in ("id", "fact", "chain") and isinstance(item, dict) \
                        and isinstance(spec, Mapping) and spec.get("enum"):
                    item[key] = spec["enum"][min(i, len(spec["enum"]) - 1)]
        return items
    if kind in ("number", "integer"):
        return 1
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "a statement"


@dataclass
class StructuredJudge:
    json_schema: str = "enforce"
    json_object: str = "enforce"
    n: str = "honour"
    prose: str = "Sure! The first statement is true, I think."
    script: list[str] = field(default_factory=list)
    truncate: set[int] = field(default_factory=set)
    usage: dict[str, int] = field(default_factory=lambda: {
        "prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120})
    bodies: list[dict[str, Any]] = field(default_factory=list)
    replies: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await serve_lifespan(receive, send)
        body = await read_all(receive)
        if scope["method"] != "POST" or not scope["path"].endswith("/chat/completions"):
            return await _send(send, 404, {"error": {"message": "no route"}})
        request = orjson.loads(body)
        with self._lock:
            self.bodies.append(request)
        fmt = request.get("response_format") or {}
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        behaviour = (self.json_schema if kind == "json_schema" else
                     self.json_object if kind == "json_object" else "ignore")
        if behaviour == "error":
            return await _send(send, 503, {"error": {"message": "overloaded",
                                                     "type": "server_error"}})
        if behaviour.startswith("reject"):
            status = 400 if behaviour == "reject-400" else 500
            return await _send(send, status, {"error": {
                "message": "1 validation error: ('body', 'response_format', 'type') "
                           "Input should be 'text' or 'json_object'",
                "type": "internal_server_error" if status == 500 else "invalid_request_error"}})
        n = int(request.get("n") or 1)
        if n != 1 and self.n == "reject":
            return await _send(send, 500, {"error": {
                "message": "Only one completion choice is allowed", "type": "server_error"}})
        schema = None
        if behaviour == "enforce":
            schema = (fmt.get("json_schema") or {}).get("schema") if kind == "json_schema" \
                else fmt.get("schema")
        choices = []
        for i in range(n if self.n == "honour" else 1):
            with self._lock:
                position = self.replies
                self.replies += 1
                text = self.script.pop(0) if self.script else None
            if text is None:
                text = (orjson.dumps(schema_instance(schema)).decode()
                        if isinstance(schema, Mapping) else
                        "{}" if behaviour == "enforce" else self.prose)
            choices.append({"index": i, "message": {"role": "assistant", "content": text},
                            "finish_reason": "length" if position in self.truncate else "stop"})
        await _send(send, 200, {"id": "chatcmpl-judge", "object": "chat.completion",
                                "created": 0, "model": request.get("model", "judge"),
                                "choices": choices, "usage": self.usage})


async def _send(send: Any, status: int, payload: Any) -> None:
    body = orjson.dumps(payload)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
