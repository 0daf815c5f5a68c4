"""Anthropic Messages requests -> OpenAI chat completion requests: pure.

The Messages front door in front of OpenAI-compatible upstreams; the mirror image of
:mod:`gateway.upstream.openai_anthropic`. Responses and the verification shapes are
:mod:`gateway.wire.anthropic_response`, streams :mod:`gateway.wire.anthropic_stream`,
errors :mod:`gateway.wire.anthropic_errors`.

Request (:func:`messages_to_chat`, Anthropic ``/v1/messages`` body -> OpenAI
``chat.completions`` body):

- ``system`` (string, or text blocks joined by a blank line) -> one ``system`` message;
- ``user`` turns: ``text`` -> text parts (a lone one -> a string); ``image`` base64 ->
  a data URL, url -> the URL; ``document`` base64 PDF -> a ``file`` part, plain-text
  or content-block source -> text; ``tool_result`` -> a ``role: tool`` message, placed
  before the rest of its turn (OpenAI wants tool answers right after the call); images
  inside a tool result, which a tool message cannot carry, follow in a user message;
- ``assistant`` turns: text blocks joined -> ``content``; ``tool_use`` ->
  ``tool_calls`` (``input`` as a JSON string); ``thinking`` / ``redacted_thinking``
  blocks dropped (no OpenAI counterpart; their signatures mean nothing elsewhere);
- ``max_tokens`` -> ``max_tokens`` (or ``max_completion_tokens``: the caller's
  choice per upstream), ``temperature``, ``top_p``, ``top_k`` (OpenAI-compatible servers
  such as vLLM and llama.cpp take it; the caller may drop it), ``stop_sequences`` ->
  ``stop``, ``stream`` (+ ``stream_options.include_usage``, so the stream's
  ``message_delta`` can carry usage), ``tools`` -> function tools (``input_schema`` ->
  ``parameters``, ``strict`` kept), ``tool_choice`` auto / any (-> ``required``) /
  tool (-> named function) / none, ``disable_parallel_tool_use`` ->
  ``parallel_tool_calls: false``, ``metadata.user_id`` -> ``user``;
- refused with a 400: server tools (``web_search_…``, ``bash_…``, …), file-id and
  URL documents, ``container``, ``mcp_servers``, and content blocks of other types;
- dropped (:data:`DROPPED_FIELDS`): ``thinking``, ``service_tier``, ``cache_control``
  and whatever else the request carries: an OpenAI upstream would reject it.

``metadata`` itself is not sent on: policy selection reads it from the Anthropic
request (the caller hands it to ``RequestInfo``), and Anthropic allows only ``user_id``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import orjson

from gateway.errors import InvalidRequest

__all__ = ["DROPPED_FIELDS", "MaxTokensField", "messages_to_chat"]

DROPPED_FIELDS = frozenset({"thinking", "service_tier", "cache_control", "inference_geo"})
"""Anthropic request fields with no OpenAI counterpart, dropped without error (as is
anything else not translated)."""

_REFUSED_FIELDS = ("container", "mcp_servers", "context_management")

MaxTokensField = Literal["max_tokens", "max_completion_tokens"]


def _invalid(message: str, param: str) -> InvalidRequest:
    return InvalidRequest(f"{param}: {message}", param=param)


# ---- request ----------------------------------------------------------------------------


def _text_of(block: Mapping[str, Any], where: str) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        raise _invalid("a text block needs a string 'text'", where)
    return text


def _image(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    src = block.get("source")
    kind = src.get("type") if isinstance(src, Mapping) else None
    if kind == "base64" and isinstance(src, Mapping) and isinstance(src.get("data"), str) \
            and isinstance(src.get("media_type"), str):
        url = f"data:{src['media_type']};base64,{src['data']}"
    elif kind == "url" and isinstance(src, Mapping) and isinstance(src.get("url"), str):
        url = src["url"]
    else:
        raise _invalid(f"image source {kind!r} is not supported by an OpenAI-compatible "
                       "upstream (base64 or url only)", where)
    return {"type": "image_url", "image_url": {"url": url}}


def _document(block: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    src = block.get("source")
    kind = src.get("type") if isinstance(src, Mapping) else None
    if not isinstance(src, Mapping):
        raise _invalid("a document needs a source", where)
    if kind == "base64" and src.get("media_type") == "application/pdf" \
            and isinstance(src.get("data"), str):
        name = block.get("title") if isinstance(block.get("title"), str) else "document.pdf"
        return [{"type": "file", "file": {
            "filename": name, "file_data": f"data:application/pdf;base64,{src['data']}"}}]
    if kind == "text" and isinstance(src.get("data"), str):
        return [{"type": "text", "text": src["data"]}]
    if kind == "content" and isinstance(src.get("content"), (str, list)):
        inner = src["content"]
        if isinstance(inner, str):
            return [{"type": "text", "text": inner}]
        return [_user_part(b, f"{where}.source.content[{j}]") for j, b in enumerate(inner)]
    raise _invalid(f"document source {kind!r} is not supported by an OpenAI-compatible "
                   "upstream (base64 PDF, text or content only)", where)


def _user_part(block: Any, where: str) -> dict[str, Any]:
    """A text or image block -> one OpenAI content part."""
    if not isinstance(block, Mapping):
        raise _invalid("a content block must be an object", where)
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": _text_of(block, where)}
    if kind == "image":
        return _image(block, where)
    raise _invalid(f"content block type {kind!r} is not supported here", where)


def _collapse(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and parts[0]["type"] == "text":
        return str(parts[0]["text"])
    return parts


def _tool_result(block: Mapping[str, Any], where: str
                 ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A ``tool_result`` -> (the tool message, image parts it carried)."""
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise _invalid("a tool_result needs a string 'tool_use_id'", where)
    content = block.get("content")
    texts: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    if isinstance(content, str):
        texts.append({"type": "text", "text": content})
    elif isinstance(content, list):
        for j, inner in enumerate(content):
            part = _user_part(inner, f"{where}.content[{j}]")
            (images if part["type"] == "image_url" else texts).append(part)
    elif content is not None:
        raise _invalid("a tool_result's content must be a string or an array", where)
    body: str | list[dict[str, Any]] = "" if not texts else _collapse(texts)
    return {"role": "tool", "tool_call_id": call_id, "content": body}, images


def _user(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    if not isinstance(content, list):
        raise _invalid("content must be a string or an array of blocks", where)
    tools: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "tool_result":
            assert isinstance(block, Mapping)
            message, carried = _tool_result(block, at)
            tools.append(message)
            images.extend(carried)
        elif kind == "document":
            assert isinstance(block, Mapping)
            parts.extend(_document(block, at))
        else:
            part = _user_part(block, at)
            if part["type"] != "text" or part["text"]:
                parts.append(part)
    out = list(tools)
    if images:
        out.append({"role": "user", "content": images})
    if parts:
        out.append({"role": "user", "content": _collapse(parts)})
    return out


def _assistant(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"role": "assistant", "content": content}] if content else []
    if not isinstance(content, list):
        raise _invalid("content must be a string or an array of blocks", where)
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            assert isinstance(block, Mapping)
            texts.append(_text_of(block, at))
        elif kind == "tool_use":
            assert isinstance(block, Mapping)
            calls.append(_tool_call(block, at))
        elif kind in ("thinking", "redacted_thinking"):
            continue
        else:
            raise _invalid(f"content block type {kind!r} is not supported in an assistant "
                           "turn by an OpenAI-compatible upstream", at)
    text = "".join(texts)
    if not text and not calls:
        return []
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return [message]


def _tool_call(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    name, call_id, args = block.get("name"), block.get("id"), block.get("input", {})
    if not isinstance(name, str) or not isinstance(call_id, str):
        raise _invalid("a tool_use needs string 'id' and 'name'", where)
    if not isinstance(args, Mapping):
        raise _invalid("a tool_use's input must be an object", where)
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": orjson.dumps(dict(args)).decode()}}


def _system(system: Any) -> str:
    if isinstance(system, str):
        return system
    if not isinstance(system, list):
        raise _invalid("must be a string or an array of text blocks", "system")
    texts = []
    for i, block in enumerate(system):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            raise _invalid("only text blocks are allowed in system", f"system[{i}]")
        texts.append(_text_of(block, f"system[{i}]"))
    return "\n\n".join(texts)


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise _invalid("must be an array", "tools")
    out = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, Mapping):
            raise _invalid("a tool must be an object", where)
        if tool.get("type") not in (None, "custom"):
            raise _invalid(f"tool type {tool.get('type')!r} (a server tool) is not supported "
                           "by an OpenAI-compatible upstream", where)
        if not isinstance(tool.get("name"), str):
            raise _invalid("a tool needs a string 'name'", where)
        schema = tool.get("input_schema")
        fn: dict[str, Any] = {"name": tool["name"], "parameters": dict(schema) if isinstance(
            schema, Mapping) else {"type": "object", "properties": {}}}
        if isinstance(tool.get("description"), str):
            fn["description"] = tool["description"]
        if isinstance(tool.get("strict"), bool):
            fn["strict"] = tool["strict"]
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(choice: Any, out: dict[str, Any]) -> None:
    if choice is None:
        return
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if kind in ("auto", "none"):
        out["tool_choice"] = kind
    elif kind == "any":
        out["tool_choice"] = "required"
    elif kind == "tool" and isinstance(choice, Mapping) and isinstance(choice.get("name"), str):
        out["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        raise _invalid("must be {type: auto|any|none} or {type: tool, name}", "tool_choice")
    if kind != "none" and isinstance(choice, Mapping) \
            and choice.get("disable_parallel_tool_use") is True:
        out["parallel_tool_calls"] = False


def messages_to_chat(payload: Mapping[str, Any], *,
                     max_tokens_field: MaxTokensField = "max_tokens",
                     keep_top_k: bool = True) -> dict[str, Any]:
    """An Anthropic Messages request -> an OpenAI chat completion request.

    Raises :class:`InvalidRequest` (400) for what is malformed or cannot be honoured.
    """
    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("Field required (a model name)", "model")
    limit = payload.get("max_tokens")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise _invalid("Field required (an integer >= 1)", "max_tokens")
    messages = payload.get("messages")
    if not isinstance(messages, list):
        raise _invalid("Field required (an array of messages)", "messages")
    for key in _REFUSED_FIELDS:
        if payload.get(key) is not None:
            raise _invalid("is not supported by an OpenAI-compatible upstream", key)
    turns: list[dict[str, Any]] = []
    system = payload.get("system")
    if system is not None:
        text = _system(system)
        if text:
            turns.append({"role": "system", "content": text})
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, Mapping):
            raise _invalid("a message must be an object", where)
        role = msg.get("role")
        if role == "user":
            turns.extend(_user(msg.get("content"), where))
        elif role == "assistant":
            turns.extend(_assistant(msg.get("content"), where))
        else:
            raise _invalid(f"role {role!r} is not 'user' or 'assistant'", f"{where}.role")
    out: dict[str, Any] = {"model": model, "messages": turns, max_tokens_field: limit}
    for key in ("temperature", "top_p", *(("top_k",) if keep_top_k else ())):
        value = payload.get(key)
        if value is not None:
            out[key] = value
    stops = payload.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise _invalid("must be an array of strings", "stop_sequences")
        if stops:
            out["stop"] = list(stops)
    tools = payload.get("tools")
    if tools:
        out["tools"] = _tools(tools)
        _tool_choice(payload.get("tool_choice"), out)
    if payload.get("stream") is True:
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    metadata = payload.get("metadata")
    user = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    if isinstance(user, str) and user:
        out["user"] = user
    return out
