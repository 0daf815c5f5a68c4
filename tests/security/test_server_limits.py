"""The HTTP server's own limits (``server.*``), against a real ``gateway serve`` process.

Raw sockets play the attacker: header lines far over any real request's, a client that
never finishes its headers (slowloris: one byte at a time, so no idle timer fires), and
more connections than the gateway accepts. Each is answered (431 / 408 / 503, OpenAI
error shape) and closed before authentication — the gateway runs in gateway-keys mode
and none of these requests carries a key — and logged on ``gateway.server``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.testing.servers import free_port

MAX_CONNECTIONS = 8
MAX_HEADER_BYTES = 8192
REQUEST = b"GET /v1/models HTTP/1.1\r\nhost: gateway\r\n"


@dataclass
class Served:
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    def connect(self, timeout: float = 15.0) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def _serve(tmp: Path, **server: Any) -> Iterator[Served]:
    port = free_port()
    policies = tmp / "policies"
    policies.mkdir()
    config = tmp / "gateway.yaml"
    config.write_text(orjson.dumps({
        "host": "127.0.0.1", "port": port, "policies_dir": str(policies),
        "audit": {"path": None}, "log_level": "info",
        "upstreams": [{"name": "nowhere", "base_url": f"http://127.0.0.1:{free_port()}/v1"}],
        "auth": {"keys": [{"name": "k", "tenant": "t", "key": "sk-gateway-test-key"}]},
        "server": server}).decode())
    log = tmp / "gateway.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OTEL_"))}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--config",
                                 str(config)], stdout=out, stderr=subprocess.STDOUT, env=env)
    served = Served(port, proc, log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except (OSError, urllib.error.URLError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"gateway did not start:\n{served.log_text()}") from None
                time.sleep(0.05)
        yield served
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Small limits; a header timeout long enough not to interfere."""
    yield from _serve(tmp_path_factory.mktemp("limits"), max_connections=MAX_CONNECTIONS,
                      max_header_bytes=MAX_HEADER_BYTES, header_timeout=60)


@pytest.fixture(scope="module")
def impatient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A one-second header timeout."""
    yield from _serve(tmp_path_factory.mktemp("impatient"), header_timeout=1)


def _read_all(sock: socket.socket) -> bytes:
    """Everything until the server closes (a reset after its answer counts as closed)."""
    parts: list[bytes] = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            parts.append(chunk)
    return b"".join(parts)


def _answer(raw: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, orjson.loads(body)


def _error(raw: bytes, status: int, code: str) -> dict[str, str]:
    got, headers, body = _answer(raw)
    assert (got, body["error"]["code"]) == (status, code), raw[:300]
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert headers["connection"] == "close"
    return headers


# ---- header size -------------------------------------------------------------------------

def test_headers_within_the_limit_reach_the_gateway(gateway: Served) -> None:
    with gateway.connect() as sock:
        sock.sendall(REQUEST + b"x-pad: " + b"a" * (MAX_HEADER_BYTES // 2) + b"\r\n\r\n")
        raw = sock.recv(65536)
    assert raw.startswith(b"HTTP/1.1 401 ")  # authentication ran: no key was sent


def test_a_body_sent_with_its_headers_does_not_count_as_headers(gateway: Served) -> None:
    body = b'{"model": "m", "messages": [], "pad": "' + b"a" * (8 * MAX_HEADER_BYTES) + b'"}'
    with gateway.connect() as sock:  # one write: headers and body arrive together
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\n"
                     b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                     % (len(body), body))
        raw = sock.recv(65536)
    assert raw.startswith(b"HTTP/1.1 401 ")


def test_headers_over_the_limit_are_431_before_authentication(gateway: Served) -> None:
    with gateway.connect() as sock:
        sock.sendall(REQUEST + b"x-pad: " + b"a" * (4 * MAX_HEADER_BYTES) + b"\r\n\r\n")
        _error(_read_all(sock), 431, "request_headers_too_large")
    assert "request headers over 8192 bytes (server.max_header_bytes)" in gateway.log_text()


def test_a_header_line_that_never_ends_is_cut_off_early(gateway: Served) -> None:
    # 30 x 10 MB lines once cost 254 MB: now each connection is closed after about
    # max_header_bytes (plus one network read), long before the line could end.
    with gateway.connect() as sock:
        sock.sendall(REQUEST + b"x-pad: ")
        sent = 0
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for _ in range(32 * 1024 * 1024 // 65536):
                sock.sendall(b"a" * 65536)
                sent += 65536
        raw = _read_all(sock)
    assert sent < 32 * 1024 * 1024  # the server stopped taking it
    if raw:  # the answer may be lost to the reset that unread bytes cause
        _error(raw, 431, "request_headers_too_large")


# ---- header time -------------------------------------------------------------------------

def test_a_request_whose_headers_never_finish_is_408_and_closed(impatient: Served) -> None:
    with impatient.connect() as sock:
        sock.sendall(REQUEST + b"x-slow: ")
        _error(_read_all(sock), 408, "request_timeout")
    assert "request headers not complete within 1s (server.header_timeout)" \
        in impatient.log_text()


def test_a_trickle_of_header_bytes_does_not_extend_the_deadline(impatient: Served) -> None:
    # Slowloris: a byte every 100 ms keeps any idle timer from firing; the header
    # deadline counts from the connection, so the server closes long before 15 s.
    with impatient.connect() as sock:
        sock.sendall(REQUEST + b"x-slow: ")
        closed = False
        for _ in range(150):
            try:
                sock.sendall(b"a")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.1)
        assert closed or _read_all(sock).startswith(b"HTTP/1.1 408 ")


def test_a_kept_alive_connection_gets_the_same_deadline_per_request(impatient: Served) -> None:
    with impatient.connect() as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: gateway\r\n\r\n")
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 ")
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: gat")  # the next one stalls
        _error(_read_all(sock), 408, "request_timeout")


# ---- connections -------------------------------------------------------------------------

def test_connections_beyond_the_limit_are_shed_with_a_503(
        gateway: Served, wait_until: Callable[..., Any]) -> None:
    idle = [gateway.connect() for _ in range(MAX_CONNECTIONS)]
    try:
        with gateway.connect() as extra:  # accepted after the idle ones: over the limit
            headers = _error(_read_all(extra), 503, "too_many_connections")
        assert headers["retry-after"] == "1"
        assert "shedding a connection from 127.0.0.1: 8 connections open " \
               "(server.max_connections)" in gateway.log_text()
    finally:
        for sock in idle:
            sock.close()

    def served() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{gateway.port}/healthz", timeout=5):
                return True
        except OSError:
            return False

    wait_until(served, timeout=10, message="a connection accepted again")
