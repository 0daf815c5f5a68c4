"""Mock OpenAI-compatible upstream for the benchmarks, in its own process.

    python bench/mock_upstream.py --port 9100 --latency-ms 50 --chunks 20

Two implementations behind the same flags:

- ``lean`` (default): a raw ASGI app that answers ``POST /v1/chat/completions``
  with a precomputed JSON body, or with ``--chunks`` precomputed SSE content
  chunks (plus the role chunk, the stop chunk and ``[DONE]``), after sleeping
  ``--latency-ms`` before the headers. Nothing is parsed beyond ``"stream":true``.
- ``raw``: the same answers from a raw asyncio server, no uvicorn or ASGI
  (``bench/rawmock.py``): the cheapest per request, for runs where the mock shares
  the box's cores with the system under test (``serve --workers``).
- ``scripted``: ``gateway.testing.scripted.ScriptedUpstream`` with ``record=False`` (the
  upstream the tests use; it parses the body and builds each answer).

The lean one exists because on a 2-core box the mock shares a core with the
load generator, so its cost caps the "direct" numbers (measured in
docs/benchmarks.md). Both run under uvicorn with uvloop + httptools, access log
off, bound to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

__all__ = ["LeanUpstream", "create_app", "main"]

_JSON_HEADERS = [(b"content-type", b"application/json"), (b"x-request-id", b"req_bench")]
_SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"),
                (b"cache-control", b"no-cache"), (b"x-request-id", b"req_bench")]


def _completion(text: str) -> bytes:
    words = len(text.split())
    return orjson.dumps({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()),
        "model": "bench", "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text,
                                             "refusal": None},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": words, "total_tokens": 12 + words},
    })


def _stream_chunks(n: int) -> list[bytes]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return b"data: " + orjson.dumps({
            "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": created,
            "model": "bench", "system_fingerprint": "fp_bench",
            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish}]}) + b"\n\n"

    return ([chunk({"role": "assistant", "content": ""})]
            + [chunk({"content": f"word{i} "}) for i in range(n)]
            + [chunk({}, "stop"), b"data: [DONE]\n\n"])


def reply_text(chunks: int) -> str:
    return "".join(f"word{i} " for i in range(chunks)).strip()


class LeanUpstream:
    """Precomputed answers; ``latency_ms`` before the headers, ``chunk_delay_ms`` between
    stream chunks. Streams when the body contains ``"stream":true`` (any spacing)."""

    def __init__(self, latency_ms: float = 0.0, chunks: int = 20,
                 chunk_delay_ms: float = 0.0, answer: str | None = None) -> None:
        self.latency = latency_ms / 1000
        self.chunk_delay = chunk_delay_ms / 1000
        self.body = _completion(answer if answer is not None else reply_text(chunks))
        self.json_headers = [*_JSON_HEADERS, (b"content-length", str(len(self.body)).encode())]
        self.chunks = _stream_chunks(chunks)

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        if scope["type"] != "http":
            return
        message = await receive()
        body: bytes = message.get("body", b"")
        while message.get("more_body"):
            message = await receive()
            body += message.get("body", b"")
        if self.latency:
            await asyncio.sleep(self.latency)
        if scope["path"] == "/v1/models":
            data = b'{"object":"list","data":[{"id":"bench","object":"model","created":0,' \
                   b'"owned_by":"bench"}]}'
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})
            return
        if b'"stream":true' in body.replace(b" ", b""):
            await send({"type": "http.response.start", "status": 200,
                        "headers": _SSE_HEADERS})
            delay = self.chunk_delay
            for n, piece in enumerate(self.chunks):
                if delay and n:
                    await asyncio.sleep(delay)
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": 200, "headers": self.json_headers})
        await send({"type": "http.response.body", "body": self.body})


def create_app(impl: str = "lean", latency_ms: float = 0.0, chunks: int = 20,
               chunk_delay_ms: float = 0.0, answer: str | None = None) -> Any:
    if impl == "lean":
        return LeanUpstream(latency_ms, chunks, chunk_delay_ms, answer)
    if impl == "scripted":
        from gateway.testing.scripted import ScriptedUpstream

        return ScriptedUpstream(default_reply=reply_text(chunks), latency_ms=latency_ms,
                                chunk_delay_ms=chunk_delay_ms, record=False)
    raise ValueError(f"unknown mock implementation {impl!r} (lean | scripted)")


def raw_upstream(latency_ms: float = 0.0, chunks: int = 20, chunk_delay_ms: float = 0.0,
                 answer: str | None = None) -> Any:
    """The ``raw`` implementation (``bench/rawmock.py``) with the lean mock's answers."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from rawmock import RawUpstream

    body = _completion(answer if answer is not None else reply_text(chunks))
    return RawUpstream(body, _stream_chunks(chunks), latency_ms, chunk_delay_ms)


def _serve_raw(port: int, latency_ms: float, chunks: int, chunk_delay_ms: float,
               answer: str | None) -> int:
    import signal

    import uvloop
    from rawmock import serve

    mock = raw_upstream(latency_ms, chunks, chunk_delay_ms, answer)
    loop = uvloop.new_event_loop()
    task = loop.create_task(serve(mock, "127.0.0.1", port))  # loopback only
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        loop.run_until_complete(task)
    except asyncio.CancelledError:
        pass
    finally:
        loop.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--latency-ms", type=float, default=0.0,
                   help="delay before the response headers")
    p.add_argument("--chunks", type=int, default=20, help="content chunks per stream")
    p.add_argument("--chunk-delay-ms", type=float, default=0.0)
    p.add_argument("--impl", choices=("lean", "raw", "scripted"), default="lean")
    p.add_argument("--answer-file", type=Path, default=None,
                   help="the JSON reply's content (lean mock; default: word0 … wordN)")
    args = p.parse_args(argv)

    answer = args.answer_file.read_text(encoding="utf-8") if args.answer_file else None
    if args.impl == "raw":
        return _serve_raw(args.port, args.latency_ms, args.chunks, args.chunk_delay_ms,
                          answer)
    import uvicorn

    app = create_app(args.impl, args.latency_ms, args.chunks, args.chunk_delay_ms, answer)
    # Loopback only, by construction.
    uvicorn.run(app, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools",
                lifespan="on", log_level="warning", access_log=False, server_header=False,
                date_header=False, backlog=4096)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
