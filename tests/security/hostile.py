"""A hostile (or broken) upstream: a raw asyncio HTTP/1.1 server in a background thread.

Not uvicorn: it writes exactly the bytes a misbehaving server would (a body far over
any cap, a gzip bomb, a stream that never ends or just stops, a reset in the middle
of a body, garbage where events belong, an HTML error page echoing the request's
``Authorization``). Every response ends the connection.

**One way to choose a behaviour: the first path segment.** The upstream a gateway is
configured with names it — ``base_url = up.base_url("gzip-bomb")`` is
``http://127.0.0.1:<port>/gzip-bomb/v1`` — so every request the gateway sends there
(chat, a judge call, ``GET /v1/models``, a forwarded ``DELETE /v1/files/x``, an
Anthropic ``/v1/messages``) gets that behaviour. :meth:`HostileUpstream.upstreams`
builds one upstream entry per behaviour, routed by a model of the same name, so one
gateway can reach them all with ``model="<behaviour>"``. Behaviours are
:data:`BEHAVIOURS` plus ``status-NNN`` (that status, an OpenAI error body), written
in :mod:`security.hostile_behaviours`.

What reached it is in ``requests`` (method, the wire target, ``raw_path`` — the path
as sent, without the behaviour segment — the decoded ``path``, ``query``, headers,
body, parsed ``payload``). ``forged`` headers are added to every response (what an
upstream would try to get through to clients). ``sent[behaviour]`` counts the body
bytes written before the peer went away (or the behaviour finished): with the
gateway's cap at 1 MiB, a body the gateway stopped reading early shows up as a few
MiB at most (socket buffers), one it read whole as all of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections import defaultdict
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

import orjson

from security.hostile_behaviours import (ANSWER, BEHAVIOURS, BOMB, LONG, PATIENCE, MiB, Request,
                                         behaviour, chat_chunk, completion, sse)

__all__ = ["ANSWER", "BEHAVIOURS", "BOMB", "LONG", "HostileUpstream", "MiB", "Request",
           "chat_chunk", "completion", "sse"]


class HostileUpstream:
    """``with HostileUpstream() as up: up.base_url("ok")``."""

    def __init__(self, forged: Sequence[tuple[bytes, bytes]] = ()) -> None:
        self.forged = list(forged)
        self.sent: dict[str, int] = defaultdict(int)
        self.requests: list[Request] = []
        self.holding = 0
        """Requests a ``hold`` behaviour is keeping until :meth:`release`."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hostile",
                                        daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._released: asyncio.Event | None = None
        self.port = 0

    # ---- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> HostileUpstream:
        self._thread.start()

        async def start() -> asyncio.Server:
            self._released = asyncio.Event()
            return await asyncio.start_server(self._connection, "127.0.0.1", 0)

        self._server = asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def base_url(self, behaviour: str = "ok", prefix: str = "") -> str:
        """The OpenAI-style base URL that gets ``behaviour`` (``prefix``: a path of the
        base URL's own between the behaviour and ``/v1``)."""
        return f"{self.url}/{behaviour}{prefix}/v1"

    def upstreams(self, *behaviours: str, **extra: Any) -> list[dict[str, Any]]:
        """Gateway ``upstreams`` entries: each behaviour (default: all) routed by the
        model of the same name; ``extra`` keys go into each entry."""
        return [{"name": b, "base_url": self.base_url(b), "models": [b], **extra}
                for b in (behaviours or tuple(BEHAVIOURS))]

    def last(self) -> Request:
        assert self.requests, "the upstream received no request"
        return self.requests[-1]

    def clear(self) -> None:
        """Forget requests and counts; the next ``hold`` requests wait again."""
        self.requests.clear()
        self.sent.clear()

        async def rearm() -> None:
            self._released = asyncio.Event()

        asyncio.run_coroutine_threadsafe(rearm(), self._loop).result(10)

    def release(self) -> None:
        """Let every ``hold`` request (now and until :meth:`clear`) finish."""
        def release() -> None:
            if self._released is not None:
                self._released.set()

        self._loop.call_soon_threadsafe(release)

    # ---- one connection, one request -----------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            req = await _read_request(reader)
            self.requests.append(req)
            await behaviour(req.behaviour)(req, _Conn(self, req.behaviour, reader, writer))
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def wait_released(self) -> None:
        assert self._released is not None
        self.holding += 1
        try:
            await asyncio.wait_for(self._released.wait(), PATIENCE)
        finally:
            self.holding -= 1


async def _read_request(reader: asyncio.StreamReader) -> Request:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        await reader.readuntil(b"\r\n")
        body = b"".join(parts)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    raw, _, query = target.partition("?")
    behaviour_name, _, rest = raw.removeprefix("/").partition("/")
    try:
        payload = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        payload = None
    return Request(method, target, behaviour_name, "/" + rest, unquote("/" + rest), query,
                   headers, body, payload)


class _Conn:
    """One response being written (implements ``Conn`` of the behaviours)."""

    def __init__(self, up: HostileUpstream, name: str, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.up, self.name, self.reader, self.writer = up, name, reader, writer

    @property
    def sent(self) -> int:
        return self.up.sent[self.name]

    async def wait_released(self) -> None:
        await self.up.wait_released()

    async def head(self, status: int, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()]
        raw = "\r\n".join(lines).encode("latin-1") + b"\r\n" + b"".join(
            k + b": " + v + b"\r\n" for k, v in self.up.forged) + b"connection: close\r\n\r\n"
        self.writer.write(raw)
        await self.writer.drain()

    async def body(self, data: bytes, chunked: bool = False) -> None:
        self.writer.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        await self.writer.drain()
        self.up.sent[self.name] += len(data)

    async def end_chunked(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()

    async def whole(self, status: int, body: bytes, content_type: str = "application/json",
                    **headers: str) -> None:
        await self.head(status, {"content-type": content_type,
                                 "content-length": str(len(body)), **headers})
        await self.body(body)

    def reset(self) -> None:
        """Abort the connection with a TCP RST (SO_LINGER 0), not a clean FIN."""
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    async def until_peer_leaves(self) -> None:
        """Wait (bounded) until the gateway gives up on this request and closes."""
        with contextlib.suppress(TimeoutError, ConnectionError):
            await asyncio.wait_for(self.reader.read(), PATIENCE)

    async def sse_head(self) -> None:
        await self.head(200, {"content-type": "text/event-stream",
                              "transfer-encoding": "chunked"})
