"""The Responses API (``POST /v1/responses``) as the verification layers read it.
Pure: no I/O.

Request side
------------
:func:`read_request` turns a request body into :class:`RequestView`: its
``messages`` are chat-shaped (``system`` / ``developer`` / ``user`` / ``assistant`` /
``tool`` roles, string or text-part content; :mod:`gateway.wire.responses_input` has
the mapping), so :func:`gateway.sources.context.extract_context` and every layer read them
exactly as they read a chat completions request: ``instructions`` is a system
message, ``<context>`` blocks are found in any message, ``function_call_output`` items
are ``role: tool`` messages keyed by ``call_id``. Built-in tool results the client
sends back (``mcp_call`` output, ``file_search_call`` results) are tool messages too.
What the request only points at — ``previous_response_id``, ``conversation``,
``prompt``, ``item_reference`` / ``compaction`` items — is server-side state the
gateway never sees: :attr:`RequestView.unseen` names it (for the audit note).
:func:`check_input` rejects the shapes no Responses server accepts (like
``gateway.wire.messages.check_messages`` for chat) before the upstream is called.

Response side
-------------
:func:`read_response` reads a ``response`` object: the answer text is what the SDK's
``response.output_text`` shows — every ``output_text`` part of every ``message`` item,
joined with "" — refusal parts apart (as chat's ``message.refusal`` is apart from
``content``). :meth:`ResponseView.unverified` says why an answer is not verified
(the chat path's wording where there is one). :func:`as_chat_completion` is the same
answer in the ``chat.completion`` shape the engine, the actions' helpers and the
telemetry read, so they need no Responses branch.

Actions (disclaimer, block, regenerate) are built in :mod:`gateway.wire.responses_actions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import InvalidRequest
from gateway.wire.responses_input import convert_input

__all__ = ["RequestView", "ResponseView", "as_chat_completion", "chat_usage", "check_input",
           "read_request", "read_response"]

_UNSEEN_FIELDS = ("previous_response_id", "conversation", "prompt")
"""Request fields that make the upstream add context the gateway does not see."""
_STRUCTURED = frozenset({"json_schema", "json_object"})
_NOT_CALLS = frozenset({"message", "reasoning"})


@dataclass(frozen=True, slots=True)
class RequestView:
    """What verification reads of one ``/v1/responses`` request."""

    messages: list[dict[str, Any]]
    """Chat-shaped messages (``VerifyInput.messages``, ``extract_context``'s input)."""
    unseen: tuple[str, ...] = ()
    """Server-side context this request points at and the gateway cannot read:
    ``previous_response_id``, ``conversation``, ``prompt``, ``item_reference``,
    ``compaction`` (in that order, each once)."""
    skipped: Mapping[str, int] = field(default_factory=dict)
    """Input left out of ``messages``, by kind (``"reasoning item": 2``,
    ``"web_search_call item": 1``, ``"input_file part": 1``)."""
    structured: bool = False
    """``text.format`` asks for JSON (``json_schema`` / ``json_object``): text
    appended to the answer (a disclaimer) would break the client's parsing."""
    stream: bool = False


def read_request(body: Mapping[str, Any]) -> RequestView:
    """The layers' view of a request body. Never raises (shapes are
    :func:`check_input`'s to reject)."""
    skipped: dict[str, int] = {}

    def skip(param: str, what: str) -> None:
        skipped[what] = skipped.get(what, 0) + 1

    messages, dropped, unseen_items = convert_input(body, skip, view=True)
    for what, n in dropped.items():
        skipped[what] = skipped.get(what, 0) + n
    for kind in unseen_items:
        skipped.pop(f"{kind} item", None)  # reported as unseen, not as skipped
    unseen = [name for name in _UNSEEN_FIELDS if body.get(name) not in (None, "", {})]
    unseen += sorted(unseen_items)
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, Mapping) else None
    structured = isinstance(fmt, Mapping) and fmt.get("type") in _STRUCTURED
    return RequestView(messages=messages, unseen=tuple(unseen), skipped=skipped,
                       structured=structured, stream=body.get("stream") is True)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _invalid_type(param: str, expected: str, value: Any) -> InvalidRequest:
    return InvalidRequest(f"Invalid type for '{param}': expected {expected}, but got "
                          f"{_json_type(value)} instead.", param=param, code="invalid_type")


def check_input(body: Mapping[str, Any]) -> None:
    """Raise :class:`InvalidRequest` (400, ``param: input[i]…``) for a shape no
    Responses server accepts: ``instructions`` not a string, ``input`` neither a
    string nor an array, an item that is not an object, a message item (one with a
    ``role``, or ``type: "message"``) without a string role or with content neither a
    string nor an array. Deliberately no stricter: item types, parts and extra keys
    are the upstream's to judge."""
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _invalid_type("instructions", "a string", instructions)
    items = body.get("input")
    if items is None or isinstance(items, str):
        return
    if not isinstance(items, list):
        raise _invalid_type("input", "a string or an array of input items", items)
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _invalid_type(f"input[{i}]", "an object", item)
        kind = item.get("type")
        if kind is not None and not isinstance(kind, str):
            raise _invalid_type(f"input[{i}].type", "a string", kind)
        if kind not in (None, "message") or ("role" not in item and kind is None):
            continue
        role = item.get("role")
        if not isinstance(role, str):
            if role is None:
                raise InvalidRequest(f"Missing required parameter: 'input[{i}].role'.",
                                     param=f"input[{i}].role", code="missing_required_parameter")
            raise _invalid_type(f"input[{i}].role", "a string", role)
        content = item.get("content")
        if not isinstance(content, (str, list)):
            raise _invalid_type(f"input[{i}].content", "a string or an array of content parts",
                                content)


# ---- the response ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ResponseView:
    """What verification reads of one ``response`` object."""

    id: str | None = None
    model: str | None = None
    status: str | None = None
    """``completed`` | ``incomplete`` | ``failed`` | ``cancelled`` | ``queued`` |
    ``in_progress`` (None when the server omits it: read as ``completed``)."""
    text: str = ""
    """The answer: the SDK's ``response.output_text``."""
    refusal: str = ""
    """Refusal parts' text, joined with "" (not part of :attr:`text`)."""
    calls: int = 0
    """Output items other than messages and reasoning: tool calls (function, custom,
    built-in) and built-in tools' outputs."""
    incomplete_reason: str | None = None
    usage: Mapping[str, Any] | None = None
    problem: str | None = None
    """Why the object cannot be read as a response (then nothing else is set)."""

    def unverified(self) -> str | None:
        """Why this answer is not verified (an audit note), or None when it is to be.

        ``incomplete`` answers are verified, as chat verifies ``finish_reason:
        length``; an answer with no text is verified (as chat verifies one) unless it
        is tool calls only."""
        if self.problem is not None:
            return f"not verified: the upstream answer is not a response ({self.problem})"
        if self.status in ("failed", "cancelled"):
            return f"not verified: the response {self.status}"
        if self.status in ("queued", "in_progress"):
            return f"not verified: the response is {self.status} (background)"
        if not self.text and not self.refusal and self.calls:
            return "not verified: the answer is tool calls only"
        return None


def _problem(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return "not a JSON object"
    if obj.get("object", "response") != "response":
        return "object is not 'response'"
    output = obj.get("output")
    if not isinstance(output, list):
        return "no output array"
    for i, item in enumerate(output):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            return f"output[{i}] is not a typed object"
        if item["type"] != "message":
            continue
        content = item.get("content")
        if not isinstance(content, list):
            return f"output[{i}].content is not an array"
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                return f"output[{i}].content[{j}] is not an object"
            kind = part.get("type")
            key = "text" if kind == "output_text" else "refusal" if kind == "refusal" else None
            if key is None or not isinstance(part.get(key), str):
                return f"output[{i}].content[{j}] is not an output_text or refusal part"
    return None


def read_response(obj: Any) -> ResponseView:
    """Read a ``response`` object (a non-stream body, or the one a stream rebuilt).
    Never raises: a shape it cannot read sets :attr:`ResponseView.problem`."""
    problem = _problem(obj)
    if problem is not None:
        return ResponseView(problem=problem)
    texts: list[str] = []
    refusals: list[str] = []
    calls = 0
    for item in obj["output"]:
        if item["type"] == "message":
            for part in item["content"]:
                (texts if part["type"] == "output_text" else refusals).append(
                    part["text"] if part["type"] == "output_text" else part["refusal"])
        elif item["type"] not in _NOT_CALLS:
            calls += 1
    details = obj.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    usage = obj.get("usage")
    return ResponseView(
        id=_opt_str(obj.get("id")), model=_opt_str(obj.get("model")),
        status=_opt_str(obj.get("status")), text="".join(texts), refusal="".join(refusals),
        calls=calls, incomplete_reason=_opt_str(reason),
        usage=usage if isinstance(usage, dict) else None)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def chat_usage(usage: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Responses ``usage`` in the chat completions shape (the telemetry's)."""
    if not isinstance(usage, Mapping):
        return None
    out: dict[str, Any] = {"prompt_tokens": usage.get("input_tokens"),
                           "completion_tokens": usage.get("output_tokens"),
                           "total_tokens": usage.get("total_tokens")}
    ins, outs = usage.get("input_tokens_details"), usage.get("output_tokens_details")
    if isinstance(ins, Mapping) and "cached_tokens" in ins:
        out["prompt_tokens_details"] = {"cached_tokens": ins["cached_tokens"]}
    if isinstance(outs, Mapping) and "reasoning_tokens" in outs:
        out["completion_tokens_details"] = {"reasoning_tokens": outs["reasoning_tokens"]}
    return out


def _finish_reason(view: ResponseView, tool_calls: bool) -> str | None:
    if view.status == "incomplete":
        return "content_filter" if view.incomplete_reason == "content_filter" else "length"
    if view.status not in (None, "completed"):
        return None
    return "tool_calls" if tool_calls else "stop"


def as_chat_completion(obj: Any) -> dict[str, Any]:
    """The response as a ``chat.completion`` dict (one choice): its text as content,
    refusal, function and custom tool calls, a finish reason (``stop`` /
    ``tool_calls`` / ``length`` / ``content_filter``) and usage in the chat shape.
    What the engine reads (``answer_text``, ``calls_only``, the upstream trace); not
    a wire translation. A response that cannot be read gives ``choices: []``."""
    view = read_response(obj)
    if view.problem is not None:
        return {"id": None, "object": "chat.completion", "model": None, "choices": []}
    calls: list[dict[str, Any]] = []
    for item in obj["output"]:
        if item["type"] == "function_call":
            calls.append({"id": item.get("call_id"), "type": "function", "function": {
                "name": item.get("name"), "arguments": item.get("arguments")}})
        elif item["type"] == "custom_tool_call":
            calls.append({"id": item.get("call_id"), "type": "custom", "custom": {
                "name": item.get("name"), "input": item.get("input")}})
    message: dict[str, Any] = {"role": "assistant", "content": view.text or None,
                               "refusal": view.refusal or None}
    if calls:
        message["tool_calls"] = calls
    created = obj.get("created_at")
    out: dict[str, Any] = {
        "id": view.id, "object": "chat.completion",
        "created": int(created) if isinstance(created, (int, float)) else None,
        "model": view.model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": _finish_reason(view, bool(calls))}]}
    if (usage := chat_usage(view.usage)) is not None:
        out["usage"] = usage
    return out
