"""Limits of the HTTP server itself (``server.*``), enforced before a request reaches the app.

uvicorn bounds none of these for its httptools protocol: a connection that never
finishes its headers is held forever (the keep-alive timer only runs *between*
requests), header lines of any size are accumulated before the app (and its
authentication) sees anything, and connections are accepted without limit
(``limit_concurrency`` answers 503 only once a request's headers are in, and counts
every open connection against requests on the existing ones). So ``gateway serve``
runs :func:`limited_protocol`, uvicorn's own httptools protocol with three checks, and
the gateway's answer where uvicorn has its own:

- ``server.max_connections`` — a connection beyond it is answered 503 at once
  (before anything is read) and closed;
- ``server.header_timeout`` — a request whose headers are not complete that many
  seconds after the connection opened (or, on a kept-alive connection, after the
  request's first byte) is answered 408 and the connection closed;
- ``server.max_header_bytes`` — request line and headers over it: 431, closed. Counted
  as bytes arrive, so at most one network read (≤ 256 KiB) past the limit is held;
- a request the HTTP parser refuses (a NUL in a header or the path, a bad
  ``content-length``, ``content-length`` with ``chunked``, not HTTP at all) — uvicorn
  answers a ``text/plain`` 400; here it is 400 ``invalid_http`` in the OpenAI shape,
  connection closed, nothing reaches the app (uvicorn logs its own warning line).

Each answer has the OpenAI error shape and ``connection: close``; each kind is
logged as a warning on ``gateway.server``, at most once per :data:`LOG_EVERY`
seconds (with how many more happened meanwhile), so an attack cannot flood the log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.errors import error_body
from gateway.settings import ServerConfig

__all__ = ["LOG_EVERY", "limited_protocol"]

log = logging.getLogger("gateway.server")

LOG_EVERY = 10.0
"""Seconds between two warning lines of one kind (the rest are counted)."""


def _response(status: int, reason: str, message: str, type_: str, code: str,
              extra: bytes = b"") -> bytes:
    body = orjson.dumps(error_body(message, type_, code))
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n").encode() + extra \
        + b"\r\n" + body


class _Warnings:
    """One warning line per kind per :data:`LOG_EVERY` seconds; the rest counted."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._more: dict[str, int] = {}

    def warn(self, kind: str, message: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last.get(kind, -LOG_EVERY) < LOG_EVERY:
            self._more[kind] = self._more.get(kind, 0) + 1
            return
        more = self._more.pop(kind, 0)
        self._last[kind] = now
        if more:
            log.warning(message + " (and %d more in the last %.0fs)", *args, more, LOG_EVERY)
        else:
            log.warning(message, *args)


def limited_protocol(limits: ServerConfig) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with ``limits`` (pass as ``uvicorn.Config(http=…)``)."""
    max_connections = limits.max_connections
    header_timeout = limits.header_timeout
    max_header_bytes = limits.max_header_bytes
    warnings = _Warnings()
    busy = _response(503, "Service Unavailable",
                     "The gateway has too many open connections; retry later.",
                     "service_unavailable", "too_many_connections", b"retry-after: 1\r\n")
    slow = _response(408, "Request Timeout",
                     f"The request headers did not arrive within {header_timeout:g}s.",
                     "invalid_request_error", "request_timeout")
    invalid = _response(400, "Bad Request",
                        "The request is not valid HTTP/1.1: the server's parser refused it.",
                        "invalid_request_error", "invalid_http")
    large = _response(431, "Request Header Fields Too Large",
                      f"The request line and headers are over {max_header_bytes} bytes.",
                      "invalid_request_error", "request_headers_too_large")

    class LimitedHttpToolsProtocol(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._in_headers = True
            self._header_bytes = 0
            self._header_timer: asyncio.TimerHandle | None = None
            self._refused = False  # this request's headers were too large: ignore the rest
            self._shed = False

        def _peer(self) -> str:
            return f"{self.client[0]}:{self.client[1]}" if self.client else "?"

        # -- connections ---------------------------------------------------------------

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(self.connections) >= max_connections:
                self._shed = True
                self.transport = transport  # closed again, harmlessly, by connection_lost
                transport.write(busy)
                transport.close()
                peer = transport.get_extra_info("peername")
                warnings.warn("shed", "shedding a connection from %s: %d connections open "
                              "(server.max_connections)", peer[0] if peer else "?",
                              len(self.connections))
                return
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        # -- header time ---------------------------------------------------------------

        def _arm(self) -> None:
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(header_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _too_slow(self) -> None:
            self._header_timer = None
            if not self._in_headers or self.transport.is_closing():
                return
            warnings.warn("slow", "closing a connection from %s: request headers not "
                          "complete within %gs (server.header_timeout)", self._peer(),
                          header_timeout)
            if self.cycle is None or self.cycle.response_complete:
                self.transport.write(slow)
            self.transport.close()

        # -- header size ---------------------------------------------------------------

        def _refuse_large(self) -> None:
            self._refused = True
            warnings.warn("large", "closing a connection from %s: request headers over "
                          "%d bytes (server.max_header_bytes)", self._peer(),
                          max_header_bytes)
            self._disarm()
            if self.cycle is None or self.cycle.response_complete:
                self.transport.write(large)
            self.transport.close()

        def data_received(self, data: bytes) -> None:
            if self._shed or self.transport.is_closing():
                return
            if self._in_headers:
                self._header_bytes += len(data)
            super().data_received(data)
            if self._in_headers and self._header_bytes > max_header_bytes \
                    and not self.transport.is_closing():
                self._refuse_large()

        # -- what the parser refuses ---------------------------------------------------

        def send_400_response(self, msg: str) -> None:
            # uvicorn's text/plain "Invalid HTTP request received.", in the gateway's shape.
            self._disarm()
            self.transport.write(invalid)
            self.transport.close()

        # -- parser callbacks ----------------------------------------------------------

        def on_message_begin(self) -> None:
            self._in_headers = True
            self._refused = False
            self._arm()  # a kept-alive connection's next request: from its first byte
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._in_headers = False
            self._disarm()
            # Only when more arrived than the limit can the headers be over it.
            if self._header_bytes > max_header_bytes and _header_size(self) > max_header_bytes:
                self._refuse_large()  # no app call; the parser's next callbacks are ignored
                return
            self._header_bytes = 0
            super().on_headers_complete()

        def on_body(self, body: bytes) -> None:
            if not self._refused:
                super().on_body(body)

        def on_message_complete(self) -> None:
            self._in_headers = True
            self._header_bytes = 0
            if not self._refused:
                super().on_message_complete()

    return LimitedHttpToolsProtocol


def _header_size(protocol: Any) -> int:
    """Request line and header bytes as sent (without line endings' variations)."""
    return len(protocol.url) + sum(len(n) + len(v) + 4 for n, v in protocol.headers) + 16
