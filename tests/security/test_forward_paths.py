"""Forwarded ``/v1/*`` paths never leave the upstream's ``base_url`` (issue 10, item 2).

A hostile client sends request targets no SDK would (``..`` segments, encoded
dots and slashes, ``%3F`` / ``%23``, NULs, ``;`` path parameters), written on the
wire as is with ``http.client``. Each must be refused with an OpenAI-shaped 400
before anything is sent upstream; a legitimate path goes upstream byte for byte,
query string included, under ``base_url``'s own path.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from security.hostile_upstream import HostileUpstream
from serving import GatewayFactory, ServedGateway

from gateway.testing.servers import ServerThread

ESCAPES = [
    "/v1/../../x",
    "/v1/../x",
    "/v1/files/../../../admin",
    "/v1/./models",
    "/v1/files/..",
    "/v1/..%2F..%2Fx",
    "/v1/..%2f..%2fx",
    "/v1/%2e%2e/%2e%2e/x",
    "/v1/%2E%2E/%2e%2E/x",
    "/v1/.%2e/x",
    "/v1/%2e/models",
    "/v1/%252e%252e/%252e%252e/x",        # double-encoded dots
    "/v1/%25252e%25252e/x",               # triple-encoded
    "/v1/..%252f..%252fx",                # double-encoded slash
    "/v1/files/a%2Fb",                    # encoded slash inside a segment
    "/v1/files/a%5Cb",                    # encoded backslash
    "/v1/files/a%255cb",
    "/v1/files/..%5C..%5Cx",
    "/v1/files\\..\\..\\x",               # raw backslashes
    "/v1/files%3Fpurpose=evil",           # %3F: would become a query
    "/v1/files%253Fpurpose=evil",
    "/v1/files/x%23/../../y",             # %23: would cut the path
    "/v1/files/x%23",
    "/v1/files/%00",                      # NUL
    "/v1/files/a%0d%0aX-Injected:%201",   # CR LF
    "/v1/..;/x",                          # Tomcat-style path parameter
    "/v1/files/..;a=b/..;/x",
    "/v1/%2e%2e;/x",
    "/v1//evil.example/x",                # empty segment
    "/%761/files",                        # the prefix itself encoded
    "/v1/files/%zz",                      # malformed escape
    "/v1/files/{a|b}",                    # characters a URL path cannot carry raw
]


@pytest.fixture(scope="module")
def hostile() -> Iterator[tuple[HostileUpstream, ServerThread]]:
    app = HostileUpstream()
    with ServerThread(app, lifespan="off", log_level="critical") as server:
        yield app, server


@pytest.fixture(scope="module")
def gw(make_gateway: GatewayFactory,
       hostile: tuple[HostileUpstream, ServerThread]) -> ServedGateway:
    # base_url with a path of its own: the route prefix to stay under is /openai/v1.
    return make_gateway(upstreams=[{"name": "hostile",
                                    "base_url": hostile[1].url + "/openai/v1"}])


@pytest.fixture
def up(hostile: tuple[HostileUpstream, ServerThread]) -> HostileUpstream:
    hostile[0].requests.clear()
    return hostile[0]


def raw_request(gw: ServedGateway, method: str, target: str,
                headers: dict[str, str] | None = None, body: bytes | None = None
                ) -> tuple[int, dict[str, str], Any]:
    """Send ``target`` exactly as written (no client-side checks or normalisation)."""
    lines = [f"{method} {target} HTTP/1.1", f"host: {gw.server.host}", "connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body is not None:
        lines += ["content-type: application/json", f"content-length: {len(body)}"]
    with socket.create_connection((gw.server.host, gw.server.port), timeout=10) as sock:
        sock.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (body or b""))
        resp = http.client.HTTPResponse(sock)
        try:
            resp.begin()
            data = resp.read()
        finally:
            resp.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, \
        orjson.loads(data) if data else None


@pytest.mark.parametrize("target", ESCAPES)
@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_path_leaving_the_prefix_is_refused(gw: ServedGateway, up: HostileUpstream,
                                            target: str, method: str) -> None:
    status, headers, body = raw_request(gw, method, target)
    assert up.requests == [], f"{target!r} reached the upstream as {up.last()['raw_path']!r}"
    assert status == 400, body
    assert headers["content-type"] == "application/json"
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["code"] == "invalid_path"


def test_refused_post_body_is_not_sent(gw: ServedGateway, up: HostileUpstream) -> None:
    status, _, body = raw_request(gw, "POST", "/v1/embeddings/..%2F..%2Fadmin",
                                  body=b'{"model": "m", "input": "x"}')
    assert status == 400 and body["error"]["code"] == "invalid_path"
    assert up.requests == []


@pytest.mark.parametrize(("target", "query"), [
    ("/v1/files/file-abc123/content", ""),
    ("/v1/models/ft:gpt-4o-mini:acme::B1x9", ""),
    ("/v1/files/a%20b", ""),
    ("/v1/files/caf%C3%A9", ""),
    ("/v1/files/%7Euser", ""),
    ("/v1/files/100%25", ""),                # a literal percent, encoded once
    ("/v1/files/..hidden/x.json", ""),       # dots inside a name are not segments
    ("/v1/files", "limit=3&after=a%2Fb&q=%3F%23&purpose=fine-tune"),
    ("/v1/files", "api-version=2024-10-21&x=%E2%9C%93"),
    ("/v1/vector_stores/vs_1/files;v=2", ""),  # ';' in an ordinary segment
    ("/v1/files/", ""),
])
def test_legitimate_path_is_forwarded_byte_for_byte(gw: ServedGateway, up: HostileUpstream,
                                                    target: str, query: str) -> None:
    status, _, body = raw_request(gw, "GET", target + (f"?{query}" if query else ""))
    assert status == 200, body
    sent = up.last()
    assert sent["raw_path"] == "/openai" + target  # under base_url, as the client wrote it
    assert sent["query"] == query
