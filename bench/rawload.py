"""Lean closed-loop load generator: raw asyncio protocols, pre-built request bytes.

    python bench/loadgen.py URL --client raw …      # same flags and output as aiohttp's

The aiohttp client (``bench/loadgen.py``) costs ~0.1–0.3 ms of CPU per request: on a
2-core box that is a large share of the core the system under test needs (issue 12's
``serve --workers 2`` target). This one keeps ``concurrency`` kept-alive HTTP/1.1
connections, each a :class:`asyncio.Protocol` driven by callbacks (no coroutine, no
header dict, no stream reader per request): it writes the pre-built request bytes,
frames the response by ``content-length`` or ``transfer-encoding: chunked``, and on
the last byte records the latency and writes the next request.

Every response is checked, as aiohttp's path checks it: the status must be ``ok_status``
(200) — anything else counts in ``statuses`` and as an error —, the body must be complete
(the whole ``content-length``, or a chunked body up to its terminating ``0`` chunk;
a connection closed before that is an error, and the connection is re-opened), and the
body must look whole: a JSON reply starts with ``{`` and ends with ``}``, a stream ends
with ``data: [DONE]`` (or an error event). A response the server marks ``connection: close`` is counted,
then the connection is re-opened.

Returns the same :class:`loadgen.LoadResult` as ``loadgen.run_load`` (same bounds:
``requests`` started and ``warmup + duration`` seconds; same warm-up, ramp and
``on_measure`` semantics), so the benches switch with ``--client raw|aiohttp``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Protocol
from urllib.parse import urlsplit

__all__ = ["ResponseParser", "request_bytes", "run_load_raw"]

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024


class ProtocolError(Exception):
    """The response was not well-formed HTTP/1.1 (or exceeded a bound)."""


def request_bytes(url: str, body: bytes, headers: dict[str, str]) -> bytes:
    """One ``POST`` with ``content-length``, keep-alive (HTTP/1.1's default)."""
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"POST {target} HTTP/1.1", f"host: {parts.netloc}"]
    lines += [f"{k}: {v}" for k, v in headers.items()
              if k.lower() not in ("host", "content-length", "connection")]
    lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class ResponseParser:
    """Incremental HTTP/1.1 response framing for one connection.

    :meth:`feed` takes bytes as they arrive and returns the completed responses as
    ``(status, body, close)`` tuples (``close``: the server said ``connection: close``),
    keeping whatever follows for the next one. ``first_body_at`` is the
    ``time.perf_counter()`` of the current response's first body bytes (TTFC).
    Raises :class:`ProtocolError` on anything malformed or out of bounds.
    """

    __slots__ = ("buf", "status", "close", "length", "chunked", "body", "in_body",
                 "first_body_at", "chunk_left", "chunk_state")

    def __init__(self) -> None:
        self.buf = b""
        self.first_body_at = 0.0
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.close = False
        self.length = -1
        self.chunked = False
        self.body: list[bytes] = []
        self.in_body = False
        self.chunk_left = 0
        self.chunk_state = 0  # 0: size line, 1: data, 2: CRLF after data, 3: trailers

    def feed(self, data: bytes) -> list[tuple[int, bytes, bool]]:
        self.buf = self.buf + data if self.buf else data
        done: list[tuple[int, bytes, bool]] = []
        while self.buf:
            if not self.in_body:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self.buf) > MAX_HEAD:
                        raise ProtocolError("response head too large")
                    break
                self._head(self.buf[:end])
                self.buf = self.buf[end + 4:]
                self.in_body = True
                self.first_body_at = 0.0
                if not self.chunked and self.length == 0:
                    done.append(self._finish())
                    continue
                if not self.buf:
                    break
            if self.first_body_at == 0.0:
                self.first_body_at = time.perf_counter()
            if self.chunked:
                if not self._chunks():
                    break
            else:
                take = self.length - sum(map(len, self.body))
                if len(self.buf) < take:
                    self.body.append(self.buf)
                    self.buf = b""
                    break
                self.body.append(self.buf[:take])
                self.buf = self.buf[take:]
            done.append(self._finish())
        return done

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        if not version.startswith(b"HTTP/1.") or len(rest) < 3 or not rest[:3].isdigit():
            raise ProtocolError(f"bad status line {lines[0][:80]!r}")
        self.status = int(rest[:3])
        self.close = version == b"HTTP/1.0"
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise ProtocolError("bad header line")
            name = name.strip().lower()
            value = value.strip()
            if name == b"content-length":
                if not value.isdigit() or int(value) > MAX_BODY:
                    raise ProtocolError("bad content-length")
                self.length = int(value)
            elif name == b"transfer-encoding":
                self.chunked = value.lower() == b"chunked"
                if not self.chunked:
                    raise ProtocolError(f"unsupported transfer-encoding {value[:40]!r}")
            elif name == b"connection":
                self.close = value.lower() == b"close"
        if self.chunked and self.length >= 0:
            raise ProtocolError("content-length with chunked")
        if not self.chunked and self.length < 0:
            raise ProtocolError("no content-length and not chunked (read-to-close bodies "
                                "are not supported)")

    def _chunks(self) -> bool:
        """Consume chunked body bytes; True when the terminating chunk and trailers are in."""
        while True:
            if self.chunk_state == 0:
                end = self.buf.find(b"\r\n")
                if end < 0:
                    if len(self.buf) > 1024:
                        raise ProtocolError("chunk size line too long")
                    return False
                size_text = self.buf[:end].split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise ProtocolError("bad chunk size") from None
                self.buf = self.buf[end + 2:]
                if size == 0:
                    self.chunk_state = 3
                else:
                    self.chunk_left = size
                    self.chunk_state = 1
            elif self.chunk_state == 1:
                if not self.buf:
                    return False
                piece = self.buf[:self.chunk_left]
                self.body.append(piece)
                self.chunk_left -= len(piece)
                self.buf = self.buf[len(piece):]
                if self.chunk_left:
                    return False
                self.chunk_state = 2
            elif self.chunk_state == 2:
                if len(self.buf) < 2:
                    return False
                if self.buf[:2] != b"\r\n":
                    raise ProtocolError("chunk not followed by CRLF")
                self.buf = self.buf[2:]
                self.chunk_state = 0
            else:  # trailers, up to an empty line
                end = self.buf.find(b"\r\n")
                if end < 0:
                    return False
                self.buf = self.buf[end + 2:]
                if end == 0:
                    return True

    def _finish(self) -> tuple[int, bytes, bool]:
        out = (self.status, b"".join(self.body), self.close)
        self._reset()
        return out


def body_complete(body: bytes, stream: bool) -> bool:
    """Does a 200 body look whole: a JSON object, or an SSE stream whose last event is
    ``[DONE]`` or an error event (how the gateway ends a stream it stops)."""
    if stream:
        last = body.rstrip().rsplit(b"\n\n", 1)[-1]
        return last == b"data: [DONE]" or (last.startswith(b"data: {") and b'"error"' in last
                                           and last.endswith(b"}"))
    stripped = body.strip()
    return stripped[:1] == b"{" and stripped[-1:] == b"}"


class _Conn(asyncio.Protocol):
    def __init__(self, run: _Run) -> None:
        self.run = run
        self.transport: asyncio.Transport | None = None
        self.parser = ResponseParser()
        self.t0 = 0.0
        self.busy = False
        self.lost: asyncio.Future[None] = run.loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def send(self, payload: bytes) -> None:
        assert self.transport is not None
        self.t0 = time.perf_counter()
        self.busy = True
        self.transport.write(payload)

    def data_received(self, data: bytes) -> None:
        try:
            responses = self.parser.feed(data)
        except ProtocolError as exc:
            self.busy = False
            self.run.failed(self.t0, f"ProtocolError: {exc}")
            self._drop()
            return
        for status, body, close in responses:
            self.busy = False
            self.run.answered(self.t0, status, body,
                              self.parser.first_body_at or time.perf_counter())
            if close:
                self._drop()
                return
        if responses and self.transport is not None and not self.transport.is_closing():
            self.run.next(self)

    def _drop(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.busy:
            self.busy = False
            self.run.failed(self.t0, "connection closed before the response was complete"
                            + (f" ({exc})" if exc else ""))
        if not self.lost.done():
            self.lost.set_result(None)


class _Run:
    """Shared state of one load run (counts, bounds, the request bytes)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, result: LoadResultLike, *,
                 payloads: Sequence[bytes], stream: bool, requests: int, t_start: float,
                 deadline: float, ok_status: int,
                 on_measure: Callable[[], None] | None) -> None:
        self.loop = loop
        self.result = result
        self.payloads = payloads
        self.stream = stream
        self.requests = requests
        self.t_start = t_start
        self.deadline = deadline
        self.ok_status = ok_status
        self.on_measure = on_measure
        self.started = 0
        self.measuring = False
        self.cpu0 = time.process_time()

    def next(self, conn: _Conn) -> bool:
        """Send the next request on ``conn`` unless a bound is reached."""
        t0 = time.perf_counter()
        if self.started >= self.requests or t0 >= self.deadline:
            conn._drop()
            return False
        if not self.measuring and t0 >= self.t_start:
            self.measuring = True
            if self.on_measure is not None:
                self.on_measure()
            self.cpu0 = time.process_time()
        payload = self.payloads[self.started % len(self.payloads)]
        self.started += 1
        conn.send(payload)
        return True

    def answered(self, t0: float, status: int, body: bytes, t_first: float) -> None:
        if t0 < self.t_start:
            return  # warm-up
        r = self.result
        r.statuses[status] = r.statuses.get(status, 0) + 1
        if status != self.ok_status:
            self._error(f"status {status}: {body[:200]!r}")
            return
        if not body_complete(body, self.stream):
            self._error(f"incomplete body ({len(body)} bytes): {body[-80:]!r}")
            return
        r.completed += 1
        t1 = time.perf_counter()
        r.latencies_ms.append((t1 - t0) * 1000)
        if self.stream:
            r.ttfc_ms.append((t_first - t0) * 1000)

    def failed(self, t0: float, why: str) -> None:
        if t0 >= self.t_start:
            self._error(why)

    def _error(self, why: str) -> None:
        self.result.errors += 1
        if self.result.first_error is None:
            self.result.first_error = why


class LoadResultLike(Protocol):  # the fields of loadgen.LoadResult this module writes
    completed: int
    errors: int
    statuses: dict[int, int]
    latencies_ms: list[float]
    ttfc_ms: list[float]
    first_error: str | None


async def _connection_loop(run: _Run, host: str, port: int, delay: float) -> None:
    """One closed-loop connection: (re)connect, send, until a bound is reached."""
    if delay:
        await asyncio.sleep(delay)
    while run.started < run.requests and time.perf_counter() < run.deadline:
        try:
            _, conn = await run.loop.create_connection(lambda: _Conn(run), host, port)
        except OSError as exc:
            run.failed(time.perf_counter(), f"connect: {exc}")
            await asyncio.sleep(0.01)
            continue
        if not run.next(conn):
            await conn.lost
            return
        await conn.lost


async def run_load_raw(url: str, result: LoadResultLike, *, concurrency: int,
                       requests: int, duration: float, stream: bool,
                       payloads: Sequence[bytes], warmup: float = 0.0, ramp: float = 0.0,
                       on_measure: Callable[[], None] | None = None,
                       ok_status: int = 200) -> tuple[float, float]:
    """Fill ``result`` (a ``loadgen.LoadResult``); return (elapsed_s, client_cpu_s) of the
    measured window. Arguments are checked by ``loadgen.run_load``, which calls this."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or not parts.port:
        raise ValueError(f"the raw client speaks plain http to host:port, not {url!r}")
    loop = asyncio.get_running_loop()
    t_begin = time.perf_counter()
    t_start = t_begin + warmup
    run = _Run(loop, result, payloads=payloads, stream=stream, requests=requests,
               t_start=t_start, deadline=t_start + duration, ok_status=ok_status,
               on_measure=on_measure)
    if warmup == 0:
        run.measuring = True
        if on_measure is not None:
            on_measure()
        run.cpu0 = time.process_time()
    await asyncio.gather(*(_connection_loop(run, parts.hostname, parts.port,
                                            ramp * i / concurrency)
                           for i in range(concurrency)))
    t_end = time.perf_counter()
    if not run.measuring:
        return 0.0, 0.0
    return max(0.0, t_end - t_start), time.process_time() - run.cpu0
