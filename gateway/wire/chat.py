"""The chat completions response format (``/v1/chat/completions``), with no I/O.

What the modes and the actions need to read and rewrite an OpenAI chat completion —
as a JSON body and as a ``chat.completion.chunk`` stream — in one place:

- reading: :func:`is_completion` (what the layers can read), :func:`answer_text`
  (choice 0's text), :func:`calls_only`, :func:`body_problem` (why a body is not
  one, for notes and errors);
- rewriting: :func:`with_appended` (a disclaimer), :func:`block_completion` (the
  refusal body), :func:`synthesize` (an SSE body for a completion);
- the stream hold-back (``streaming: passthrough``): :func:`relayable` (an event
  that may go out before the verdict), and :func:`verdict_tail`, the held tail
  rewritten around the verdict's addition (:func:`split_tail` splits it).

:data:`CHAT_COMPLETIONS` bundles them as a :class:`~gateway.wire.base.ResponseFormat`.
How the verdict is signalled in a stream:

For ``disclaimer`` and ``block`` the held tail is reordered around the addition: all
upstream content (and tool-call) deltas first — content sent after a finish chunk,
or another choice's last content, included (it was verified too) — then the
addition, then the finish events it concerns, then usage chunks and ``[DONE]``:

- ``disclaimer`` — one more content chunk with the disclaimer text (and a ``verity``
  field), just before choice 0's finish (split from the content its event may
  carry). Other choices keep their finish events where the upstream sent them.
- ``block`` (``style: completion``) — a chunk with the block message as content,
  ``finish_reason: "content_filter"`` and a ``verity`` field replaces choice 0's
  finish; with ``n > 1`` every other choice gets a finish-only chunk with
  ``content_filter`` (and ``verity``) in place of its own, so each choice ends
  exactly once. The official SDK accepts both the finish reason and the extra
  field (``chunk.model_extra["verity"]``).
- ``block`` (``style: error``) — an OpenAI error event ``data: {"error": …}``
  ends the stream (no ``[DONE]``): the SDK raises ``APIError`` while iterating.
- ``pass`` / ``flag`` — the tail unchanged; the verdict is only in the audit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.sources.context import message_text
from gateway.wire.sse import DONE, StreamAccumulator, encode_data, encode_event

__all__ = ["CHAT_COMPLETIONS", "ChatCompletions", "answer_text", "block_completion",
           "body_problem", "calls_only", "chunk_base", "include_usage", "is_completion",
           "relayable", "split_tail", "stream_problem", "synthesize", "verdict_tail",
           "with_appended"]


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
            or not isinstance(choices[0], Mapping):
        return ""
    message = choices[0].get("message")
    return message_text(message) if isinstance(message, Mapping) else ""


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


# ---- rewriting ---------------------------------------------------------------------------

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


def chunk_base(completion: Mapping[str, Any]) -> dict[str, Any]:
    """The fields every chunk of a stream for ``completion`` repeats."""
    base: dict[str, Any] = {"id": completion.get("id") or "chatcmpl-verity",
                            "object": "chat.completion.chunk",
                            "created": completion.get("created") or 0,
                            "model": completion.get("model") or ""}
    if completion.get("system_fingerprint"):
        base["system_fingerprint"] = completion["system_fingerprint"]
    return base


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


# ---- the stream hold-back ----------------------------------------------------------------

def relayable(obj: dict[str, Any] | None) -> bool:
    """A chat completion chunk (a ``choices`` list) that does not start the tail: no
    ``finish_reason`` and not usage-only. Anything else — ``[DONE]``, an event that is
    not JSON, an error event, any other object — is held."""
    if obj is None:
        return False
    choices = obj.get("choices")
    if type(choices) is not list or (not choices and obj.get("usage")):
        return False
    return not any(type(c) is dict and c.get("finish_reason") for c in choices)


def verdict_tail(tail: list[bytes], completion: Mapping[str, Any], *, action: str,
                 text: str | None = None, verity: Mapping[str, Any] | None = None,
                 error_body: Mapping[str, Any] | None = None) -> bytes:
    """The held ``tail`` (``data`` fields, in upstream order) rewritten around the
    verdict's addition, encoded (see the module docstring).

    ``action`` ``disclaimer`` adds ``text`` as a content chunk before choice 0's
    finish; ``block`` sends ``text`` with ``finish_reason: content_filter`` in place
    of the upstream finish chunks (every choice's); ``error_body`` ends the stream
    with an error event instead. Otherwise the tail goes out as it came.
    ``completion`` is the answer accumulated so far (its id, model, choices).
    """
    out: list[bytes] = []
    if error_body is not None:
        return encode_event(error_body)
    if action == "block" or (action == "disclaimer" and text):
        base = chunk_base(completion)
        extra = {"verity": dict(verity)} if verity is not None else {}
        block = action == "block"
        body, finishes, end = split_tail(tail, every_choice=block)
        if block:  # the verdict is the response's: every choice ends content_filter
            others = sorted({c.get("index", 0) for c in completion["choices"]} - {0})
            finishes = [orjson.dumps({**base, "choices": [{
                "index": i, "delta": {} if i else {"content": text or ""},
                "logprobs": None, "finish_reason": "content_filter"}], **extra})
                for i in (0, *others)]
        else:
            body.append(orjson.dumps({**base, "choices": [{
                "index": 0, "delta": {"content": text}, "logprobs": None,
                "finish_reason": None}], **extra}))
        tail = [*body, *finishes, *end]
    out.extend(encode_data(d) for d in tail)
    return b"".join(out)


def _has_delta(choice: Mapping[str, Any]) -> bool:
    delta = choice.get("delta")
    return isinstance(delta, dict) and any(v for key, v in delta.items() if key != "role")


def split_tail(tail: list[bytes], *, every_choice: bool
                ) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """The held ``tail`` as ``(body, finishes, end)``, each in upstream order.

    ``finishes``: choice 0's finish (every choice's with ``every_choice``), each in
    an event of its own; ``end``: usage-only chunks, ``[DONE]`` and anything after
    it; ``body``: the rest. An event that carried a moved finish as well as content
    (servers often send the last token with the finish reason; with ``n > 1``
    another choice may share the event) keeps that content, and its usage, in
    ``body``. Events left whole are kept byte for byte.
    """
    body: list[bytes] = []
    finishes: list[bytes] = []
    end: list[bytes] = []
    done = False
    for data in tail:
        if done or data.strip() == b"[DONE]":
            done = True
            end.append(data)
            continue
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            body.append(data)
            continue
        choices = obj.get("choices") if isinstance(obj, dict) else None
        if not isinstance(obj, dict) or "error" in obj \
                or (choices is not None and not isinstance(choices, list)):
            body.append(data)
            continue
        if not choices:
            (end if obj.get("usage") else body).append(data)
            continue
        kept: list[Any] = []
        moved: list[dict[str, Any]] = []
        for c in choices:
            if isinstance(c, dict) and c.get("finish_reason") \
                    and (every_choice or c.get("index", 0) == 0):
                finish = {**c, "delta": {}}
                if _has_delta(c):
                    kept.append({**c, "finish_reason": None})
                    if "logprobs" in c:
                        finish["logprobs"] = None
                moved.append(finish)
            else:
                kept.append(c)
        if not moved:
            body.append(data)
            continue
        rest = {k: v for k, v in obj.items() if k != "usage"}
        finishes.extend(orjson.dumps({**rest, "choices": [c]}) for c in moved)
        if kept:
            body.append(orjson.dumps({**obj, "choices": kept}))
        elif obj.get("usage"):
            end.append(orjson.dumps({**obj, "choices": []}))
    return body, finishes, end


class ChatCompletions:
    """The chat completions :class:`~gateway.wire.base.ResponseFormat`."""

    name = "chat.completions"

    def is_answer(self, body: Any) -> bool:
        return is_completion(body)

    def answer_text(self, body: Mapping[str, Any]) -> str:
        return answer_text(body)

    def calls_only(self, body: Mapping[str, Any]) -> bool:
        return calls_only(body)

    def with_disclaimer(self, body: Mapping[str, Any], text: str) -> dict[str, Any]:
        return with_appended(body, text)

    def refusal(self, body: Mapping[str, Any], message: str) -> dict[str, Any]:
        return block_completion(body, message)

    def stream_body(self, body: Mapping[str, Any], *, include_usage: bool) -> bytes:
        return synthesize(body, include_usage=include_usage)

    def verdict_tail(self, tail: list[bytes], body: Mapping[str, Any], *, action: str,
                     text: str | None = None, verity: Mapping[str, Any] | None = None,
                     error_body: Mapping[str, Any] | None = None) -> bytes:
        return verdict_tail(tail, body, action=action, text=text, verity=verity,
                            error_body=error_body)


CHAT_COMPLETIONS = ChatCompletions()
"""The format of ``/v1/chat/completions`` (the only front door today)."""
