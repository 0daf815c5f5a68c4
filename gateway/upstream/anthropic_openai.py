"""Anthropic Messages -> OpenAI Chat Completions: responses, errors and streams.

Pure translation, no I/O (:mod:`gateway.upstream.anthropic` does the HTTP); the
request side is :mod:`gateway.upstream.openai_anthropic`. Named ``<from>_<to>``
after envoy ai-gateway's translators.

Response: text blocks joined, ``tool_use`` -> ``tool_calls`` (arguments as a JSON
string), ``stop_reason`` -> ``finish_reason`` (:data:`FINISH_REASONS`), usage
(cache reads/writes counted into ``prompt_tokens``, reads also as
``prompt_tokens_details.cached_tokens``). ``thinking`` blocks are dropped.

Streams: :class:`StreamTranslator` turns Anthropic SSE bytes, split anywhere, into
``chat.completion.chunk`` SSE bytes as they arrive.

Errors: :func:`error_to_openai` gives the OpenAI error shape with the same status
(529 overloaded -> 503), so the OpenAI SDK raises the matching exception class.

Models: :func:`models_to_openai` turns ``GET /v1/models`` into OpenAI's model list.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import orjson

from gateway.errors import UpstreamError, UpstreamStreamError, error_body
from gateway.wire.anthropic_tables import ERROR_TYPES, FINISH_REASONS
from gateway.wire.sse import DONE, SSEParser, encode_event

__all__ = [
    "FINISH_REASONS", "StreamTranslator", "error_to_openai", "finish_reason", "map_status",
    "message_to_chat", "models_to_openai", "stream_error", "usage_to_openai",
]



# ---- response -----------------------------------------------------------------------------


def finish_reason(stop_reason: Any) -> str:
    return FINISH_REASONS.get(stop_reason, "stop") if isinstance(stop_reason, str) else "stop"


def usage_to_openai(usage: Any) -> dict[str, Any]:
    u = usage if isinstance(usage, dict) else {}

    def n(key: str) -> int:
        value = u.get(key)
        return value if isinstance(value, int) else 0

    cached, written = n("cache_read_input_tokens"), n("cache_creation_input_tokens")
    prompt, completion = n("input_tokens") + cached + written, n("output_tokens")
    out: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": prompt + completion}
    if cached or written:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def _arguments(value: Any) -> str:
    return orjson.dumps(value if isinstance(value, dict) else {}).decode()


def message_to_chat(msg: dict[str, Any], created: int | None = None) -> dict[str, Any]:
    """An Anthropic Message -> an OpenAI ``chat.completion``."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in msg.get("content") or ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text") or ""))
        elif block.get("type") == "tool_use":
            calls.append({"id": block.get("id"), "type": "function",
                          "function": {"name": block.get("name"),
                                       "arguments": _arguments(block.get("input"))}})
    message: dict[str, Any] = {"role": "assistant",
                               "content": "".join(texts) if texts or not calls else None,
                               "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": msg.get("id"), "object": "chat.completion",
        "created": int(time.time()) if created is None else created,
        "model": msg.get("model"),
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": finish_reason(msg.get("stop_reason"))}],
        "usage": usage_to_openai(msg.get("usage")),
    }


def map_status(status: int) -> int:
    """Anthropic's 529 (overloaded) has no OpenAI twin: 503 is what SDKs retry on."""
    return 503 if status == 529 else status


def _error(status: int, err: Any) -> dict[str, Any]:
    atype = err.get("type") if isinstance(err, dict) else None
    message = err.get("message") if isinstance(err, dict) else None
    otype, code = ERROR_TYPES.get(atype or "", ("upstream_error" if status >= 500
                                                 else "invalid_request_error", atype))
    return error_body(str(message or f"anthropic upstream answered {status}"), otype, code)


def error_to_openai(status: int, data: bytes) -> tuple[int, dict[str, Any]]:
    """An Anthropic error response -> (status, OpenAI error body)."""
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        parsed = None
    err = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(err, dict):  # never quoted: it may be a proxy's page, or echo a key
        err = {"message": f"anthropic upstream answered {status} with a body that is not "
                          f"an error object"}
    return map_status(status), _error(status, err)


def stream_error(event: dict[str, Any]) -> UpstreamError:
    """An in-stream ``error`` event -> the gateway error that ends the client's stream."""
    err = event.get("error")
    if not isinstance(err, dict):
        err = {}
    atype = str(err.get("type") or "api_error")
    status = 503 if atype == "overloaded_error" else 502
    code = ERROR_TYPES.get(atype, ("", atype))[1] or atype
    return UpstreamError(str(err.get("message") or "anthropic stream error"), code=code,
                         status=status)


def _epoch(value: Any) -> int:
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value).timestamp())
        except ValueError:
            return 0
    return 0


def models_to_openai(data: dict[str, Any]) -> dict[str, Any]:
    """Anthropic ``GET /v1/models`` -> OpenAI's model list."""
    return {"object": "list", "data": [
        {"id": m["id"], "object": "model", "created": _epoch(m.get("created_at")),
         "owned_by": "anthropic"}
        for m in data.get("data") or () if isinstance(m, dict) and isinstance(m.get("id"), str)
    ]}


# ---- stream -------------------------------------------------------------------------------


class StreamTranslator:
    """Anthropic SSE bytes in, OpenAI ``chat.completion.chunk`` SSE bytes out.

    :meth:`feed` takes whatever arrived (events may be split anywhere) and returns
    the chunks it completes (possibly ``b""``); it stops at ``message_stop``
    (:attr:`done`) or at an ``error`` event (:attr:`error`). Call :meth:`finish` at the
    end: it raises that error as :class:`UpstreamError`, or
    :class:`UpstreamStreamError` if the stream ended before ``message_stop``.
    """

    def __init__(self, *, include_usage: bool = False, created: int | None = None,
                 model: str = "") -> None:
        self.include_usage = include_usage
        self.created = int(time.time()) if created is None else created
        self.id = ""
        self.model = model
        self.done = False
        self.error: UpstreamError | None = None
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self._parser = SSEParser()
        self._tools: dict[int, list[Any]] = {}  # block index -> [tool index, args sent]

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        obj: dict[str, Any] = {
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish}],
        }
        if self.include_usage:
            obj["usage"] = None
        return encode_event(obj)

    def _call(self, index: int, **fields: Any) -> bytes:
        return self._chunk({"tool_calls": [{"index": index, **fields}]})

    def feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        for payload in self._parser.feed(data):
            if self.done or self.error is not None:
                break
            try:
                event = orjson.loads(payload)
            except orjson.JSONDecodeError:
                continue
            if isinstance(event, dict):
                self._event(event, out)
        return b"".join(out)

    @property
    def pending(self) -> int:
        """Bytes of an event not complete yet (held until its blank line arrives)."""
        return self._parser.pending

    def finish(self) -> bytes:
        if self.error is not None:
            raise self.error
        if not self.done:
            raise UpstreamStreamError("anthropic stream ended before message_stop")
        return b""

    def _event(self, event: dict[str, Any], out: list[bytes]) -> None:
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta" and delta.get("text"):
                out.append(self._chunk({"content": delta["text"]}))
            elif dtype == "input_json_delta" and delta.get("partial_json"):
                slot = self._tools.get(event.get("index", -1))
                if slot is not None:
                    slot[1] = True
                    out.append(self._call(slot[0], function={"arguments":
                                                             delta["partial_json"]}))
        elif kind == "message_start":
            msg = event.get("message") or {}
            self.id = str(msg.get("id") or self.id)
            self.model = str(msg.get("model") or self.model)
            self.usage.update(msg.get("usage") or {})
            out.append(self._chunk({"role": "assistant", "content": ""}))
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                slot = [len(self._tools), False]
                self._tools[event.get("index", len(self._tools))] = slot
                out.append(self._call(slot[0], id=block.get("id"), type="function",
                                      function={"name": block.get("name"), "arguments": ""}))
                if block.get("input"):
                    slot[1] = True
                    out.append(self._call(slot[0], function={
                        "arguments": _arguments(block["input"])}))
            elif block.get("type") == "text" and block.get("text"):
                out.append(self._chunk({"content": block["text"]}))
        elif kind == "content_block_stop":
            slot = self._tools.get(event.get("index", -1))
            if slot is not None and not slot[1]:  # no input at all: still valid JSON
                slot[1] = True
                out.append(self._call(slot[0], function={"arguments": "{}"}))
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            self.stop_reason = delta.get("stop_reason") or self.stop_reason
            self.usage.update({k: v for k, v in (event.get("usage") or {}).items()
                               if v is not None})
            out.append(self._chunk({}, finish_reason(self.stop_reason)))
        elif kind == "message_stop":
            self.done = True
            if self.include_usage:
                out.append(encode_event({
                    "id": self.id, "object": "chat.completion.chunk", "created": self.created,
                    "model": self.model, "choices": [],
                    "usage": usage_to_openai(self.usage)}))
            out.append(DONE)
        elif kind == "error":
            self.error = stream_error(event)
        # ping and unknown event types: nothing to send
