"""OpenAI Chat Completions -> Anthropic Messages: the request side, pure functions.

No I/O here; :mod:`gateway.upstream.anthropic` does the HTTP. Named ``<from>_<to>``
after envoy ai-gateway's translators; the way back (responses, errors, streams) is
:mod:`gateway.upstream.anthropic_openai`.

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

Paths an anthropic upstream cannot serve get :func:`unsupported_path`'s error body.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import InvalidRequest, error_body

__all__ = [
    "ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "DROPPED_FIELDS", "chat_to_messages",
    "include_usage", "unsupported_path",
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


def unsupported_path(path: str) -> dict[str, Any]:
    return error_body(f"{path} is not supported by an anthropic upstream", "invalid_request_error",
                      "not_supported")
