"""Server-sent events for chat completion streams.

- :class:`SSEParser` turns arriving byte chunks into ``data:`` payloads (chunks may
  split events anywhere).
- :class:`StreamAccumulator` folds ``chat.completion.chunk`` objects into one
  ``chat.completion``-shaped summary: id, model, per-choice content, tool calls,
  finish reasons and usage.
- :class:`StreamSummary` keeps only what telemetry records (id, model, finish
  reasons, usage), parsing just the chunks that carry them.
- :func:`encode_event` / :func:`encode_data` / :data:`DONE` write events back.
- :func:`ended_cleanly` — whether a relayed stream's last bytes end it as a chat
  completion stream ends (:attr:`StreamAccumulator.truncated` where it is parsed).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["DONE", "SSEParser", "StreamAccumulator", "StreamSummary", "encode_data",
           "encode_event", "ended_cleanly"]

DONE = b"data: [DONE]\n\n"


def encode_event(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def encode_data(data: bytes) -> bytes:
    """The event for a ``data`` field as :class:`SSEParser` yields it: a field that
    spanned several ``data:`` lines (joined by "\\n") is written on as many lines."""
    if b"\n" in data:
        data = data.replace(b"\n", b"\ndata: ")
    return b"data: " + data + b"\n\n"


_FINISHED = re.compile(rb'"finish_reason"\s*:\s*"|"error"\s*:')


def ended_cleanly(before: bytes, last: bytes) -> bool:
    """Whether a chat completion stream whose last two reads were ``before`` and ``last``
    ended as one does: with ``[DONE]``, or, for servers that omit it, with a finish
    reason or an error event among its last events. A stream that just stops (the
    upstream closed it mid-answer) has none of them: it is truncated.

    Runs once, at the end of a relayed stream, on what is still at hand (no parsing
    on the way); a finish event followed by more than the last two reads without
    ``[DONE]`` is not seen, which no server sends."""
    tail = last.rstrip()
    if len(tail) < 6:
        tail = (before + last).rstrip()
    if tail.endswith(b"[DONE]"):
        return True
    return _FINISHED.search(last) is not None or _FINISHED.search(before) is not None


_BLANK_LINE = re.compile(rb"\n\n|\r\r|\n\r")
"""Two line endings in a row, in raw bytes (every CR/LF combination that makes a blank
line contains one of these)."""


class SSEParser:
    """Incremental parser yielding each event's ``data`` field (joined lines).

    Linear in the bytes fed, however an event is split: arriving pieces of an event that
    cannot end in them (no blank line) are kept aside, not joined, until one that can
    arrives — a single huge event costs one copy, not one per piece."""

    __slots__ = ("_buf", "_held", "_size")

    def __init__(self) -> None:
        self._buf = b""
        self._held: list[bytes] = []
        self._size = 0

    @property
    def pending(self) -> int:
        """Bytes held of an event not complete yet."""
        return self._size

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._size:
            last = self._held[-1] if self._held else self._buf
            if _BLANK_LINE.search(last[-1:] + chunk) is None:
                self._held.append(chunk)
                self._size += len(chunk)
                return []
            buf = b"".join([self._buf, *self._held, chunk])
            self._held.clear()
        else:
            buf = chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events: list[bytes] = []
        start = 0
        while True:
            end = buf.find(b"\n\n", start)
            if end < 0:
                break
            block, start = buf[start:end], end + 2
            data = [line[5:].removeprefix(b" ") for line in block.split(b"\n")
                    if line.startswith(b"data:")]
            if data:
                events.append(b"\n".join(data))
        self._buf = buf[start:] if start else buf
        self._size = len(self._buf)
        return events


class StreamAccumulator:
    """Assemble streamed chunks into a completion summary."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.model: str | None = None
        self.created: int | None = None
        self.system_fingerprint: str | None = None
        self.usage: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.done = False
        self._content: dict[int, list[str]] = {}
        self._finish: dict[int, str | None] = {}
        self._tools: dict[int, dict[int, dict[str, Any]]] = {}
        self.parser = SSEParser()
        self.unreadable = 0
        """Data events skipped: not JSON (invalid UTF-8 included), not a JSON object, or
        not a chat completion chunk (:meth:`feed_chunk`; empty data and ``[DONE]`` are
        not counted)."""

    def feed_bytes(self, chunk: bytes) -> None:
        for data in self.parser.feed(chunk):
            self.feed_data(data)

    def feed_data(self, data: bytes) -> dict[str, Any] | None:
        """Fold one event's data in; the parsed object when it is a JSON object."""
        if data.strip() == b"[DONE]":
            self.done = True
            return None
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            if data.strip():
                self.unreadable += 1
            return None
        if isinstance(obj, dict):
            self.feed_chunk(obj)
            return obj
        self.unreadable += 1
        return None

    def feed_chunk(self, obj: dict[str, Any]) -> None:
        """Fold one parsed event in. Never raises: an event that is not a chat completion
        chunk (no ``choices`` list, nor an error or usage-only event) or that has a field
        of the wrong type (a choice, delta or tool call not an object, content not a
        string, ...) is counted in :attr:`unreadable` and the rest of it skipped."""
        if "error" in obj and "choices" not in obj:
            self.error = obj["error"] if isinstance(obj["error"], dict) else {"message": str(obj)}
            return
        choices = obj.get("choices")
        if type(choices) is not list:
            if choices is not None or not obj.get("usage"):
                self.unreadable += 1  # not a chat completion chunk
                return
            choices = []  # a usage-only chunk without "choices"
        if self.id is None and isinstance(value := obj.get("id"), str):
            self.id = value
        if self.model is None and isinstance(value := obj.get("model"), str):
            self.model = value
        if self.created is None and type(value := obj.get("created")) is int:
            self.created = value
        if self.system_fingerprint is None \
                and isinstance(value := obj.get("system_fingerprint"), str):
            self.system_fingerprint = value
        usage = obj.get("usage")
        if usage:
            if type(usage) is not dict:
                self.unreadable += 1
                return
            self.usage = usage
        for choice in choices:
            if not self._feed_choice(choice):
                self.unreadable += 1
                return

    def _feed_choice(self, choice: Any) -> bool:
        """Fold one streamed choice in; False (the rest left out) on a wrong shape."""
        if type(choice) is not dict:
            return False
        index = choice.get("index", 0)
        delta = choice.get("delta")
        if type(index) is not int or (delta is not None and type(delta) is not dict):
            return False
        if delta:
            content = delta.get("content")
            if content:
                if type(content) is not str:
                    return False
                self._content.setdefault(index, []).append(content)
            else:
                self._content.setdefault(index, [])
            calls = delta.get("tool_calls")
            if calls and not self._feed_calls(index, calls):
                return False
        else:
            self._content.setdefault(index, [])
        finish = choice.get("finish_reason")
        if finish:
            if type(finish) is not str:
                return False
            self._finish[index] = finish
        return True

    def _feed_calls(self, index: int, calls: Any) -> bool:
        if type(calls) is not list:
            return False
        for call in calls:
            if type(call) is not dict:
                return False
            fn = call.get("function") or {}
            call_index, call_id = call.get("index", 0), call.get("id")
            name, arguments = (fn.get("name"), fn.get("arguments")) if type(fn) is dict \
                else (None, None)
            if type(fn) is not dict or type(call_index) is not int \
                    or (call_id and type(call_id) is not str) \
                    or (name and type(name) is not str) \
                    or (arguments and type(arguments) is not str):
                return False
            slot = self._tools.setdefault(index, {}).setdefault(
                call_index, {"id": None, "type": "function",
                             "function": {"name": "", "arguments": ""}})
            if call_id:
                slot["id"] = call_id
            if name:
                slot["function"]["name"] += name
            if arguments:
                slot["function"]["arguments"] += arguments
        return True

    @property
    def truncated(self) -> bool:
        """The stream ended without its end: no ``[DONE]``, no error event, and not every
        choice has a finish reason (an empty stream included)."""
        if self.done or self.error is not None:
            return False
        indexes = self._content.keys() | self._tools.keys() | self._finish.keys()
        return not indexes or any(not self._finish.get(i) for i in indexes)

    def drop_content(self) -> None:
        """Forget the answer gathered so far (its memory), keeping id and model: for a
        stream that went over the size the gateway holds."""
        self._content.clear()
        self._tools.clear()
        self._finish.clear()
        self.parser = SSEParser()

    def text(self, index: int = 0) -> str:
        return "".join(self._content.get(index, ()))

    def finish_reasons(self) -> list[str]:
        return [r for _, r in sorted(self._finish.items()) if r]

    def completion(self) -> dict[str, Any]:
        """A ``chat.completion``-shaped dict of what has streamed so far."""
        choices = []
        for index in sorted(self._content.keys() | self._finish.keys() | self._tools.keys()):
            message: dict[str, Any] = {"role": "assistant", "content": self.text(index) or None}
            if index in self._tools:
                message["tool_calls"] = [c for _, c in sorted(self._tools[index].items())]
            choices.append({"index": index, "message": message,
                            "finish_reason": self._finish.get(index)})
        out: dict[str, Any] = {"id": self.id, "object": "chat.completion",
                               "created": self.created, "model": self.model, "choices": choices}
        if self.usage is not None:
            out["usage"] = self.usage
        if self.system_fingerprint:
            out["system_fingerprint"] = self.system_fingerprint
        return out


# A non-null finish reason or usage object. Inside a JSON string a quote is
# escaped, so an unescaped ``"usage"`` followed by ``:`` is a key; a false match
# (content that happens to read like one) only costs a parse, never a wrong value.
_SUMMARY_FIELD = re.compile(rb'"(?:finish_reason|usage)"\s*:\s*(?!null\b)')
_TAIL_LIMIT = 1 << 20


def _has_summary_field(data: bytes, start: int = 0, end: int | None = None) -> bool:
    """Cheap pre-check (substring counts) before the regex; compact JSON, as every
    OpenAI-compatible server sends, never reaches the regex on content chunks."""
    end = len(data) if end is None else end
    reasons = data.count(b'"finish_reason"', start, end)
    if reasons == data.count(b'"finish_reason":null', start, end) \
            and data.find(b'"usage"', start, end) < 0:
        return False
    return _SUMMARY_FIELD.search(data, start, end) is not None


class StreamSummary:
    """The telemetry view of a chat completion stream: id, model, per-choice finish
    reasons and usage, as :meth:`completion` (the shape ``UpstreamTrace.response``
    reads). Unlike :class:`StreamAccumulator` it does not parse every chunk: the
    first JSON event is parsed (id, model), later events only when a byte scan
    finds a non-null ``finish_reason`` or ``usage`` in them. Events may be split
    across chunks anywhere; an unterminated event larger than 1 MiB is dropped.
    """

    __slots__ = ("_finish", "_first", "_tail", "id", "model", "usage")

    def __init__(self) -> None:
        self.id: str | None = None
        self.model: str | None = None
        self.usage: dict[str, Any] | None = None
        self._finish: dict[int, str] = {}
        self._tail = b""
        self._first = True

    def feed_bytes(self, chunk: bytes) -> None:
        buf = self._tail + chunk if self._tail else chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._tail = buf if len(buf) <= _TAIL_LIMIT else b""
            return
        self._tail = buf[end + 2:]
        if not self._first:  # _has_summary_field, inlined: this runs once per chunk
            reasons = buf.count(b'"finish_reason"', 0, end)
            if (reasons == buf.count(b'"finish_reason":null', 0, end)
                    and buf.find(b'"usage"', 0, end) < 0) \
                    or _SUMMARY_FIELD.search(buf, 0, end) is None:
                return
        for block in buf[:end].split(b"\n\n"):
            if b"data:" not in block:
                continue
            data = b"\n".join(line[5:].removeprefix(b" ") for line in block.split(b"\n")
                              if line.startswith(b"data:"))
            if self._first or _has_summary_field(data):
                self._parse(data)

    def _parse(self, data: bytes) -> None:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return  # [DONE], or not JSON
        if not isinstance(obj, dict) or ("error" in obj and "choices" not in obj):
            return
        self._first = False
        # The no-policy relay reads every stream through this: no shape may raise here.
        if self.id is None and isinstance(v := obj.get("id"), str):
            self.id = v
        if self.model is None and isinstance(v := obj.get("model"), str):
            self.model = v
        usage = obj.get("usage")
        if usage and isinstance(usage, dict):
            self.usage = usage
        choices = obj.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                if isinstance(choice, dict) and (reason := choice.get("finish_reason")):
                    index = choice.get("index", 0)
                    if isinstance(reason, str) and isinstance(index, int):
                        self._finish[index] = reason

    def finish_reasons(self) -> list[str]:
        return [r for _, r in sorted(self._finish.items())]

    def completion(self) -> dict[str, Any]:
        """``{"id", "model", "choices": [{"index", "finish_reason"}], "usage"?}``."""
        out: dict[str, Any] = {"id": self.id, "model": self.model,
                               "choices": [{"index": i, "finish_reason": r}
                                           for i, r in sorted(self._finish.items())]}
        if self.usage is not None:
            out["usage"] = self.usage
        return out
