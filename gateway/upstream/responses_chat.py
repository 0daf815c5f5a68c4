"""OpenAI Responses -> OpenAI Chat Completions: the request side, pure functions.

For upstreams without ``/v1/responses`` (an OpenAI-compatible server that only has
chat completions; chained with :mod:`gateway.upstream.openai_anthropic`, an Anthropic
upstream). Named ``<from>_<to>``; the way back (responses, streams) is
:mod:`gateway.upstream.chat_responses`. Exact for the text-and-function-tools subset;
everything else is refused with a 400 naming the field, never dropped silently.

Translated (Responses field -> chat field):

- ``instructions`` -> a first ``system`` message; ``input`` (string or items) ->
  ``messages`` (:mod:`gateway.wire.responses_input`: message items, ``input_text`` /
  ``output_text`` / ``input_image`` (URL) parts, ``function_call`` -> assistant
  ``tool_calls``, ``function_call_output`` -> ``role: tool``; ``reasoning`` items are
  left out: chat has no place for them);
- ``tools`` (``type: function`` only) -> ``{"type": "function", "function": {name,
  description, parameters, strict}}``; ``tool_choice`` ``auto`` / ``none`` /
  ``required`` / ``{"type": "function", "name"}``; ``parallel_tool_calls``;
- ``max_output_tokens`` -> ``max_tokens`` (or ``max_completion_tokens``:
  ``max_tokens_field``); ``text.format`` ``json_schema`` / ``json_object`` / ``text``
  -> ``response_format``; ``text.verbosity`` -> ``verbosity``; ``reasoning.effort``
  -> ``reasoning_effort``;
- as they are: ``model``, ``temperature``, ``top_p``, ``metadata``, ``user``,
  ``safety_identifier``, ``prompt_cache_key``, ``prompt_cache_retention``,
  ``service_tier``, and fields no OpenAI API defines (vendor extensions, forwarded
  untouched as on the chat path);
- ``stream: true`` -> ``stream: true`` with ``stream_options.include_usage`` (a
  Responses stream always ends with usage).

Dropped, at their no-op values only: ``store: false``, ``background: false``,
``truncation: "disabled"``, ``include: []``, ``top_logprobs: 0``, and
``stream_options`` (its one option, ``include_obfuscation``, pads delta events: the
translated stream has no padding to drop).

Refused (:data:`REFUSED`, and any value of the fields above other than the listed
ones): built-in tools (web/file search, computer use, code interpreter, image
generation, MCP, shell, apply_patch, custom tools, tool search) and their items;
``previous_response_id``, ``conversation``, ``prompt`` and ``item_reference`` /
``compaction`` items (server-side state a chat upstream does not have);
``store: true`` (nothing is stored: a later ``previous_response_id`` could not refer
to it); ``background: true``; ``truncation: "auto"``; ``include`` (encrypted
reasoning, logprobs, search results); ``top_logprobs``; ``max_tool_calls``;
``reasoning.summary``; ``input_file`` / ``input_audio`` parts and file-id images;
``allowed_tools`` tool choices.

Not exact even in the subset (documented, not refused): a function tool without
``strict`` is strict by default in the Responses API and not in chat completions; the
translation sends ``strict`` only when the request sets it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from gateway.errors import InvalidRequest
from gateway.wire.responses_input import convert_input

__all__ = ["NO_OP", "PASSED", "REFUSED", "TRANSLATED", "responses_to_chat"]

TRANSLATED = frozenset({"model", "input", "instructions", "tools", "tool_choice",
                        "parallel_tool_calls", "max_output_tokens", "text", "reasoning",
                        "stream"})
PASSED = frozenset({"temperature", "top_p", "metadata", "user", "safety_identifier",
                    "prompt_cache_key", "prompt_cache_retention", "service_tier"})
NO_OP: Mapping[str, tuple[Any, ...]] = {
    "store": (False, None), "background": (False, None), "truncation": ("disabled", None),
    "include": ((), [], None), "top_logprobs": (0, None), "max_tool_calls": (None,),
    "stream_options": (), "previous_response_id": (None,), "conversation": (None,),
    "prompt": (None,)}
"""Fields dropped at these values (``stream_options``: any value)."""
REFUSED = frozenset({"access_programs", "background_options", "context_management", "image",
                     "moderation", "prompt_cache_options"})
"""Responses API fields with no chat counterpart, refused whenever set (not null)."""

_FUNCTION_KEYS = frozenset({"type", "name", "description", "parameters", "strict"})
_FORMATS = frozenset({"text", "json_object", "json_schema"})


def _refuse(param: str, what: str, code: str = "unsupported_value") -> InvalidRequest:
    return InvalidRequest(f"{what} cannot be sent to this model: its upstream has no "
                          f"Responses API, and the request is translated to chat "
                          f"completions, which has no equivalent.", param=param, code=code)


def _unsupported(param: str, what: str) -> None:
    raise _refuse(param, f"'{param}' ({what})")


def _tool(tool: Any, i: int) -> dict[str, Any]:
    param = f"tools[{i}]"
    if not isinstance(tool, Mapping) or tool.get("type") != "function":
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        raise _refuse(f"{param}.type", f"A {kind!r} tool")
    extra = sorted(k for k, v in tool.items() if k not in _FUNCTION_KEYS and v is not None)
    if extra:
        raise _refuse(f"{param}.{extra[0]}", f"The function tool field '{extra[0]}'")
    if not isinstance(tool.get("name"), str):
        raise InvalidRequest(f"Missing required parameter: '{param}.name'.",
                             param=f"{param}.name", code="missing_required_parameter")
    function = {k: tool[k] for k in ("name", "description", "parameters", "strict")
                if tool.get(k) is not None}
    return {"type": "function", "function": function}


def _tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, Mapping) and choice.get("type") == "function" \
            and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    kind = choice.get("type") if isinstance(choice, Mapping) else choice
    raise _refuse("tool_choice", f"The tool choice {kind!r}")


def _text(text: Any, out: dict[str, Any]) -> None:
    if not isinstance(text, Mapping):
        raise InvalidRequest("Invalid type for 'text': expected an object.", param="text",
                             code="invalid_type")
    for key, value in text.items():
        if value is None:
            continue
        if key == "verbosity":
            out["verbosity"] = value
        elif key == "format":
            out.update(_format(value))
        else:
            raise _refuse(f"text.{key}", f"'text.{key}'")


def _format(fmt: Any) -> dict[str, Any]:
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if kind not in _FORMATS:
        raise _refuse("text.format.type", f"The text format {kind!r}")
    if kind == "text":
        return {}
    if kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    schema = {k: fmt[k] for k in ("name", "schema", "description", "strict")
              if fmt.get(k) is not None}
    return {"response_format": {"type": "json_schema", "json_schema": schema}}


def _reasoning(reasoning: Any, out: dict[str, Any]) -> None:
    if not isinstance(reasoning, Mapping):
        raise InvalidRequest("Invalid type for 'reasoning': expected an object.",
                             param="reasoning", code="invalid_type")
    for key, value in reasoning.items():
        if value is None:
            continue
        if key != "effort":
            raise _refuse(f"reasoning.{key}", f"'reasoning.{key}'")
        out["reasoning_effort"] = value


def responses_to_chat(body: Mapping[str, Any], *,
                      max_tokens_field: Literal["max_tokens", "max_completion_tokens"]
                      = "max_tokens") -> dict[str, Any]:
    """The chat completions body for a Responses request body. Raises
    :class:`InvalidRequest` (400, ``param`` naming the field) for what cannot be
    translated exactly; the messages a chat upstream gets are the ones
    :func:`gateway.wire.responses.read_request` shows the layers (but strict)."""
    out: dict[str, Any] = {}
    for key, value in body.items():
        if key in NO_OP:
            if key != "stream_options" and value not in NO_OP[key]:
                raise _refuse(key, f"'{key}': {value!r}", code="unsupported_parameter")
        elif key in REFUSED:
            if value is not None:
                raise _refuse(key, f"'{key}'", code="unsupported_parameter")
        elif key in PASSED or key not in TRANSLATED:
            out[key] = value  # same meaning in both APIs, or a vendor field
    messages, _dropped, _unseen = convert_input(body, _unsupported)
    if not messages:
        raise InvalidRequest("Missing required parameter: 'input'.", param="input",
                             code="missing_required_parameter")
    out["model"] = body.get("model")
    out["messages"] = messages
    tools = body.get("tools")
    if tools:
        if not isinstance(tools, list):
            raise InvalidRequest("Invalid type for 'tools': expected an array.", param="tools",
                                 code="invalid_type")
        out["tools"] = [_tool(tool, i) for i, tool in enumerate(tools)]
    if body.get("tool_choice") is not None:
        out["tool_choice"] = _tool_choice(body["tool_choice"])
    if body.get("parallel_tool_calls") is not None:
        out["parallel_tool_calls"] = body["parallel_tool_calls"]
    if body.get("max_output_tokens") is not None:
        out[max_tokens_field] = body["max_output_tokens"]
    if body.get("text") is not None:
        _text(body["text"], out)
    if body.get("reasoning") is not None:
        _reasoning(body["reasoning"], out)
    if body.get("stream") is True:
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    return out
