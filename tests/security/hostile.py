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
:data:`BEHAVIOURS` plus ``status-NNN`` (that status, an OpenAI error body).

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
import re
import socket
import struct
import threading
import zlib
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import orjson

__all__ = ["ANSWER", "BEHAVIOURS", "MiB", "HostileUpstream", "Request", "chat_chunk", "sse"]

MiB = 1024 * 1024
HUGE = 8 * MiB
"""Size of the huge JSON answer (the gateway's cap in the tests is 1 MiB)."""
ENDLESS = 64 * MiB
"""An "endless" stream stops here, so a gateway that reads it all still ends the test."""
LONG = 3 * MiB
"""A complete stream over the 1 MiB cap (relayed whole where nothing is verified)."""
BOMB = 64 * MiB
"""Inflated size of the gzip bomb (about 64 KiB on the wire)."""
PIECE = 64 * 1024
PATIENCE = 30.0
"""The longest any behaviour waits (for a release, or for the peer to give up)."""
ANSWER = "Paris is the capital of France."


def chat_chunk(delta: dict[str, Any], finish: str | None = None,
               model: str = "hostile") -> dict[str, Any]:
    return {"id": "chatcmpl-hostile", "object": "chat.completion.chunk", "created": 1,
            "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish}]}


def sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def completion(text: str, model: str = "hostile") -> bytes:
    return orjson.dumps({
        "id": "chatcmpl-hostile", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10}})


def _gzip(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def _bomb(size: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * MiB  # JSON whitespace: a parser reading it all would find no value
    return b"".join([c.compress(block) for _ in range(size // MiB)] + [c.flush()])


_BOMB = _bomb(BOMB)
ROLE = sse(chat_chunk({"role": "assistant", "content": ""}))
WORDS = sse(chat_chunk({"content": "word " * 200}))  # ~1.3 KiB per event
FINISH = sse(chat_chunk({}, "stop"))
DONE = b"data: [DONE]\n\n"


@dataclass
class Request:
    method: str
    target: str
    """The request target as written on the wire."""
    behaviour: str
    raw_path: str
    """The path as sent, after the behaviour segment (``/v1/…`` under a plain base_url)."""
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    payload: Any

    @property
    def stream(self) -> bool:
        return isinstance(self.payload, dict) and self.payload.get("stream") is True

    @property
    def model(self) -> str:
        return str(self.payload.get("model", "")) if isinstance(self.payload, dict) else ""


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
            await behaviour(req.behaviour)(self, req, _Conn(self, req.behaviour, reader,
                                                            writer))
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
    """Writing one response: head, body pieces (counted), a clean end or a reset."""

    def __init__(self, up: HostileUpstream, name: str, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.up, self.name, self.reader, self.writer = up, name, reader, writer

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


Behaviour = Callable[[HostileUpstream, Request, _Conn], Awaitable[None]]


def _error_body(message: str, code: str = "hostile") -> bytes:
    return orjson.dumps({"error": {"message": message, "type": "server_error", "param": None,
                                   "code": code}})


# ---- well-behaved ------------------------------------------------------------------------

async def _ok(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """Chat completions (JSON, or SSE for ``stream``), a model list, else an echo."""
    if req.path.endswith("/chat/completions"):
        if req.stream:
            await c.sse_head()
            for piece in (sse(chat_chunk({"role": "assistant", "content": ANSWER},
                                         model=req.model)),
                          sse(chat_chunk({}, "stop", model=req.model)), DONE):
                await c.body(piece, chunked=True)
            await c.end_chunked()
            return
        await c.whole(200, completion(ANSWER, req.model))
        return
    if req.path.endswith("/models"):
        await c.whole(200, orjson.dumps({"object": "list", "data": [
            {"id": "hostile-model", "object": "model", "created": 0, "owned_by": "x"}]}))
        return
    await c.whole(200, orjson.dumps({"object": "echo", "path": req.path}))


async def _gzip_ok(up: HostileUpstream, req: Request, c: _Conn) -> None:
    await c.whole(200, _gzip(completion(ANSWER)), **{"content-encoding": "gzip"})


async def _hold(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """A chat completion that waits for :meth:`HostileUpstream.release` (a stream sends
    its first event first, then waits)."""
    if req.stream:
        await c.sse_head()
        await c.body(sse(chat_chunk({"role": "assistant", "content": "Paris "})), chunked=True)
        await up.wait_released()
        for piece in (sse(chat_chunk({"content": "is the capital of France."})), FINISH, DONE):
            await c.body(piece, chunked=True)
        await c.end_chunked()
        return
    await up.wait_released()
    await c.whole(200, completion(ANSWER, req.model))


def _status(status: int) -> Behaviour:
    async def answer(up: HostileUpstream, req: Request, c: _Conn) -> None:
        await c.whole(status, _error_body("hostile error"))
    return answer


# ---- over every cap ----------------------------------------------------------------------

async def _huge_json(up: HostileUpstream, req: Request, c: _Conn, chunked: bool = False) -> None:
    """A well-formed chat completion of 8 MiB (content-length declared, or chunked)."""
    head, tail = completion("\x00").split(b"\\u0000")
    filler = b"a" * PIECE
    pieces = HUGE // PIECE
    size = len(head) + pieces * PIECE + len(tail)
    await c.head(200, {"content-type": "application/json",
                       **({"transfer-encoding": "chunked"} if chunked
                          else {"content-length": str(size)})})
    await c.body(head, chunked)
    for _ in range(pieces):
        await c.body(filler, chunked)
    await c.body(tail, chunked)
    if chunked:
        await c.end_chunked()


async def _huge_json_chunked(up: HostileUpstream, req: Request, c: _Conn) -> None:
    await _huge_json(up, req, c, chunked=True)


async def _gzip_bomb(up: HostileUpstream, req: Request, c: _Conn) -> None:
    await c.head(200, {"content-type": "application/json", "content-encoding": "gzip",
                       "content-length": str(len(_BOMB))})
    for i in range(0, len(_BOMB), PIECE):
        await c.body(_BOMB[i:i + PIECE])


async def _stream(c: _Conn, size: int, end: bytes) -> None:
    await c.sse_head()
    await c.body(ROLE, chunked=True)
    batch = WORDS * 32
    while c.up.sent[c.name] < size:
        await c.body(batch, chunked=True)
    if end:
        await c.body(end, chunked=True)
    await c.end_chunked()


async def _endless_sse(up: HostileUpstream, req: Request, c: _Conn) -> None:
    await _stream(c, ENDLESS, FINISH + DONE)


async def _long_sse(up: HostileUpstream, req: Request, c: _Conn) -> None:
    await _stream(c, LONG, FINISH + DONE)


def _anthropic(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps({"type": event, **data}) \
        + b"\n\n"


_MESSAGE_START = _anthropic("message_start", {"message": {
    "id": "msg_hostile", "type": "message", "role": "assistant", "model": "hostile",
    "content": [], "usage": {"input_tokens": 1, "output_tokens": 0}}})


async def _anthropic_endless(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """An Anthropic Messages stream of text deltas that goes on (to :data:`ENDLESS`)."""
    await c.sse_head()
    await c.body(_MESSAGE_START + _anthropic("content_block_start", {
        "index": 0, "content_block": {"type": "text", "text": ""}}), chunked=True)
    delta = _anthropic("content_block_delta", {"index": 0, "delta": {
        "type": "text_delta", "text": "word " * 200}}) * 32
    while up.sent[c.name] < ENDLESS:
        await c.body(delta, chunked=True)
    await c.end_chunked()


async def _anthropic_one_event(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """An Anthropic stream whose second event never ends (no blank line, ever)."""
    await c.sse_head()
    await c.body(_MESSAGE_START, chunked=True)
    await c.body(b'event: content_block_delta\ndata: {"text": "', chunked=True)
    filler = b"a" * PIECE
    while up.sent[c.name] < ENDLESS:
        await c.body(filler, chunked=True)
    await c.end_chunked()


# ---- streams that end wrong --------------------------------------------------------------

async def _truncated_sse(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """A stream that just stops: content, then a clean end of the body, without a finish
    reason or ``[DONE]``."""
    await c.sse_head()
    for piece in (ROLE, WORDS, WORDS, WORDS):
        await c.body(piece, chunked=True)
    await c.end_chunked()


async def _finish_no_done(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """Complete, but without ``[DONE]`` (some servers omit it): not truncated."""
    await c.sse_head()
    for piece in (ROLE, WORDS, FINISH):
        await c.body(piece, chunked=True)
    await c.end_chunked()


async def _slow_sse(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """One event every 100 ms, never silent for long, for up to a minute."""
    await c.sse_head()
    await c.body(ROLE, chunked=True)
    for _ in range(600):
        await asyncio.sleep(0.1)
        await c.body(WORDS, chunked=True)
    await c.end_chunked()


async def _garbage_sse(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """``text/event-stream`` of bytes that are no events (binary, half lines, bad JSON)."""
    await c.sse_head()
    for piece in (b"\x00\xff\xfe garbage\n", b"data: {not json\n\n", b"event: ???\n",
                  bytes(range(256)), b"data: " + b"\x89PNG" * 64 + b"\n\n"):
        await c.body(piece, chunked=True)
    await c.end_chunked()


# ---- broken connections and slow or wrong answers ----------------------------------------

async def _reset_before_headers(up: HostileUpstream, req: Request, c: _Conn) -> None:
    c.reset()


async def _reset_mid_body(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """A JSON answer of a declared length, reset (RST) a third of the way in."""
    body = completion(ANSWER * 40)
    await c.head(200, {"content-type": "application/json", "content-length": str(len(body))})
    await c.body(body[:len(body) // 3])
    c.reset()


async def _reset_mid_stream(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """Two events of an answer, then a reset (RST)."""
    await c.sse_head()
    await c.body(ROLE + WORDS, chunked=True)
    c.reset()


async def _slow_headers(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """Never answers: waits (bounded) until the gateway gives up."""
    await c.until_peer_leaves()


async def _html_200(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """A 200 whose body is an HTML page (a captive portal, a misrouted proxy)."""
    await c.whole(200, b"<html><body><h1>Welcome</h1></body></html>", "text/html")


async def _html_502(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """A load balancer's 502 page in front of the real upstream."""
    await c.whole(502, b"<html><head><title>502 Bad Gateway</title></head><body><center>"
                       b"<h1>502 Bad Gateway</h1></center><hr><center>nginx</center>"
                       b"</body></html>", "text/html")


async def _echo_auth(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """A 401 that quotes the credential it got, in its JSON body and in a header."""
    auth = req.headers.get("authorization", "") + req.headers.get("x-api-key", "")
    await c.whole(401, _error_body(f"Incorrect API key provided: {auth!r}", "invalid_api_key"),
                  **{"x-debug-authorization": auth})


async def _echo_auth_html(up: HostileUpstream, req: Request, c: _Conn) -> None:
    """A framework's debug 500 page listing the request's headers."""
    rows = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in req.headers.items())
    await c.whole(500, f"<html><body><h1>Internal Server Error</h1><table>{rows}</table>"
                       f"</body></html>".encode("latin-1"), "text/html")


BEHAVIOURS: dict[str, Behaviour] = {
    "ok": _ok,
    "gzip-ok": _gzip_ok,
    "hold": _hold,
    "huge-json": _huge_json,
    "huge-json-chunked": _huge_json_chunked,
    "gzip-bomb": _gzip_bomb,
    "endless-sse": _endless_sse,
    "long-sse": _long_sse,
    "anthropic-endless": _anthropic_endless,
    "anthropic-one-event": _anthropic_one_event,
    "truncated-sse": _truncated_sse,
    "finish-no-done": _finish_no_done,
    "slow-sse": _slow_sse,
    "garbage-sse": _garbage_sse,
    "reset-before-headers": _reset_before_headers,
    "reset-mid-body": _reset_mid_body,
    "reset-mid-stream": _reset_mid_stream,
    "slow-headers": _slow_headers,
    "html-200": _html_200,
    "html-502": _html_502,
    "echo-auth": _echo_auth,
    "echo-auth-html": _echo_auth_html,
}
"""Behaviours by name (the first path segment of a request); ``status-NNN`` besides."""

_STATUS = re.compile(r"status-([1-5][0-9][0-9])")


def behaviour(name: str) -> Behaviour:
    """The behaviour ``name`` selects; an unknown name is a 404 naming it."""
    if name in BEHAVIOURS:
        return BEHAVIOURS[name]
    if m := _STATUS.fullmatch(name):
        return _status(int(m.group(1)))

    async def unknown(up: HostileUpstream, req: Request, c: _Conn) -> None:
        await c.whole(404, _error_body(f"no hostile behaviour {name!r}", "not_found"))
    return unknown
