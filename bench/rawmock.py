"""Lean mock upstream: a raw asyncio HTTP/1.1 server answering with canned bytes.

    python bench/mock_upstream.py --impl raw --port 9100 [--latency-ms 50] [--chunks 20]

The same answers as ``mock_upstream.LeanUpstream`` (a JSON completion, or an SSE
stream of the role chunk, ``--chunks`` content chunks, the stop chunk and ``[DONE]``;
``GET /v1/models``) without uvicorn and ASGI in between: each connection is an
:class:`asyncio.Protocol` that frames requests by ``content-length`` (or
``transfer-encoding: chunked``), looks for ``"stream":true`` in the body, and writes
one pre-built response — the JSON reply with ``content-length``, the stream as
HTTP/1.1 chunks (one per event) — after ``latency_ms``. Keep-alive is HTTP/1.1's
default; a request with ``connection: close`` (or HTTP/1.0) is answered and the
connection closed. Requests on a connection are answered in order (pipelining
works). Anything malformed or over the bounds gets a 400 and a close.

Why: on a 2-core box the mock shares the cores with the system under test; uvicorn's
per-request cost (ASGI scope, messages, header lists) is most of what this mock spends.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["RawUpstream", "serve"]

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024

_NOT_FOUND_BODY = b'{"error":{"message":"not found","type":"mock"}}'
_MODELS = (b'{"object":"list","data":[{"id":"bench","object":"model","created":0,'
           b'"owned_by":"bench"}]}')


def _response(status: bytes, ctype: bytes, body: bytes, extra: bytes = b"") -> bytes:
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: " + ctype
            + b"\r\nx-request-id: req_bench\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)


_BAD = _response(b"400 Bad Request", b"application/json",
                 b'{"error":{"message":"bad request","type":"mock"}}', b"connection: close\r\n")


class RawUpstream:
    """The canned responses (built once) and the server's settings."""

    def __init__(self, json_body: bytes, sse_events: list[bytes], latency_ms: float = 0.0,
                 chunk_delay_ms: float = 0.0) -> None:
        self.latency = latency_ms / 1000
        self.chunk_delay = chunk_delay_ms / 1000
        self.json = _response(b"200 OK", b"application/json", json_body)
        self.models = _response(b"200 OK", b"application/json", _MODELS)
        self.not_found = _response(b"404 Not Found", b"application/json", _NOT_FOUND_BODY)
        self.sse_head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8"
                         b"\r\ncache-control: no-cache\r\nx-request-id: req_bench"
                         b"\r\ntransfer-encoding: chunked\r\n\r\n")
        self.sse_chunks = [b"%x\r\n%s\r\n" % (len(e), e) for e in sse_events]
        self.sse_end = b"0\r\n\r\n"
        self.sse = self.sse_head + b"".join(self.sse_chunks) + self.sse_end

    def protocol(self) -> _MockConn:
        return _MockConn(self)


class _MockConn(asyncio.Protocol):
    def __init__(self, mock: RawUpstream) -> None:
        self.mock = mock
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.pending: deque[tuple[bytes, bool]] = deque()
        """(route, close) of requests read but not answered yet (latency > 0)."""
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        self.buf = self.buf + data if self.buf else data
        while self.buf and not self.closed:
            request = self._one()
            if request is None:
                return
            self._answer(*request)

    def _one(self) -> tuple[bytes, bool] | None:
        """Frame one request off the buffer: (what to send, close after), or None."""
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > MAX_HEAD:
                self._bad()
            return None
        head = self.buf[:end]
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            self._bad()
            return None
        method, path, version = parts
        close = version == b"HTTP/1.0"
        length = 0
        chunked = False
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                self._bad()
                return None
            name = name.strip().lower()
            if name == b"content-length":
                value = value.strip()
                if not value.isdigit() or int(value) > MAX_BODY:
                    self._bad()
                    return None
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                close = value.strip().lower() == b"close"
        start = end + 4
        if chunked:
            framed = _dechunk(self.buf, start)
            if framed is None:
                if len(self.buf) > MAX_HEAD + MAX_BODY:
                    self._bad()
                return None
            chunked_body, stop = framed
            if chunked_body is None:
                self._bad()
                return None
            body = chunked_body
        else:
            if len(self.buf) < start + length:
                return None
            body, stop = self.buf[start:start + length], start + length
        self.buf = self.buf[stop:]
        if method == b"POST" and path.split(b"?")[0].endswith(b"/chat/completions"):
            stream = b'"stream":true' in body.replace(b" ", b"")
            return (b"sse" if stream else b"json"), close
        if method == b"GET" and path.split(b"?")[0].endswith(b"/models"):
            return b"models", close
        return b"404", close

    def _answer(self, route: bytes, close: bool) -> None:
        if self.mock.latency:
            self.pending.append((route, close))
            asyncio.get_running_loop().call_later(self.mock.latency, self._due)
        else:
            self._send(route, close)

    def _due(self) -> None:
        if self.pending and not self.closed:
            self._send(*self.pending.popleft())

    def _send(self, route: bytes, close: bool) -> None:
        t = self.transport
        if t is None or self.closed:
            return
        if route == b"sse" and self.mock.chunk_delay:
            self._drip(close)
            return
        data = {b"json": self.mock.json, b"sse": self.mock.sse,
                b"models": self.mock.models}.get(route, self.mock.not_found)
        if close:  # say so, after the status line
            data = data.replace(b"\r\n", b"\r\nconnection: close\r\n", 1)
        t.write(data)
        if close:
            t.close()
            self.closed = True

    def _drip(self, close: bool) -> None:
        """A stream with ``chunk_delay`` between events (not pipelined: one at a time)."""
        loop = asyncio.get_running_loop()
        t = self.transport
        assert t is not None
        head = self.mock.sse_head
        if close:
            head = head.replace(b"\r\n", b"\r\nconnection: close\r\n", 1)
        t.write(head + self.mock.sse_chunks[0])
        rest = self.mock.sse_chunks[1:] + [self.mock.sse_end]
        for n, piece in enumerate(rest, 1):
            last = n == len(rest)
            loop.call_later(self.mock.chunk_delay * n, self._write_piece, piece,
                            close and last)

    def _write_piece(self, piece: bytes, close: bool) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(piece)
            if close:
                self.transport.close()
                self.closed = True

    def _bad(self) -> None:
        if self.transport is not None:
            self.transport.write(_BAD)
            self.transport.close()
        self.closed = True
        self.buf = b""


def _dechunk(buf: bytes, pos: int) -> tuple[bytes | None, int] | None:
    """A chunked request body from ``buf[pos:]``: (body, end), (None, 0) when malformed,
    None when incomplete."""
    pieces: list[bytes] = []
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        try:
            size = int(buf[pos:eol].split(b";", 1)[0].strip(), 16)
        except ValueError:
            return None, 0
        pos = eol + 2
        if size == 0:
            end = buf.find(b"\r\n\r\n", pos - 2)
            return (b"".join(pieces), end + 4) if end >= 0 else None
        if len(buf) < pos + size + 2:
            return None
        pieces.append(buf[pos:pos + size])
        pos += size + 2


async def serve(mock: RawUpstream, host: str, port: int) -> None:
    """Serve until cancelled (loopback only: the caller passes 127.0.0.1)."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(mock.protocol, host, port, backlog=4096,
                                      reuse_address=True)
    async with server:
        await server.serve_forever()
