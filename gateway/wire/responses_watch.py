"""Watching a Responses API stream relayed unparsed: bounded, byte scans on the way.

A stream relayed without verification (no policy; shadow past ``max_response_bytes``)
is not folded, but two things are still read from it:

- :class:`ResponsesSummary` — what telemetry records of it (id, model, status, usage,
  the output items without their text), as a ``response`` object;
- :class:`ResponsesEndWatch` — whether it reached its end (a terminal or ``error``
  event, then the end of that event), or the upstream just stopped (it was cut).

Both scan each chunk's bytes for a terminal event's ``"type"`` (or
``response.created``) before looking further, keep at most :data:`TAIL_LIMIT` bytes
of an unfinished event, and parse only events that matched and are at most
:data:`EVENT_LIMIT` bytes: memory stays bounded whatever the upstream sends, and an
ordinary delta costs one regex scan.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["EVENT_LIMIT", "TAIL_LIMIT", "ResponsesEndWatch", "ResponsesSummary"]

TAIL_LIMIT = 1 << 20
"""The most of an unfinished event kept between chunks (1 MiB; more is dropped)."""
EVENT_LIMIT = 1 << 20
"""The largest event parsed for the summary (a terminal event carries the whole
response; a longer one still ends the stream but leaves the summary as it was)."""

_ENDING = re.compile(
    rb'"type"\s*:\s*"(?:response\.(?:completed|incomplete|failed)|error)"|data: ?\[DONE\]')
"""A terminal or ``error`` event's type; ``[DONE]`` (not OpenAI's; a server that sends
it ends there)."""
_SUMMED = re.compile(
    rb'"type"\s*:\s*"(response\.(?:created|completed|incomplete|failed))"')
_MARGIN = 64
"""Bytes of the previous chunk kept for the scan: a type split across chunks."""


def _data(block: bytes) -> bytes:
    lines = block.split(b"\n")
    return b"\n".join(line[5:].removeprefix(b" ") for line in lines if line.startswith(b"data:"))


def _textless(item: Any) -> Any:
    """An output item without the model's text (what the summary may keep)."""
    if not isinstance(item, dict):
        return item
    if item.get("type") == "message":
        return {**item, "content": []}
    if "arguments" in item:
        return {**item, "arguments": ""}
    if "input" in item:
        return {**item, "input": ""}
    return {k: v for k, v in item.items() if k in ("type", "id", "status", "call_id", "name")}


class ResponsesSummary:
    """The telemetry view of a Responses stream (see the module docstring)."""

    __slots__ = ("_tail", "response")

    def __init__(self) -> None:
        self.response: dict[str, Any] = {"object": "response", "output": []}
        self._tail = b""

    def feed_bytes(self, chunk: bytes) -> None:
        buf = self._tail + chunk if self._tail else chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._tail = buf if len(buf) <= TAIL_LIMIT else b""
            return
        done, self._tail = buf[:end], buf[end + 2:]
        if len(self._tail) > TAIL_LIMIT:
            self._tail = b""
        if _SUMMED.search(done) is None:
            return
        for block in done.split(b"\n\n"):
            if len(block) > EVENT_LIMIT or _SUMMED.search(block) is None:
                continue
            try:
                event = orjson.loads(_data(block))
            except orjson.JSONDecodeError:
                continue
            if isinstance(event, dict) and isinstance(event.get("response"), dict):
                self._take(event["response"])

    def _take(self, response: dict[str, Any]) -> None:
        out = self.response
        for key in ("id", "model", "status", "created_at", "usage", "incomplete_details"):
            if response.get(key) is not None:
                out[key] = response[key]
        output = response.get("output")
        if isinstance(output, list) and output:
            out["output"] = [_textless(item) for item in output]

    def completion(self) -> dict[str, Any]:
        return dict(self.response)


class ResponsesEndWatch:
    """Whether a Responses stream relayed unparsed ended (see the module docstring):
    a terminal (``response.completed`` / ``incomplete`` / ``failed``) or ``error``
    event was seen, and the stream's last bytes close an event."""

    __slots__ = ("_last", "_margin", "_seen")

    def __init__(self) -> None:
        self._seen = False
        self._last = b""
        self._margin = b""

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        if not self._seen:
            scan = self._margin + chunk
            self._seen = _ENDING.search(scan) is not None
            self._margin = scan[-_MARGIN:]
        self._last = (self._last + chunk)[-4:] if len(chunk) < 4 else chunk[-4:]

    def ended(self) -> bool:
        return self._seen and self._last.endswith((b"\n\n", b"\r\n\r\n", b"\r\r"))
