"""OpenAI Chat Completions -> OpenAI Responses: the way back, pure functions.

The answer of a chat completions upstream to a request that
:mod:`gateway.upstream.responses_chat` translated, in the Responses shape:

- :func:`chat_to_response` — a ``chat.completion`` -> a ``response`` object: choice 0's
  content -> one ``message`` item with one ``output_text`` part (``refusal`` -> a
  ``refusal`` part), its ``tool_calls`` (``type: function``) -> ``function_call``
  items after it; ``finish_reason`` ``length`` / ``content_filter`` -> ``status:
  incomplete`` with ``incomplete_details.reason`` ``max_output_tokens`` /
  ``content_filter`` (the message item ``incomplete`` too), anything else ->
  ``completed``; usage -> ``input_tokens`` / ``output_tokens`` / ``total_tokens`` with
  cached and reasoning token details (``cache_write_tokens``, which chat does not
  report, is 0); the request's settings echoed as the Responses API echoes them
  (``instructions``, ``tools``, ``tool_choice``, ``text``, ``temperature``, …;
  ``store: false``: nothing is stored).
- :class:`ChatStreamToResponses` — a ``chat.completion.chunk`` stream -> Responses
  events: ``response.created`` / ``in_progress`` on the first chunk, an item added
  when its first delta arrives (the message item on the first content or refusal,
  a ``function_call`` item per tool call index), text and argument deltas as they
  come; at the end (``[DONE]``, or :meth:`~ChatStreamToResponses.finish` when the
  upstream omits it) every item's closing events in output order, then the terminal
  event, whose response is :func:`chat_to_response` of the accumulated completion —
  the stream and the non-stream translation agree by construction. Items stay open
  until the end (chat may interleave content and tool-call deltas); the SDK accepts
  it.

Ids: ``resp_<chat id>``, ``msg_<the same>``, ``fc_<call id>`` (``chatcmpl-`` and
``call_`` prefixes dropped), so one upstream answer always gets the same ids;
``response_id`` overrides the first two (without it, an upstream that sends no id
gets a random one).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.wire.responses_actions import text_part
from gateway.wire.responses_events import error_events

__all__ = ["ChatStreamToResponses", "chat_to_response", "response_usage"]

_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content
                       if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def response_usage(usage: Any) -> dict[str, Any] | None:
    """Chat ``usage`` in the Responses shape."""
    if not isinstance(usage, Mapping):
        return None
    prompt = usage.get("prompt_tokens_details")
    completion = usage.get("completion_tokens_details")
    cached = prompt.get("cached_tokens") if isinstance(prompt, Mapping) else None
    reasoning = completion.get("reasoning_tokens") if isinstance(completion, Mapping) else None
    inputs, outputs = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    return {"input_tokens": inputs,
            "input_tokens_details": {"cached_tokens": int(cached or 0), "cache_write_tokens": 0},
            "output_tokens": outputs,
            "output_tokens_details": {"reasoning_tokens": int(reasoning or 0)},
            "total_tokens": int(usage.get("total_tokens") or inputs + outputs)}


def _suffix(chat_id: Any) -> str | None:
    return chat_id.removeprefix("chatcmpl-") if isinstance(chat_id, str) and chat_id else None


def _echo(request: Mapping[str, Any]) -> dict[str, Any]:
    """The request settings a ``response`` object repeats."""
    parallel = request.get("parallel_tool_calls")
    return {
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "metadata": request.get("metadata") or {},
        "parallel_tool_calls": True if parallel is None else parallel,
        "previous_response_id": None,
        "reasoning": request.get("reasoning") or {"effort": None, "summary": None},
        "store": False,
        "temperature": request.get("temperature"),
        "text": request.get("text") or {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice") or "auto",
        "tools": request.get("tools") or [],
        "top_p": request.get("top_p"),
        "truncation": "disabled",
        "user": request.get("user"),
        "background": False,
    }


def _output(message: Mapping[str, Any], suffix: str, incomplete: bool) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    if text := _content_text(message.get("content")):
        content.append(text_part(text))
    if isinstance(refusal := message.get("refusal"), str) and refusal:
        content.append({"type": "refusal", "refusal": refusal})
    if content:
        output.append({"type": "message", "id": f"msg_{suffix}", "role": "assistant",
                       "status": "incomplete" if incomplete else "completed",
                       "content": content})
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
            continue
        call_id = str(call.get("id") or "")
        fn = call["function"]
        output.append({"type": "function_call", "id": f"fc_{call_id.removeprefix('call_')}",
                       "call_id": call_id, "name": str(fn.get("name") or ""),
                       "arguments": str(fn.get("arguments") or ""), "status": "completed"})
    return output


def chat_to_response(completion: Mapping[str, Any], request: Mapping[str, Any], *,
                     response_id: str | None = None) -> dict[str, Any]:
    """The ``response`` object for ``completion`` (choice 0), answering ``request``
    (the client's Responses body)."""
    if response_id is None:
        response_id = f"resp_{_suffix(completion.get('id')) or uuid.uuid4().hex}"
    suffix = response_id.removeprefix("resp_")
    choices = completion.get("choices")
    first = choices[0] if isinstance(choices, list) and choices \
        and isinstance(choices[0], Mapping) else {}
    message = _mapping(first.get("message"))
    reason = _INCOMPLETE.get(str(first.get("finish_reason")))
    created = completion.get("created")
    out: dict[str, Any] = {
        "id": response_id, "object": "response",
        "created_at": created if isinstance(created, (int, float)) else 0,
        "status": "incomplete" if reason else "completed", "error": None,
        "incomplete_details": {"reason": reason} if reason else None,
        "model": completion.get("model") or request.get("model") or "",
        "output": _output(message, suffix, reason is not None),
        "usage": response_usage(completion.get("usage")),
        **_echo(request)}
    if isinstance(tier := completion.get("service_tier"), str):
        out["service_tier"] = tier
    return out


class ChatStreamToResponses:
    """Translate a chat completion stream into Responses events, chunk by chunk.

    ``feed_data`` each SSE ``data`` payload (or ``feed`` parsed chunks) and send the
    events it returns (numbered from 0, in order); ``[DONE]`` returns the closing
    events. A stream that ends without ``[DONE]`` is closed with :meth:`finish` when
    it has a finish reason (:attr:`finished`), else it was cut: end it with
    :meth:`fail`. An in-band ``{"error": …}`` chunk returns the error ending itself."""

    def __init__(self, request: Mapping[str, Any], *, response_id: str | None = None) -> None:
        self.request = request
        self.response_id = response_id
        self.ended = False
        self.finished = False
        """A finish reason arrived."""
        self._seq = 0
        self._started: dict[str, Any] | None = None
        self._chat: dict[str, Any] = {"id": None, "model": None, "created": None}
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._parts: list[str] = []  # "output_text" / "refusal", in content order
        self._calls: dict[int, dict[str, Any]] = {}  # chat index -> {id, name, arguments, oi}
        self._message_oi: int | None = None
        self._next_oi = 0
        self._finish: str | None = None
        self._usage: Any = None

    def _emit(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = [{**e, "sequence_number": n} for n, e in enumerate(events, self._seq)]
        self._seq += len(out)
        return out

    def _skeleton(self) -> dict[str, Any]:
        response = chat_to_response({**self._chat, "choices": []}, self.request,
                                    response_id=self.response_id)
        self.response_id = response["id"]
        response.update(status="in_progress", usage=None)
        return response

    def feed_data(self, data: bytes) -> list[dict[str, Any]]:
        if data.strip() == b"[DONE]":
            return self.finish()
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return []
        return self.feed(chunk) if isinstance(chunk, dict) else []

    def feed(self, chunk: Mapping[str, Any]) -> list[dict[str, Any]]:
        if self.ended:
            return []
        if isinstance(chunk.get("error"), Mapping) and "choices" not in chunk:
            return self.fail(chunk["error"])
        events: list[dict[str, Any]] = []
        for key in ("id", "model", "created"):
            if self._chat[key] is None and chunk.get(key) is not None:
                self._chat[key] = chunk[key]
        if self._started is None:
            self._started = self._skeleton()
            events += [{"type": "response.created", "response": self._started},
                       {"type": "response.in_progress", "response": self._started}]
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
                events += self._choice(choice)
        return self._emit(events)

    def _choice(self, choice: Mapping[str, Any]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        delta = _mapping(choice.get("delta"))
        if isinstance(text := delta.get("content"), str) and text:
            events += self._delta("output_text", text)
        if isinstance(refusal := delta.get("refusal"), str) and refusal:
            events += self._delta("refusal", refusal)
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, Mapping):
                events += self._call(call)
        if isinstance(reason := choice.get("finish_reason"), str) and reason:
            self._finish, self.finished = reason, True
        return events

    def _message_id(self) -> str:
        return f"msg_{str(self.response_id).removeprefix('resp_')}"

    def _delta(self, kind: str, text: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if self._message_oi is None:
            self._message_oi, self._next_oi = self._next_oi, self._next_oi + 1
            events.append({"type": "response.output_item.added", "output_index": self._message_oi,
                           "item": {"type": "message", "id": self._message_id(),
                                    "status": "in_progress", "role": "assistant",
                                    "content": []}})
        at = {"item_id": self._message_id(), "output_index": self._message_oi}
        if kind not in self._parts:
            self._parts.append(kind)
            part = text_part("") if kind == "output_text" else {"type": "refusal", "refusal": ""}
            events.append({"type": "response.content_part.added", **at,
                           "content_index": self._parts.index(kind), "part": part})
        at["content_index"] = self._parts.index(kind)
        if kind == "output_text":
            self._text.append(text)
            events.append({"type": "response.output_text.delta", **at, "delta": text,
                           "logprobs": []})
        else:
            self._refusal.append(text)
            events.append({"type": "response.refusal.delta", **at, "delta": text})
        return events

    def _call(self, call: Mapping[str, Any]) -> list[dict[str, Any]]:
        index = call.get("index", 0)
        fn = _mapping(call.get("function"))
        events: list[dict[str, Any]] = []
        state = self._calls.get(index)
        if state is None:
            call_id = call.get("id") if isinstance(call.get("id"), str) else f"call_{index}"
            state = self._calls[index] = {"id": call_id, "name": "", "arguments": "",
                                          "oi": self._next_oi}
            self._next_oi += 1
            state["name"] = str(fn.get("name") or "")
            events.append({"type": "response.output_item.added", "output_index": state["oi"],
                           "item": {**self._call_item(state), "status": "in_progress",
                                    "arguments": ""}})
        elif isinstance(name := fn.get("name"), str):
            state["name"] += name
        if isinstance(arguments := fn.get("arguments"), str) and arguments:
            state["arguments"] += arguments
            events.append({"type": "response.function_call_arguments.delta",
                           "item_id": self._call_item(state)["id"],
                           "output_index": state["oi"], "delta": arguments})
        return events

    @staticmethod
    def _call_item(state: Mapping[str, Any]) -> dict[str, Any]:
        return {"type": "function_call", "id": f"fc_{state['id'].removeprefix('call_')}",
                "call_id": state["id"], "name": state["name"], "arguments": state["arguments"],
                "status": "completed"}

    def completion(self) -> dict[str, Any]:
        """The ``chat.completion`` streamed so far."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None,
                                   "refusal": "".join(self._refusal) or None}
        if self._calls:
            message["tool_calls"] = [
                {"id": s["id"], "type": "function",
                 "function": {"name": s["name"], "arguments": s["arguments"]}}
                for _, s in sorted(self._calls.items(), key=lambda kv: kv[1]["oi"])]
        out = {**self._chat, "object": "chat.completion",
               "choices": [{"index": 0, "message": message, "finish_reason": self._finish}]}
        if self._usage is not None:
            out["usage"] = self._usage
        return out

    def finish(self) -> list[dict[str, Any]]:
        """Close every item, in output order, then the terminal event."""
        if self.ended:
            return []
        events = [] if self._started is not None else self.feed({})
        self.ended = True
        final = chat_to_response(self.completion(), self.request, response_id=self.response_id)
        closing: list[dict[str, Any]] = []
        for oi, item in enumerate(final["output"]):
            closing += self._close(oi, item)
        closing.append({"type": "response.incomplete" if final["status"] == "incomplete"
                        else "response.completed", "response": final})
        return events + self._emit(closing)

    def _close(self, oi: int, item: Mapping[str, Any]) -> list[dict[str, Any]]:
        at = {"item_id": item["id"], "output_index": oi}
        events: list[dict[str, Any]] = []
        if item["type"] == "function_call":
            events.append({"type": "response.function_call_arguments.done", **at,
                           "arguments": item["arguments"]})
        for ci, part in enumerate(item.get("content") or ()):
            where = {**at, "content_index": ci}
            if part["type"] == "output_text":
                events.append({"type": "response.output_text.done", **where,
                               "text": part["text"], "logprobs": []})
            else:
                events.append({"type": "response.refusal.done", **where,
                               "refusal": part["refusal"]})
            events.append({"type": "response.content_part.done", **where, "part": part})
        events.append({"type": "response.output_item.done", "output_index": oi, "item": item})
        return events

    def fail(self, error: Mapping[str, Any]) -> list[dict[str, Any]]:
        """End the stream with ``error`` (an OpenAI error body's ``error`` object)."""
        if self.ended:
            return []
        self.ended = True
        events = error_events(error, sequence_number=self._seq, response=self._started)
        self._seq += len(events)
        return events
