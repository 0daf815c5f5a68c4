"""The lean load generator (``bench/rawload.py``) and the raw mock (``bench/rawmock.py``).

No timing assertions. The client's response framing is checked against real servers
(uvicorn, the raw mock) byte by byte and end to end; both clients (raw and aiohttp) must
count the same completed requests and both must fail on a wrong status, a truncated or
an incomplete body. The raw mock is checked with the official ``openai`` SDK (JSON and
streaming) and with both clients.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import openai
import pytest
from bench_modules import load_bench as _load

from gateway.testing.servers import ServerThread

loadgen = _load("loadgen")
mock_upstream = _load("mock_upstream")
rawload = _load("rawload")
rawmock = _load("rawmock")

CLIENTS = ("raw", "aiohttp")


@contextmanager
def loop_thread_server(factory: Callable[[], asyncio.Protocol]) -> Iterator[int]:
    """Run ``loop.create_server(factory, 127.0.0.1, 0)`` on a loop in a thread; yield
    its port; close the server, its connections and the loop on exit."""
    loop = asyncio.new_event_loop()
    protocols: list[asyncio.Protocol] = []

    def make() -> asyncio.Protocol:
        protocols.append(factory())
        return protocols[-1]

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(
        loop.create_server(make, "127.0.0.1", 0), loop).result(10)

    async def stop() -> None:
        server.close()
        for proto in protocols:
            transport = getattr(proto, "transport", None)
            if transport is not None:
                transport.close()
        await asyncio.sleep(0.05)
        await server.wait_closed()

    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


class _Tracked(asyncio.Protocol):
    transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]


@pytest.fixture(scope="module")
def raw_mock() -> Iterator[str]:
    mock = mock_upstream.raw_upstream(latency_ms=1, chunks=5)
    with loop_thread_server(mock.protocol) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def uvicorn_mock() -> Iterator[str]:
    with ServerThread(mock_upstream.create_app("lean", latency_ms=1, chunks=5)) as srv:
        yield srv.url


def run(url: str, client: str, **kw: object) -> object:
    kw.setdefault("concurrency", 3)
    kw.setdefault("requests", 12)
    kw.setdefault("duration", 30.0)
    return asyncio.run(loadgen.run_load(url + "/v1/chat/completions", client=client, **kw))


# ---- both clients count the same requests ------------------------------------------------


@pytest.mark.parametrize("server", ["raw_mock", "uvicorn_mock"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_both_clients_count_every_request(server: str, stream: bool,
                                          request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue(server)
    for client in CLIENTS:
        result = run(url, client, stream=stream)
        assert (result.completed, result.errors) == (12, 0), (client, result.first_error)
        assert result.statuses == {200: 12}
        assert len(result.latencies_ms) == 12
        assert len(result.ttfc_ms) == (12 if stream else 0)


def test_raw_client_rotates_bodies_and_stops_at_its_time_bound(raw_mock: str) -> None:
    seen: list[bool] = []
    result = run(raw_mock, "raw", concurrency=2, requests=1_000_000, duration=0.3,
                 warmup=0.1, ramp=0.05, on_measure=lambda: seen.append(True),
                 bodies=[b'{"a":1}', b'{"b":2}'])
    assert 0 < result.completed < 1_000_000
    assert result.errors == 0 and seen == [True]
    assert result.elapsed_s > 0 and result.client_cpu_s >= 0


# ---- both clients fail on a wrong status, a truncated or an incomplete body ----------------

_JSON = b'{"ok":true}'
BAD_REPLIES = {
    "status-500": b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 11\r\n\r\n" + _JSON,
    "status-201": b"HTTP/1.1 201 Created\r\ncontent-length: 11\r\n\r\n" + _JSON,
    "truncated-length": b"HTTP/1.1 200 OK\r\ncontent-length: 40\r\n\r\n" + _JSON,
    "truncated-chunked": b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nb\r\n" + _JSON
                         + b"\r\n",
    "incomplete-json": b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\n" + _JSON[:6],
}


class _Canned(_Tracked):
    """Answers every request with ``reply`` then closes the connection (so a truncated
    body ends with the connection)."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if b"\r\n\r\n" in self.buf:
            self.buf = b""
            self.transport.write(self.reply)  # type: ignore[attr-defined]
            self.transport.close()


@pytest.mark.parametrize("kind", sorted(BAD_REPLIES))
@pytest.mark.parametrize("client", CLIENTS)
def test_clients_fail_on_a_bad_reply(kind: str, client: str) -> None:
    with loop_thread_server(lambda: _Canned(BAD_REPLIES[kind])) as port:
        result = run(f"http://127.0.0.1:{port}", client, concurrency=2, requests=6)
    assert result.completed == 0, kind
    assert result.errors == 6, (kind, result.first_error)
    assert result.first_error


@pytest.mark.parametrize("client", CLIENTS)
def test_clients_count_a_whole_reply_with_connection_close(client: str) -> None:
    """The control for the bad replies: the same server, a whole reply, is counted."""
    ok = b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\nconnection: close\r\n\r\n" + _JSON
    with loop_thread_server(lambda: _Canned(ok)) as port:
        result = run(f"http://127.0.0.1:{port}", client, concurrency=2, requests=6)
    assert (result.completed, result.errors) == (6, 0), result.first_error


# ---- the parser, fed a real server's bytes one at a time ----------------------------------


def _raw_exchange(port: int, request: bytes, count: int) -> bytes:
    """Send ``count`` pipelined requests on one connection; read until the server has
    answered them all (it closes after the last: ``connection: close``)."""
    last = request.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n", 1)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request * (count - 1) + last)
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


@pytest.mark.parametrize("server", ["raw_mock", "uvicorn_mock"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_parser_frames_a_real_servers_bytes_fed_one_at_a_time(
        server: str, stream: bool, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue(server)
    port = int(url.rsplit(":", 1)[1])
    body = loadgen.chat_body(stream)
    req = rawload.request_bytes(url + "/v1/chat/completions", body,
                                {"content-type": "application/json"})
    wire = _raw_exchange(port, req, 3)
    parser = rawload.ResponseParser()
    done = []
    for i in range(len(wire)):
        done += parser.feed(wire[i:i + 1])
    assert [status for status, _, _ in done] == [200, 200, 200]
    assert [close for _, _, close in done] == [False, False, True]
    for _, payload, _ in done:
        assert rawload.body_complete(payload, stream)
        if stream:
            assert payload.count(b"data: ") == 5 + 3  # role, 5 contents, stop, [DONE]
        else:
            assert payload.startswith(b'{"id":"chatcmpl-bench"')
    assert parser.buf == b""


def test_body_complete_wants_a_whole_json_object_or_a_stream_end() -> None:
    done = b'data: {"choices":[]}\n\ndata: [DONE]\n\n'
    error = b'data: {"choices":[]}\n\ndata: {"error":{"message":"stopped"}}\n\n'
    assert rawload.body_complete(done, True) and rawload.body_complete(error, True)
    assert not rawload.body_complete(b'data: {"choices":[]}\n\n', True)
    assert not rawload.body_complete(b'data: {"choices":[]}\n\ndata: [DO', True)
    assert rawload.body_complete(b' {"a": 1}\n', False)
    assert not rawload.body_complete(b'{"a": 1', False)
    assert not rawload.body_complete(b"", False)


def test_parser_refuses_malformed_framing() -> None:
    for wire in (b"SMTP/1.0 200 OK\r\n\r\n",
                 b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n",
                 b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n",
                 b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
                 b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nabc",
                 b"HTTP/1.1 200 OK\r\n\r\n"):
        with pytest.raises(rawload.ProtocolError):
            rawload.ResponseParser().feed(wire)


# ---- the raw mock, with a real client -------------------------------------------------------


def test_raw_mock_answers_the_openai_sdk(raw_mock: str) -> None:
    with openai.OpenAI(base_url=raw_mock + "/v1", api_key="sk-bench", max_retries=0) as sdk:
        reply = sdk.chat.completions.create(
            model="bench", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == mock_upstream.reply_text(5)
        pieces = [c.choices[0].delta.content or "" for c in sdk.chat.completions.create(
            model="bench", messages=[{"role": "user", "content": "hi"}], stream=True)
            if c.choices]
        assert "".join(pieces).strip() == mock_upstream.reply_text(5)
        assert [m.id for m in sdk.models.list()] == ["bench"]


def test_raw_mock_refuses_garbage_and_answers_chunked_requests(raw_mock: str) -> None:
    port = int(raw_mock.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"NOT HTTP\r\n\r\n")
        reply = b""
        while data := s.recv(65536):
            reply += data
    assert reply.startswith(b"HTTP/1.1 400 ") and b"connection: close" in reply
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n"
           b"connection: close\r\n\r\n7\r\n{\"a\":1}\r\n0\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(req)
        reply = b""
        while data := s.recv(65536):
            reply += data
    status, body, close = rawload.ResponseParser().feed(reply)[0]
    assert (status, close) == (200, True) and rawload.body_complete(body, False)
