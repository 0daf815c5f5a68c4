"""What the hostile upstream (:mod:`security.hostile`) does, by behaviour name.

Each behaviour gets the request and a :class:`Conn` to write its answer with, and
writes exactly the bytes a misbehaving server would. :data:`BEHAVIOURS` names them;
:func:`behaviour` also knows ``status-NNN`` (that status, an OpenAI error body). The
payload helpers (:func:`completion`, :func:`chat_chunk`, :func:`sse`) and sizes are
shared with the tests.
"""

from __future__ import annotations

import asyncio
import re
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

__all__ = ["ANSWER", "BEHAVIOURS", "BOMB", "LONG", "PATIENCE", "Behaviour", "Conn", "MiB",
           "Request", "behaviour", "chat_chunk", "completion", "sse"]

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


class Conn(Protocol):
    """Writing one response (the server's side of it): a head, body pieces (counted
    in :attr:`sent`), a clean end or a reset; waiting for the peer or a release."""

    name: str
    """The behaviour's name (what :attr:`sent` is counted under)."""

    @property
    def sent(self) -> int:
        """Body bytes this behaviour has written so far (all its requests)."""

    async def head(self, status: int, headers: dict[str, str]) -> None: ...

    async def body(self, data: bytes, chunked: bool = False) -> None: ...

    async def end_chunked(self) -> None: ...

    async def whole(self, status: int, body: bytes, content_type: str = "application/json",
                    **headers: str) -> None: ...

    async def sse_head(self) -> None: ...

    def reset(self) -> None:
        """Abort the connection with a TCP RST, not a clean FIN."""

    async def until_peer_leaves(self) -> None:
        """Wait (bounded) until the gateway gives up on this request and closes."""

    async def wait_released(self) -> None:
        """Wait (bounded) until the test calls ``HostileUpstream.release()``."""


Behaviour = Callable[[Request, Conn], Awaitable[None]]


def _error_body(message: str, code: str = "hostile") -> bytes:
    return orjson.dumps({"error": {"message": message, "type": "server_error", "param": None,
                                   "code": code}})


# ---- well-behaved ------------------------------------------------------------------------

async def _ok(req: Request, c: Conn) -> None:
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


async def _gzip_ok(req: Request, c: Conn) -> None:
    await c.whole(200, _gzip(completion(ANSWER)), **{"content-encoding": "gzip"})


async def _hold(req: Request, c: Conn) -> None:
    """A chat completion that waits for ``HostileUpstream.release()`` (a stream sends
    its first event first, then waits)."""
    if req.stream:
        await c.sse_head()
        await c.body(sse(chat_chunk({"role": "assistant", "content": "Paris "})), chunked=True)
        await c.wait_released()
        for piece in (sse(chat_chunk({"content": "is the capital of France."})), FINISH, DONE):
            await c.body(piece, chunked=True)
        await c.end_chunked()
        return
    await c.wait_released()
    await c.whole(200, completion(ANSWER, req.model))


def _status(status: int) -> Behaviour:
    async def answer(req: Request, c: Conn) -> None:
        await c.whole(status, _error_body("hostile error"))
    return answer


# ---- over every cap ----------------------------------------------------------------------

async def _huge_json(req: Request, c: Conn, chunked: bool = False) -> None:
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


async def _huge_json_chunked(req: Request, c: Conn) -> None:
    await _huge_json(req, c, chunked=True)


async def _gzip_bomb(req: Request, c: Conn) -> None:
    await c.head(200, {"content-type": "application/json", "content-encoding": "gzip",
                       "content-length": str(len(_BOMB))})
    for i in range(0, len(_BOMB), PIECE):
        await c.body(_BOMB[i:i + PIECE])


async def _stream(c: Conn, size: int, end: bytes) -> None:
    await c.sse_head()
    await c.body(ROLE, chunked=True)
    batch = WORDS * 32
    while c.sent < size:
        await c.body(batch, chunked=True)
    if end:
        await c.body(end, chunked=True)
    await c.end_chunked()


async def _endless_sse(req: Request, c: Conn) -> None:
    await _stream(c, ENDLESS, FINISH + DONE)


async def _long_sse(req: Request, c: Conn) -> None:
    await _stream(c, LONG, FINISH + DONE)


def _anthropic(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps({"type": event, **data}) \
        + b"\n\n"


_MESSAGE_START = _anthropic("message_start", {"message": {
    "id": "msg_hostile", "type": "message", "role": "assistant", "model": "hostile",
    "content": [], "usage": {"input_tokens": 1, "output_tokens": 0}}})


async def _anthropic_endless(req: Request, c: Conn) -> None:
    """An Anthropic Messages stream of text deltas that goes on (to :data:`ENDLESS`)."""
    await c.sse_head()
    await c.body(_MESSAGE_START + _anthropic("content_block_start", {
        "index": 0, "content_block": {"type": "text", "text": ""}}), chunked=True)
    delta = _anthropic("content_block_delta", {"index": 0, "delta": {
        "type": "text_delta", "text": "word " * 200}}) * 32
    while c.sent < ENDLESS:
        await c.body(delta, chunked=True)
    await c.end_chunked()


async def _anthropic_one_event(req: Request, c: Conn) -> None:
    """An Anthropic stream whose second event never ends (no blank line, ever)."""
    await c.sse_head()
    await c.body(_MESSAGE_START, chunked=True)
    await c.body(b'event: content_block_delta\ndata: {"text": "', chunked=True)
    filler = b"a" * PIECE
    while c.sent < ENDLESS:
        await c.body(filler, chunked=True)
    await c.end_chunked()


# ---- streams that end wrong --------------------------------------------------------------

async def _truncated_sse(req: Request, c: Conn) -> None:
    """A stream that just stops: content, then a clean end of the body, without a finish
    reason or ``[DONE]``."""
    await c.sse_head()
    for piece in (ROLE, WORDS, WORDS, WORDS):
        await c.body(piece, chunked=True)
    await c.end_chunked()


async def _finish_no_done(req: Request, c: Conn) -> None:
    """Complete, but without ``[DONE]`` (some servers omit it): not truncated."""
    await c.sse_head()
    for piece in (ROLE, WORDS, FINISH):
        await c.body(piece, chunked=True)
    await c.end_chunked()


async def _slow_sse(req: Request, c: Conn) -> None:
    """One event every 100 ms, never silent for long, for up to a minute."""
    await c.sse_head()
    await c.body(ROLE, chunked=True)
    for _ in range(600):
        await asyncio.sleep(0.1)
        await c.body(WORDS, chunked=True)
    await c.end_chunked()


async def _garbage_sse(req: Request, c: Conn) -> None:
    """``text/event-stream`` of bytes that are no events (binary, half lines, bad JSON)."""
    await c.sse_head()
    for piece in (b"\x00\xff\xfe garbage\n", b"data: {not json\n\n", b"event: ???\n",
                  bytes(range(256)), b"data: " + b"\x89PNG" * 64 + b"\n\n"):
        await c.body(piece, chunked=True)
    await c.end_chunked()


# ---- broken connections and slow or wrong answers ----------------------------------------

async def _reset_before_headers(req: Request, c: Conn) -> None:
    c.reset()


async def _reset_mid_body(req: Request, c: Conn) -> None:
    """A JSON answer of a declared length, reset (RST) a third of the way in."""
    body = completion(ANSWER * 40)
    await c.head(200, {"content-type": "application/json", "content-length": str(len(body))})
    await c.body(body[:len(body) // 3])
    c.reset()


async def _reset_mid_stream(req: Request, c: Conn) -> None:
    """Two events of an answer, then a reset (RST)."""
    await c.sse_head()
    await c.body(ROLE + WORDS, chunked=True)
    c.reset()


async def _slow_headers(req: Request, c: Conn) -> None:
    """Never answers: waits (bounded) until the gateway gives up."""
    await c.until_peer_leaves()


async def _html_200(req: Request, c: Conn) -> None:
    """A 200 whose body is an HTML page (a captive portal, a misrouted proxy)."""
    await c.whole(200, b"<html><body><h1>Welcome</h1></body></html>", "text/html")


async def _html_502(req: Request, c: Conn) -> None:
    """A load balancer's 502 page in front of the real upstream."""
    await c.whole(502, b"<html><head><title>502 Bad Gateway</title></head><body><center>"
                       b"<h1>502 Bad Gateway</h1></center><hr><center>nginx</center>"
                       b"</body></html>", "text/html")


async def _echo_auth(req: Request, c: Conn) -> None:
    """A 401 that quotes the credential it got, in its JSON body and in a header."""
    auth = req.headers.get("authorization", "") + req.headers.get("x-api-key", "")
    await c.whole(401, _error_body(f"Incorrect API key provided: {auth!r}", "invalid_api_key"),
                  **{"x-debug-authorization": auth})


async def _echo_auth_html(req: Request, c: Conn) -> None:
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

    async def unknown(req: Request, c: Conn) -> None:
        await c.whole(404, _error_body(f"no hostile behaviour {name!r}", "not_found"))
    return unknown
