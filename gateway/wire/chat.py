"""The chat completions response format (``/v1/chat/completions``), with no I/O.

What the modes and the actions need to read and rewrite an OpenAI chat completion —
as a JSON body and as a ``chat.completion.chunk`` stream — in one place:

- reading: :func:`is_completion` (what the layers can read), :func:`answer_text`
  (choice 0's text), :func:`calls_only`, :func:`body_problem` (why a body is not
  one, for notes and errors);
- rewriting: :func:`with_appended` (a disclaimer), :func:`block_completion` (the
  refusal body), :func:`synthesize` (an SSE body for a completion);
- the stream hold-back (``streaming: passthrough``): :mod:`gateway.wire.chat_hold`
  (:class:`~gateway.wire.chat_hold.ChatHold`; how the verdict is signalled in-band).

:data:`CHAT_COMPLETIONS` bundles them as a :class:`~gateway.wire.base.ResponseFormat`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.sources.context import message_text
from gateway.wire.chat_hold import ChatHold, chunk_base, relayable, split_tail, verdict_tail
from gateway.wire.sse import DONE, StreamAccumulator, StreamSummary, encode_event, ended_cleanly

__all__ = ["CHAT_COMPLETIONS", "ChatCompletions", "ChatEndWatch", "ChatHold", "answer_text", "block_completion",
           "body_problem", "calls_only", "chunk_base", "include_usage", "is_completion",
           "regenerate_body", "relayable", "split_tail", "stream_problem", "structured",
           "synthesize", "verdict_tail", "with_appended", "with_content"]


# ---- reading -----------------------------------------------------------------------------

def _is_text_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in ("text", "input_text") \
        and isinstance(part.get("text"), str)


def is_completion(parsed: Any) -> bool:
    """A chat completion the layers can read: a non-empty ``choices`` list of objects,
    each with a ``message`` object whose ``content`` is a string, null or a list of
    text parts (``{"type": "text" | "input_text", "text": str}``, as
    :func:`gateway.sources.context.message_text` reads them). Any other shape is
    unverifiable."""
    if not isinstance(parsed, dict):
        return False
    choices = parsed.get("choices")
    if not isinstance(choices, list) or not choices:
        return False
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            return False
        content = message.get("content")
        if content is not None and not isinstance(content, str) and not (
                isinstance(content, list) and all(_is_text_part(p) for p in content)):
            return False
    return True


def answer_text(completion: Mapping[str, Any]) -> str:
    """Text of choice 0: string content, or its text parts joined like
    :func:`gateway.sources.context.message_text` ("" when absent or of another shape)."""
    choices = completion.get("choices") or ()
    if not isinstance(choices, (list, tuple)) or not choices \
            or not isinstance(choices[0], (dict, Mapping)):
        return ""
    message = choices[0].get("message")
    return message_text(message) if isinstance(message, (dict, Mapping)) else ""


def calls_only(completion: Mapping[str, Any]) -> bool:
    """Choice 0 is tool (or function) calls with no text: nothing for a layer to check."""
    first = (completion.get("choices") or (None,))[0]
    message = first.get("message") if isinstance(first, Mapping) else None
    return (isinstance(message, Mapping)
            and bool(message.get("tool_calls") or message.get("function_call"))
            and not answer_text(completion))


def body_problem(data: bytes, parsed: Any) -> str:
    """Why ``data`` (a 2xx/3xx upstream body) is not a chat completion, for notes and
    errors (never quoting it)."""
    if parsed is not None:
        choices = parsed.get("choices") if isinstance(parsed, dict) else None
        if isinstance(choices, list) and choices:  # is_completion refused their shape
            return ("a choice that is not an object with a message object whose content "
                    "is a string, null or a list of text parts")
        return "JSON without a non-empty 'choices' list"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "not valid UTF-8"
    head = text.lstrip()
    if head.startswith(("data:", "event:", ":")):
        return "a server-sent event stream, not JSON"
    if not head:
        return "empty"
    return "not valid JSON"


def stream_problem(acc: StreamAccumulator) -> str:
    """Why an accumulated stream is not a chat completion stream."""
    if acc.unreadable:
        return (f"{acc.unreadable} event(s) not valid JSON or UTF-8, or not chat "
                "completion chunks")
    return "no chat completion chunk with a choice"


def include_usage(payload: Mapping[str, Any]) -> bool:
    """The client asked for the usage chunk (``stream_options.include_usage``)."""
    options = payload.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def structured(payload: Mapping[str, Any]) -> bool:
    """The client asked for JSON (``response_format`` ``json_schema`` / ``json_object``)."""
    fmt = payload.get("response_format")
    return isinstance(fmt, Mapping) and fmt.get("type") in ("json_schema", "json_object")


# ---- rewriting ---------------------------------------------------------------------------

def regenerate_body(payload: Mapping[str, Any], messages: list[Any], failed: str,
                    feedback: str, model: str | None = None) -> dict[str, Any]:
    """``payload`` for a regenerate attempt: not streamed, ``messages`` followed by the
    failed answer (assistant) and the repair ``feedback`` (user); ``model`` when given."""
    out = {k: v for k, v in payload.items() if k not in ("stream", "stream_options")}
    out["messages"] = [*messages, {"role": "assistant", "content": failed},
                       {"role": "user", "content": feedback}]
    if model is not None:
        out["model"] = model
    return out


def block_completion(completion: Mapping[str, Any], message: str) -> dict[str, Any]:
    """A ``chat.completion`` refusing with ``message`` (``finish_reason: content_filter``)."""
    out: dict[str, Any] = {
        "id": completion.get("id") or "chatcmpl-verity-blocked",
        "object": "chat.completion",
        "created": completion.get("created") or 0,
        "model": completion.get("model") or "",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": message,
                                             "refusal": None},
                     "logprobs": None, "finish_reason": "content_filter"}],
    }
    if completion.get("usage") is not None:
        out["usage"] = completion["usage"]
    if completion.get("system_fingerprint"):
        out["system_fingerprint"] = completion["system_fingerprint"]
    return out


def with_appended(completion: Mapping[str, Any], text: str) -> dict[str, Any]:
    """``completion`` with ``text`` appended to choice 0's content (a disclaimer)."""
    out = dict(completion)
    choices = list(out.get("choices") or ())
    if not choices:
        choices = [{"index": 0, "message": {"role": "assistant", "content": ""},
                    "finish_reason": "stop"}]
    first = dict(choices[0])
    message = dict(first.get("message") or {"role": "assistant"})
    content = message.get("content")
    message["content"] = (content if isinstance(content, str) else "") + text
    first["message"] = message
    choices[0] = first
    out["choices"] = choices
    return out


def with_content(completion: Mapping[str, Any], text: str) -> dict[str, Any]:
    """``completion`` with choice 0's content replaced by ``text``."""
    out = with_appended(completion, "")
    first = dict(out["choices"][0])
    first["message"] = {**first["message"], "content": text}
    out["choices"] = [first, *out["choices"][1:]]
    return out


def synthesize(completion: Mapping[str, Any], *, include_usage: bool,
               extra: Mapping[str, Any] | None = None) -> bytes:
    """The SSE body for ``completion`` (role chunk, content / tool-call chunks, finish
    chunk, usage chunk when asked, ``[DONE]``); ``extra`` fields go on each finish chunk."""
    base = chunk_base(completion)
    events: list[bytes] = []

    def emit(choice: dict[str, Any], **more: Any) -> None:
        events.append(encode_event({**base, "choices": [choice], **more}))

    for choice in completion.get("choices") or ():
        index = choice.get("index", 0)
        message = choice.get("message") or {}
        emit({"index": index, "delta": {"role": "assistant", "content": ""},
              "logprobs": None, "finish_reason": None})
        content = message.get("content")
        if isinstance(content, str) and content:
            emit({"index": index, "delta": {"content": content}, "logprobs": None,
                  "finish_reason": None})
        for j, call in enumerate(message.get("tool_calls") or ()):
            emit({"index": index, "delta": {"tool_calls": [{**call, "index": j}]},
                  "logprobs": None, "finish_reason": None})
        emit({"index": index, "delta": {}, "logprobs": None,
              "finish_reason": choice.get("finish_reason") or "stop"}, **(extra or {}))
    if include_usage:
        events.append(encode_event({**base, "choices": [],
                                    "usage": completion.get("usage")}))
    events.append(DONE)
    return b"".join(events)


class ChatEndWatch:
    """The :class:`~gateway.wire.base.EndWatch` of a chat completion stream: keeps the
    last two reads for :func:`gateway.wire.sse.ended_cleanly` (no parsing on the way)."""

    __slots__ = ("before", "last")

    def __init__(self) -> None:
        self.before = self.last = b""

    def feed(self, chunk: bytes) -> None:
        self.before, self.last = self.last, chunk

    def ended(self) -> bool:
        return ended_cleanly(self.before, self.last)


class ChatCompletions:
    """The chat completions :class:`~gateway.wire.base.ResponseFormat`."""

    name = "chat.completions"
    path = "/chat/completions"
    noun = "chat completion"
    chat_shaped = True

    def request_messages(self, payload: Mapping[str, Any]) -> list[Any]:
        messages = payload.get("messages")
        return messages if isinstance(messages, list) else []

    def unseen_context(self, payload: Mapping[str, Any]) -> str | None:
        return None

    def structured(self, payload: Mapping[str, Any]) -> bool:
        return structured(payload)

    def regenerate_body(self, payload: Mapping[str, Any], messages: list[Any], failed: str,
                        feedback: str, model: str | None) -> dict[str, Any]:
        return regenerate_body(payload, messages, failed, feedback, model)

    def is_answer(self, body: Any) -> bool:
        return is_completion(body)

    def body_problem(self, data: bytes, parsed: Any) -> str:
        return body_problem(data, parsed)

    def job_answer(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return body if isinstance(body, dict) else dict(body)

    def answer_text(self, body: Mapping[str, Any]) -> str:
        return answer_text(body)

    def calls_only(self, body: Mapping[str, Any]) -> bool:
        return calls_only(body)

    def with_disclaimer(self, body: Mapping[str, Any], text: str) -> dict[str, Any]:
        return with_appended(body, text)

    def refusal(self, body: Mapping[str, Any], message: str) -> dict[str, Any]:
        return block_completion(body, message)

    def with_text(self, body: Mapping[str, Any], text: str) -> dict[str, Any]:
        return with_content(body, text)

    def stream_body(self, body: Mapping[str, Any], *, include_usage: bool) -> bytes:
        return synthesize(body, include_usage=include_usage)

    def fold(self) -> StreamAccumulator:
        return StreamAccumulator()

    def stream_problem(self, acc: Any) -> str:
        return stream_problem(acc)

    def hold(self) -> ChatHold:
        return ChatHold()

    def summary(self) -> StreamSummary:
        return StreamSummary()

    def end_watch(self) -> ChatEndWatch:
        return ChatEndWatch()

    def error_event(self, body: Mapping[str, Any], acc: Any = None) -> bytes:
        return encode_event(body)


CHAT_COMPLETIONS = ChatCompletions()
"""The format of ``/v1/chat/completions``."""
