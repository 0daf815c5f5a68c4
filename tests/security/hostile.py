"""A hostile (or broken) upstream: a raw asyncio HTTP/1.1 server in a background thread.

Not uvicorn: it writes exactly the bytes a misbehaving server would (a body far over
any cap, a gzip bomb, a stream that never ends, a stream that just stops). The
request's ``model`` picks the behaviour (:data:`BEHAVIOURS`); the gateway forwards it
unchanged, and a judge asks with ``judge.model``. Every response ends the connection.

``sent[model]`` counts the body bytes a behaviour got written into the socket before
the peer went away (or it finished): with the gateway's cap at 1 MiB, a body the
gateway stopped reading early shows up as a few MiB at most (socket buffers), one it
read whole as all of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import zlib
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

__all__ = ["BEHAVIOURS", "MiB", "HostileUpstream", "chat_chunk", "sse"]

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


def chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-hostile", "object": "chat.completion.chunk", "created": 1,
            "model": "hostile", "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                             "finish_reason": finish}]}


def sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def completion(text: str) -> bytes:
    return orjson.dumps({
        "id": "chatcmpl-hostile", "object": "chat.completion", "created": 1, "model": "hostile",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})


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

Writer = Callable[[bytes], Awaitable[None]]


class HostileUpstream:
    """``with HostileUpstream() as up: up.base_url`` (``…/v1``)."""

    def __init__(self) -> None:
        self.sent: dict[str, int] = defaultdict(int)
        self.requests: list[dict[str, Any]] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hostile",
                                        daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    # ---- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> HostileUpstream:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connection, "127.0.0.1", 0), self._loop).result(10)
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
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # ---- one connection, one request -----------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in
                       (line.partition(":") for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            payload = orjson.loads(body) if body else {}
            model = str(payload.get("model", ""))
            self.requests.append({"line": lines[0], "headers": headers, "payload": payload})
            behaviour = BEHAVIOURS.get(model, _unknown)
            await behaviour(self, model, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def head(self, writer: asyncio.StreamWriter, status: int, headers: dict[str, str]
                   ) -> None:
        lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()] \
            + ["connection: close", "", ""]
        writer.write("\r\n".join(lines).encode("latin-1"))
        await writer.drain()

    async def body(self, model: str, writer: asyncio.StreamWriter, data: bytes,
                   chunked: bool = False) -> None:
        writer.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        await writer.drain()
        self.sent[model] += len(data)

    async def end_chunked(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"0\r\n\r\n")
        await writer.drain()


# ---- behaviours (by model name) ----------------------------------------------------------

async def _unknown(up: HostileUpstream, model: str, w: asyncio.StreamWriter) -> None:
    body = b'{"error": {"message": "no such model", "type": "invalid_request_error"}}'
    await up.head(w, 404, {"content-type": "application/json",
                           "content-length": str(len(body))})
    await up.body(model, w, body)


async def _ok_json(up: HostileUpstream, model: str, w: asyncio.StreamWriter) -> None:
    body = completion("Paris is the capital of France.")
    await up.head(w, 200, {"content-type": "application/json", "content-length": str(len(body))})
    await up.body(model, w, body)


async def _gzip_ok(up: HostileUpstream, model: str, w: asyncio.StreamWriter) -> None:
    body = _gzip(completion("Paris is the capital of France."))
    await up.head(w, 200, {"content-type": "application/json", "content-encoding": "gzip",
                           "content-length": str(len(body))})
    await up.body(model, w, body)


def _huge_answer() -> tuple[bytes, bytes]:
    head, tail = completion("\x00").split(b"\\u0000")
    return head, tail


async def _huge_json(up: HostileUpstream, model: str, w: asyncio.StreamWriter,
                     chunked: bool = False) -> None:
    """A well-formed chat completion of 8 MiB (content-length declared, or chunked)."""
    head, tail = _huge_answer()
    filler = b"a" * PIECE
    pieces = HUGE // PIECE
    size = len(head) + pieces * PIECE + len(tail)
    await up.head(w, 200, {"content-type": "application/json",
                           **({"transfer-encoding": "chunked"} if chunked
                              else {"content-length": str(size)})})
    await up.body(model, w, head, chunked)
    for _ in range(pieces):
        await up.body(model, w, filler, chunked)
    await up.body(model, w, tail, chunked)
    if chunked:
        await up.end_chunked(w)


async def _huge_json_chunked(up: HostileUpstream, model: str, w: asyncio.StreamWriter) -> None:
    await _huge_json(up, model, w, chunked=True)


async def _gzip_bomb(up: HostileUpstream, model: str, w: asyncio.StreamWriter) -> None:
    await up.head(w, 200, {"content-type": "application/json", "content-encoding": "gzip",
                           "content-length": str(len(_BOMB))})
    for i in range(0, len(_BOMB), PIECE):
        await up.body(model, w, _BOMB[i:i + PIECE])


async def _stream(up: HostileUpstream, model: str, w: asyncio.StreamWriter, size: int,
                  end: bytes) -> None:
    await up.head(w, 200, {"content-type": "text/event-stream",
                           "transfer-encoding": "chunked"})
    await up.body(model, w, ROLE, chunked=True)
    batch = WORDS * 32
    while up.sent[model] < size:
        await up.body(model, w, batch, chunked=True)
    if end:
        await up.body(model, w, end, chunked=True)
    await up.end_chunked(w)


async def _endless_sse(up: HostileUpstream, model: str, w: asyncio.StreamWriter) -> None:
    await _stream(up, model, w, ENDLESS, FINISH + DONE)


async def _long_sse(up: HostileUpstream, model: str, w: asyncio.StreamWriter) -> None:
    await _stream(up, model, w, LONG, FINISH + DONE)


async def _truncated_sse(up: HostileUpstream, model: str, w: asyncio.StreamWriter) -> None:
    """A stream that just stops: content, then a clean end of the body, without a finish
    reason or ``[DONE]``."""
    await up.head(w, 200, {"content-type": "text/event-stream",
                           "transfer-encoding": "chunked"})
    for piece in (ROLE, WORDS, WORDS, WORDS):
        await up.body(model, w, piece, chunked=True)
    await up.end_chunked(w)


async def _finish_no_done(up: HostileUpstream, model: str, w: asyncio.StreamWriter) -> None:
    """Complete, but without ``[DONE]`` (some servers omit it): not truncated."""
    await up.head(w, 200, {"content-type": "text/event-stream",
                           "transfer-encoding": "chunked"})
    for piece in (ROLE, WORDS, FINISH):
        await up.body(model, w, piece, chunked=True)
    await up.end_chunked(w)


async def _slow_sse(up: HostileUpstream, model: str, w: asyncio.StreamWriter) -> None:
    """One event every 100 ms, never silent for long, for up to a minute."""
    await up.head(w, 200, {"content-type": "text/event-stream",
                           "transfer-encoding": "chunked"})
    await up.body(model, w, ROLE, chunked=True)
    for _ in range(600):
        await asyncio.sleep(0.1)
        await up.body(model, w, WORDS, chunked=True)
    await up.end_chunked(w)


def _anthropic(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps({"type": event, **data}) \
        + b"\n\n"


async def _anthropic_endless(up: HostileUpstream, model: str, w: asyncio.StreamWriter) -> None:
    """An Anthropic Messages stream of text deltas that goes on (to :data:`ENDLESS`)."""
    await up.head(w, 200, {"content-type": "text/event-stream",
                           "transfer-encoding": "chunked"})
    start = _anthropic("message_start", {"message": {
        "id": "msg_hostile", "type": "message", "role": "assistant", "model": "hostile",
        "content": [], "usage": {"input_tokens": 1, "output_tokens": 0}}}) + _anthropic(
        "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    await up.body(model, w, start, chunked=True)
    delta = _anthropic("content_block_delta", {"index": 0, "delta": {
        "type": "text_delta", "text": "word " * 200}}) * 32
    while up.sent[model] < ENDLESS:
        await up.body(model, w, delta, chunked=True)
    await up.end_chunked(w)


async def _anthropic_one_event(up: HostileUpstream, model: str,
                               w: asyncio.StreamWriter) -> None:
    """An Anthropic stream whose second event never ends (no blank line, ever)."""
    await up.head(w, 200, {"content-type": "text/event-stream",
                           "transfer-encoding": "chunked"})
    await up.body(model, w, _anthropic("message_start", {"message": {
        "id": "msg_hostile", "type": "message", "role": "assistant", "model": "hostile",
        "content": [], "usage": {"input_tokens": 1, "output_tokens": 0}}}), chunked=True)
    await up.body(model, w, b'event: content_block_delta\ndata: {"text": "', chunked=True)
    filler = b"a" * PIECE
    while up.sent[model] < ENDLESS:
        await up.body(model, w, filler, chunked=True)
    await up.end_chunked(w)


Behaviour = Callable[[HostileUpstream, str, asyncio.StreamWriter], Awaitable[None]]

BEHAVIOURS: dict[str, Behaviour] = {
    "ok-json": _ok_json,
    "gzip-ok": _gzip_ok,
    "huge-json": _huge_json,
    "huge-json-chunked": _huge_json_chunked,
    "gzip-bomb": _gzip_bomb,
    "endless-sse": _endless_sse,
    "long-sse": _long_sse,
    "truncated-sse": _truncated_sse,
    "finish-no-done": _finish_no_done,
    "slow-sse": _slow_sse,
    "anthropic-endless": _anthropic_endless,
    "anthropic-one-event": _anthropic_one_event,
}
