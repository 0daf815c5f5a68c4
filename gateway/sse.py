"""Server-sent events for chat completion streams.

- :class:`SSEParser` turns arriving byte chunks into ``data:`` payloads (chunks may
  split events anywhere).
- :class:`StreamAccumulator` folds ``chat.completion.chunk`` objects into one
  ``chat.completion``-shaped summary: id, model, per-choice content, tool calls,
  finish reasons and usage.
- :func:`encode_event` / :data:`DONE` write events back.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["DONE", "SSEParser", "StreamAccumulator", "encode_event"]

DONE = b"data: [DONE]\n\n"


def encode_event(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


class SSEParser:
    """Incremental parser yielding each event's ``data`` field (joined lines)."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._buf + chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events: list[bytes] = []
        while True:
            end = buf.find(b"\n\n")
            if end < 0:
                break
            block, buf = buf[:end], buf[end + 2:]
            data = [line[5:].removeprefix(b" ") for line in block.split(b"\n")
                    if line.startswith(b"data:")]
            if data:
                events.append(b"\n".join(data))
        self._buf = buf
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

    def feed_bytes(self, chunk: bytes) -> None:
        for data in self.parser.feed(chunk):
            self.feed_data(data)

    def feed_data(self, data: bytes) -> None:
        if data.strip() == b"[DONE]":
            self.done = True
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if isinstance(obj, dict):
            self.feed_chunk(obj)

    def feed_chunk(self, obj: dict[str, Any]) -> None:
        if "error" in obj and "choices" not in obj:
            self.error = obj["error"] if isinstance(obj["error"], dict) else {"message": str(obj)}
            return
        self.id = self.id or obj.get("id")
        self.model = self.model or obj.get("model")
        self.created = self.created or obj.get("created")
        self.system_fingerprint = self.system_fingerprint or obj.get("system_fingerprint")
        if obj.get("usage"):
            self.usage = obj["usage"]
        for choice in obj.get("choices") or ():
            index = choice.get("index", 0)
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if content:
                self._content.setdefault(index, []).append(content)
            else:
                self._content.setdefault(index, [])
            for call in delta.get("tool_calls") or ():
                slot = self._tools.setdefault(index, {}).setdefault(
                    call.get("index", 0), {"id": None, "type": "function",
                                           "function": {"name": "", "arguments": ""}})
                if call.get("id"):
                    slot["id"] = call["id"]
                fn = call.get("function") or {}
                if fn.get("name"):
                    slot["function"]["name"] += fn["name"]
                if fn.get("arguments"):
                    slot["function"]["arguments"] += fn["arguments"]
            if choice.get("finish_reason"):
                self._finish[index] = choice["finish_reason"]

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
