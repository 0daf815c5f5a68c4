"""Plain-ASGI helpers for the hot path: read a bounded body, send responses and
errors, and notice a client that went away.

The proxy endpoints are raw ASGI callables (no ``Request``/``Response`` objects,
no ``BaseHTTPMiddleware``, which would also break contextvar propagation).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import orjson

from gateway.errors import GatewayError, PayloadTooLarge
from gateway.wire.duplicates import duplicate_key
from gateway.wire.messages import load_object, parse_object, parsed, refuse_duplicate, settle

__all__ = ["LARGE_BODY", "WATCH_AFTER", "ClientGone", "DisconnectWatcher", "Offload", "header_map",
           "read_body", "read_object", "refuse_duplicate_keys", "send_bytes", "send_error",
           "send_json"]

Scope = Mapping[str, Any]
Headers = list[tuple[bytes, bytes]]

JSON_CT = (b"content-type", b"application/json")


class ClientGone(Exception):
    """The client disconnected before the request body was read."""


def header_map(scope: Scope) -> dict[str, str]:
    """Request headers as a lower-case ``str`` dict (last value wins)."""
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}


async def read_body(receive: Any, limit: int, content_length: str | None) -> bytes:
    """Read the whole request body, refusing more than ``limit`` bytes (413)."""
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            declared = 0
        if declared > limit:
            raise PayloadTooLarge(
                f"request body of {declared} bytes exceeds the limit of {limit} bytes")
    first = await receive()
    if first["type"] == "http.disconnect":
        raise ClientGone
    body: bytes = first.get("body", b"")
    if not first.get("more_body"):
        if len(body) > limit:
            raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
        return body
    parts = [body]
    size = len(body)
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
        parts.append(chunk)
        if not message.get("more_body"):
            return b"".join(parts)


LARGE_BODY = 1024 * 1024
"""A request body this large (bytes) is parsed in steps the event loop runs between."""


Offload = Callable[[Callable[[bytes], Any], bytes], Awaitable[Any]]
"""``offload(fn, arg)``: ``fn(arg)`` computed in another process (a worker of
``gateway.pool``), awaited; ``fn`` and its result pickle. The engine hands one out
for a body large enough to be worth the round trip (``Engine.offload``), None
otherwise."""


async def read_object(body: bytes, offload: Offload | None = None) -> dict[str, Any]:
    """``body`` as a JSON object with no duplicate key (:func:`~gateway.wire.messages.
    parse_object`), without one large body holding the event loop for the sum of its
    passes. With ``offload`` the parse and the scan both run in another process
    (:func:`~gateway.wire.messages.parsed`): the loop only unpickles the object.
    Otherwise, from :data:`LARGE_BODY` up, the loop runs other clients between the
    body's assembly, its parse, and the duplicate-key scan, which runs on a thread
    (the standard library's scanner calls back into Python per object, so the GIL
    passes to the loop at least every switch interval; its longest hold is decoding
    the longest single string). Either way the verdict is awaited: a duplicate key or
    invalid JSON is refused exactly as for a small body."""
    if offload is not None:
        return settle(await offload(parsed, body))
    if len(body) < LARGE_BODY:
        return parse_object(body)
    await asyncio.sleep(0)
    payload = load_object(body)
    await refuse_duplicate_keys(body)
    return payload


async def refuse_duplicate_keys(body: bytes) -> None:
    """400 ``duplicate_key`` when the JSON document ``body`` names a key twice in one
    object (:func:`gateway.wire.messages.refuse_duplicate_keys`); from
    :data:`LARGE_BODY` up, scanned on a thread (see :func:`read_object`)."""
    if len(body) < LARGE_BODY:
        refuse_duplicate(duplicate_key(body))
    else:
        refuse_duplicate(await asyncio.to_thread(duplicate_key, body))


async def send_bytes(send: Any, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]],
                     content_type: tuple[bytes, bytes] | None = JSON_CT) -> None:
    out = [h for h in headers if h[0] != b"content-length"]
    if content_type is not None and not any(k == b"content-type" for k, _ in out):
        out.append(content_type)
    out.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_json(send: Any, status: int, obj: Any,
                    headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    await send_bytes(send, status, orjson.dumps(obj), headers)


async def send_error(send: Any, err: GatewayError,
                     headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in err.headers.items()]
    await send_bytes(send, err.status, err.body_bytes(), [*headers, *extra])


WATCH_AFTER = 0.25
"""Seconds into a request before its :class:`DisconnectWatcher` starts listening: a
request answered sooner never starts one (a task per request was ~12 µs of the relay's
CPU; docs/benchmarks.md, session 6), and a client that leaves is noticed at most this
much later."""


class DisconnectWatcher:
    """Cancel the current task if the client disconnects before :meth:`disarm`.

    Used while waiting on upstream, so a client that goes away cancels the
    upstream request instead of leaving it running. ``disconnected`` tells the
    cancelled code why it was cancelled. It listens from ``delay`` seconds on
    (:data:`WATCH_AFTER`; 0: at once).
    """

    __slots__ = ("_armed", "_receive", "_start", "_task", "_watch", "disconnected")

    def __init__(self, receive: Any, delay: float = WATCH_AFTER) -> None:
        self._task = asyncio.current_task()
        self._armed = True
        self.disconnected = False
        self._receive = receive
        self._watch: asyncio.Future[None] | None = None
        self._start: asyncio.TimerHandle | None = None
        if delay > 0:
            self._start = asyncio.get_running_loop().call_later(delay, self._begin)
        else:
            self._begin()

    def _begin(self) -> None:
        self._start = None
        if self._armed:
            self._watch = asyncio.ensure_future(self._run(self._receive))

    async def _run(self, receive: Any) -> None:
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    if self._armed and self._task is not None:
                        self.disconnected = True
                        self._task.cancel()
                    return
        except asyncio.CancelledError:
            # disarm()'s cancel (nobody awaits this task): end quietly. Ended by the
            # exception, the task would keep it, its traceback this frame, the frame
            # this watcher, the watcher the task: a reference cycle per request, left
            # to the collector (~20 objects; docs/benchmarks.md, session 6).
            return

    def disarm(self) -> None:
        self._armed = False
        if self._start is not None:  # not listening yet: it never will
            self._start.cancel()
            self._start = None
        if self._watch is not None:
            self._watch.cancel()
