"""OpenAI Chat Completions <-> Anthropic Messages: pure translation functions.

No I/O here; :mod:`gateway.upstream.anthropic` does the HTTP. Named ``<from>_<to>``
after envoy ai-gateway's translators.

Request (OpenAI ``chat.completions`` body -> Anthropic ``/v1/messages`` body):

- ``system`` / ``developer`` messages (wherever they are) -> top-level ``system``;
- ``user`` / ``assistant`` / ``tool`` messages -> ``user`` / ``assistant`` turns of
  content blocks (``text``; ``image_url`` data URLs -> base64 ``image``, http(s) URLs
  -> url ``image``; ``file`` with PDF ``file_data`` -> ``document``; assistant
  ``tool_calls`` -> ``tool_use``; ``role: tool`` -> ``tool_result`` in a user turn);
  consecutive turns of one role are merged, tool results first;
- ``max_completion_tokens`` / ``max_tokens`` -> ``max_tokens`` (default
  :data:`DEFAULT_MAX_TOKENS`: Anthropic requires it); ``temperature`` (clamped to
  Anthropic's 0..1), ``top_p``, ``stop`` -> ``stop_sequences``, ``stream``;
  ``tools`` -> ``{name, description, input_schema}``; ``tool_choice`` auto / none /
  required (-> ``any``) / named (-> ``tool``); ``parallel_tool_calls: false`` ->
  ``disable_parallel_tool_use``; ``user`` (or ``safety_identifier``) ->
  ``metadata.user_id``; Anthropic's own ``top_k`` passes through.
- Refused with a 400 (they cannot be honoured, and silently ignoring them would
  change what the app gets): ``n`` > 1, ``response_format`` json_object/json_schema,
  legacy ``functions``, non-function tools, audio / file-id content parts.
- Dropped (:data:`DROPPED_FIELDS`), as is any other field Anthropic would reject.

Response: text blocks joined, ``tool_use`` -> ``tool_calls`` (arguments as a JSON
string), ``stop_reason`` -> ``finish_reason`` (:data:`FINISH_REASONS`), usage
(cache reads/writes counted into ``prompt_tokens``, reads also as
``prompt_tokens_details.cached_tokens``). ``thinking`` blocks are dropped.

Streams: :class:`StreamTranslator` turns Anthropic SSE bytes, split anywhere, into
``chat.completion.chunk`` SSE bytes as they arrive.

Errors: :func:`error_to_openai` gives the OpenAI error shape with the same status
(529 overloaded -> 503), so the OpenAI SDK raises the matching exception class.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import orjson

from gateway.errors import InvalidRequest, UpstreamError, UpstreamStreamError, error_body
from gateway.sse import DONE, SSEParser, encode_event

__all__ = [
    "ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "DROPPED_FIELDS", "FINISH_REASONS",
    "StreamTranslator", "chat_to_messages", "error_to_openai", "finish_reason",
    "include_usage", "map_status", "message_to_chat", "models_to_openai", "stream_error",
    "unsupported_path", "usage_to_openai",
]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096

DROPPED_FIELDS = frozenset({
    "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs",
    "seed", "store", "metadata", "service_tier", "stream_options", "prediction",
    "modalities", "audio", "reasoning_effort", "verbosity", "web_search_options",
    "prompt_cache_key", "function_call",
})
"""OpenAI request fields with no Anthropic counterpart, dropped without error.
(``metadata`` is the gateway's policy-selection channel, never Anthropic's;
``stream_options.include_usage`` is honoured by the gateway itself.)"""

FINISH_REASONS = {
    "end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop",
    "max_tokens": "length", "model_context_window_exceeded": "length",
    "tool_use": "tool_calls", "refusal": "content_filter",
}

# Anthropic error type -> (OpenAI error type, code).
_ERROR_TYPES: dict[str, tuple[str, str | None]] = {
    "invalid_request_error": ("invalid_request_error", None),
    "authentication_error": ("authentication_error", "invalid_api_key"),
    "permission_error": ("permission_denied", "permission_denied"),
    "not_found_error": ("invalid_request_error", "not_found"),
    "request_too_large": ("invalid_request_error", "request_too_large"),
    "rate_limit_error": ("rate_limit_error", "rate_limit_exceeded"),
    "billing_error": ("billing_error", "billing_error"),
    "api_error": ("server_error", "upstream_error"),
    "overloaded_error": ("service_unavailable", "overloaded"),
    "timeout_error": ("upstream_error", "upstream_timeout"),
}


# ---- request ------------------------------------------------------------------------------


def _text(content: Any, where: str) -> str:
    """A system/tool message's content as plain text (string or text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise InvalidRequest(f"{where}.content[{j}]: only text parts are supported "
                                     "here by an anthropic upstream", param=f"{where}.content")
            parts.append(str(part.get("text") or ""))
        return "\n".join(parts)
    raise InvalidRequest(f"{where}.content must be a string or an array of parts",
                         param=f"{where}.content")


def _data_url(url: str, where: str) -> tuple[str, str]:
    head, sep, data = url.partition(",")
    if not sep or not head.endswith(";base64"):
        raise InvalidRequest(f"{where}: data URLs must be base64-encoded", param=where)
    return head[len("data:"):-len(";base64")], data


def _part(part: Any, where: str) -> dict[str, Any] | None:
    """One OpenAI content part -> one Anthropic content block (None: empty text)."""
    if not isinstance(part, dict):
        raise InvalidRequest(f"{where} must be an object", param=where)
    kind = part.get("type")
    block: dict[str, Any]
    if kind in ("text", "refusal"):
        text = part.get(kind)
        if not isinstance(text, str):
            raise InvalidRequest(f"{where}.{kind} must be a string", param=where)
        if not text:
            return None
        block = {"type": "text", "text": text}
    elif kind == "image_url":
        spec = part.get("image_url")
        url = spec.get("url") if isinstance(spec, dict) else spec
        if not isinstance(url, str):
            raise InvalidRequest(f"{where}.image_url.url must be a string", param=where)
        if url.startswith("data:"):
            media, data = _data_url(url, where)
            block = {"type": "image",
                     "source": {"type": "base64", "media_type": media, "data": data}}
        else:
            block = {"type": "image", "source": {"type": "url", "url": url}}
    elif kind == "file" and isinstance(part.get("file"), dict) \
            and isinstance(part["file"].get("file_data"), str):
        media, data = _data_url(part["file"]["file_data"], where)
        if media != "application/pdf":
            raise InvalidRequest(f"{where}: an anthropic upstream takes PDF files only",
                                 param=where)
        block = {"type": "document",
                 "source": {"type": "base64", "media_type": media, "data": data}}
    else:
        raise InvalidRequest(f"{where}: content part type {kind!r} is not supported by an "
                             "anthropic upstream", param=where)
    if isinstance(part.get("cache_control"), dict):
        block["cache_control"] = part["cache_control"]
    return block


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        out = []
        for j, part in enumerate(content):
            block = _part(part, f"{where}.content[{j}]")
            if block is not None:
                out.append(block)
        return out
    raise InvalidRequest(f"{where}.content must be a string or an array of parts",
                         param=f"{where}.content")


def _tool_use(call: Any, where: str) -> dict[str, Any]:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise InvalidRequest(f"{where}: a tool call needs function.name", param=where)
    raw = fn.get("arguments") or "{}"
    try:
        args = orjson.loads(raw) if isinstance(raw, str) else raw
    except orjson.JSONDecodeError:
        raise InvalidRequest(f"{where}.function.arguments is not valid JSON",
                             param=where) from None
    if not isinstance(args, dict):
        raise InvalidRequest(f"{where}.function.arguments must be a JSON object", param=where)
    return {"type": "tool_use", "id": str(call.get("id") or ""), "name": fn["name"],
            "input": args}


def _tool_result(msg: dict[str, Any], where: str) -> dict[str, Any]:
    content = msg.get("content")
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": str(msg.get("tool_call_id")
                                                                       or "")}
    if isinstance(content, list):
        block["content"] = _blocks(content, where)
    else:
        block["content"] = _text(content, where)
    return block


def _turns(messages: list[Any]) -> tuple[list[str], list[dict[str, Any]]]:
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise InvalidRequest(f"{where} must be an object", param="messages")
        role = msg.get("role")
        if role in ("system", "developer"):
            text = _text(msg.get("content"), where)
            if text:
                system.append(text)
            continue
        if role == "user":
            target, blocks = "user", _blocks(msg.get("content"), where)
        elif role == "assistant":
            target, blocks = "assistant", _blocks(msg.get("content"), where)
            for k, call in enumerate(msg.get("tool_calls") or ()):
                blocks.append(_tool_use(call, f"{where}.tool_calls[{k}]"))
        elif role == "tool":
            target, blocks = "user", [_tool_result(msg, where)]
        else:
            raise InvalidRequest(f"{where}: role {role!r} is not supported by an anthropic "
                                 "upstream", param=f"{where}.role")
        if not blocks:
            continue
        if turns and turns[-1]["role"] == target:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": target, "content": blocks})
    for turn in turns:
        content = turn["content"]
        if turn["role"] == "user":  # Anthropic wants tool results before anything else
            content.sort(key=lambda b: b["type"] != "tool_result")
        if len(content) == 1 and content[0]["type"] == "text" and len(content[0]) == 2:
            turn["content"] = content[0]["text"]
    return system, turns


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise InvalidRequest("'tools' must be an array", param="tools")
    out = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(
                fn, dict) or not isinstance(fn.get("name"), str):
            raise InvalidRequest(f"tools[{i}]: only function tools are supported by an "
                                 "anthropic upstream", param=f"tools[{i}]")
        spec: dict[str, Any] = {"name": fn["name"]}
        if fn.get("description"):
            spec["description"] = fn["description"]
        params = fn.get("parameters")
        spec["input_schema"] = params if isinstance(params, dict) else {
            "type": "object", "properties": {}}
        out.append(spec)
    return out


def _tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    spec: dict[str, Any] | None
    if choice is None:
        spec = None
    elif choice in ("auto", "none"):
        spec = {"type": choice}
    elif choice == "required":
        spec = {"type": "any"}
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict) \
            and isinstance(choice["function"].get("name"), str):
        spec = {"type": "tool", "name": choice["function"]["name"]}
    else:
        raise InvalidRequest("tool_choice must be 'auto', 'none', 'required' or a named "
                             "function", param="tool_choice")
    if parallel is False:
        spec = spec or {"type": "auto"}
        if spec["type"] != "none":
            spec["disable_parallel_tool_use"] = True
    return spec


def chat_to_messages(payload: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat completion request -> an Anthropic Messages request.

    Raises :class:`InvalidRequest` (400) for what an anthropic upstream cannot do.
    """
    messages = payload.get("messages")
    if not isinstance(messages, list):
        raise InvalidRequest("'messages' must be an array of message objects.",
                             param="messages")
    n = payload.get("n")
    if n not in (None, 1):
        raise InvalidRequest("n > 1 is not supported by an anthropic upstream", param="n")
    fmt = payload.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") not in (None, "text"):
        raise InvalidRequest(f"response_format {fmt.get('type')!r} is not supported by an "
                             "anthropic upstream; use a tool with a JSON schema instead",
                             param="response_format")
    if payload.get("functions") is not None:
        raise InvalidRequest("legacy 'functions' are not supported by an anthropic upstream; "
                             "use 'tools'", param="functions")
    system, turns = _turns(messages)
    out: dict[str, Any] = {"model": payload.get("model"), "messages": turns}
    if system:
        out["system"] = "\n\n".join(system)
    limit = payload.get("max_completion_tokens")
    if limit is None:
        limit = payload.get("max_tokens")
    out["max_tokens"] = limit if limit is not None else DEFAULT_MAX_TOKENS
    temperature = payload.get("temperature")
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool):
        out["temperature"] = min(max(float(temperature), 0.0), 1.0)
    for key in ("top_p", "top_k"):
        if payload.get(key) is not None:
            out[key] = payload[key]
    stop = payload.get("stop")
    if isinstance(stop, str):
        out["stop_sequences"] = [stop]
    elif isinstance(stop, list) and stop:
        out["stop_sequences"] = [s for s in stop if isinstance(s, str)]
    tools = payload.get("tools")
    if tools:
        out["tools"] = _tools(tools)
        choice = _tool_choice(payload.get("tool_choice"), payload.get("parallel_tool_calls"))
        if choice is not None:
            out["tool_choice"] = choice
    if payload.get("stream") is True:
        out["stream"] = True
    user = payload.get("user") or payload.get("safety_identifier")
    if isinstance(user, str) and user:
        out["metadata"] = {"user_id": user}
    return out


def include_usage(payload: dict[str, Any]) -> bool:
    options = payload.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


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
    otype, code = _ERROR_TYPES.get(atype or "", ("upstream_error" if status >= 500
                                                 else "invalid_request_error", atype))
    return error_body(str(message or f"anthropic upstream answered {status}"), otype, code)


def error_to_openai(status: int, data: bytes) -> tuple[int, dict[str, Any]]:
    """An Anthropic error response -> (status, OpenAI error body)."""
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        parsed = None
    err = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(err, dict):
        snippet = data[:200].decode("utf-8", "replace").strip()
        err = {"message": f"anthropic upstream answered {status}"
                          + (f": {snippet}" if snippet else "")}
    return map_status(status), _error(status, err)


def stream_error(event: dict[str, Any]) -> UpstreamError:
    """An in-stream ``error`` event -> the gateway error that ends the client's stream."""
    err = event.get("error")
    if not isinstance(err, dict):
        err = {}
    atype = str(err.get("type") or "api_error")
    status = 503 if atype == "overloaded_error" else 502
    code = _ERROR_TYPES.get(atype, ("", atype))[1] or atype
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


def unsupported_path(path: str) -> dict[str, Any]:
    return error_body(f"{path} is not supported by an anthropic upstream", "invalid_request_error",
                      "not_supported")


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
