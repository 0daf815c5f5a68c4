"""Forwarded bodies over ``max_body_bytes`` still go only where their model routes.

Such a body is streamed through, not parsed; when the upstream depends on the model, the
gateway reads a bounded prefix to find it (or answers 413), never falling back to the
first upstream with the client's credentials.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest
from serving import CLIENT_KEY, ServedGateway, ServedUpstream

from gateway.testing.scripted import ScriptedUpstream
from gateway.testing.servers import ServerThread

LIMIT = 4096
AUTH = {"authorization": f"Bearer {CLIENT_KEY}"}
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def echo_server() -> Iterator[ServedUpstream]:
    app = ScriptedUpstream()
    with ServerThread(app) as server:
        yield ServedUpstream(app, server)


@pytest.fixture
def echo(echo_server: ServedUpstream) -> ServedUpstream:
    echo_server.reset()
    return echo_server


@pytest.fixture(scope="module")
def two(make_gateway: Callable[..., ServedGateway], upstream_server: ServedUpstream,
        echo_server: ServedUpstream) -> ServedGateway:
    return make_gateway(max_body_bytes=LIMIT, upstreams=[
        {"name": "echo", "base_url": echo_server.base_url, "models": ["echo-*"]},
        {"name": "local", "base_url": upstream_server.base_url, "models": ["scripted-*"]}])


def _post(gw: ServedGateway, path: str, **kwargs: Any) -> httpx.Response:
    kwargs["headers"] = {**AUTH, **kwargs.get("headers", {})}
    with httpx.Client(timeout=10) as http:
        return http.post(gw.base_url + path, **kwargs)


def test_oversize_embeddings_route_by_model(two: ServedGateway, make_client: Callable[..., openai.OpenAI],
                                            upstream: ServedUpstream, echo: ServedUpstream) -> None:
    r = make_client(two).embeddings.create(model="scripted-small", input="x" * 5000,
                                           encoding_format="float")
    assert r.model == "scripted-small"
    assert echo.requests == []
    sent = upstream.last("/v1/embeddings")
    assert sent["json"]["input"] == "x" * 5000
    assert sent["headers"]["authorization"] == f"Bearer {CLIENT_KEY}"


def test_oversize_unknown_model_is_model_not_found(
        two: ServedGateway, make_client: Callable[..., openai.OpenAI],
        upstream: ServedUpstream, echo: ServedUpstream) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        make_client(two).embeddings.create(model="gpt-secret", input="x" * 5000)
    assert info.value.code == "model_not_found"
    assert echo.requests == [] and upstream.requests == []


def test_model_first_beyond_scan_window_streams(two: ServedGateway, upstream: ServedUpstream,
                                                echo: ServedUpstream) -> None:
    body = orjson.dumps({"model": "scripted-small", "input": ["y" * 50_000, "z" * 50_000]})
    r = _post(two, "/embeddings", content=body,
              headers=JSON)
    assert r.status_code == 200 and len(r.json()["data"]) == 2
    assert echo.requests == []
    assert upstream.last("/v1/embeddings")["json"] == orjson.loads(body)


def test_model_not_in_prefix_is_413(two: ServedGateway, upstream: ServedUpstream,
                                    echo: ServedUpstream) -> None:
    body = orjson.dumps({"input": "x" * 1_000_000, "model": "scripted-small"})
    r = _post(two, "/embeddings", content=body,
              headers=JSON)
    assert r.status_code == 413
    err = r.json()["error"]
    assert err["code"] == "request_too_large" and "max_body_bytes" in err["message"]
    assert echo.requests == [] and upstream.requests == []


def test_nested_model_does_not_route(two: ServedGateway, upstream: ServedUpstream,
                                     echo: ServedUpstream) -> None:
    body = b'{"extra": {"model": "echo-1"}, "input": "' + b"x" * 1_000_000 + b'"}'
    r = _post(two, "/embeddings", content=body,
              headers=JSON)
    assert r.status_code == 413
    assert echo.requests == [] and upstream.requests == []


def test_chunked_json_routes_by_model(two: ServedGateway, upstream: ServedUpstream,
                                      echo: ServedUpstream) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"model": "scripted-small", '
        yield b'"input": "' + b"q" * 6000 + b'"}'

    r = _post(two, "/embeddings", content=chunks(),
              headers=JSON)
    assert r.status_code == 200
    assert echo.requests == []
    assert upstream.last("/v1/embeddings")["json"]["input"] == "q" * 6000


def test_oversize_upload_routes_by_model_field(two: ServedGateway, upstream: ServedUpstream,
                                               echo: ServedUpstream) -> None:
    r = _post(two, "/audio/transcriptions", data={"model": "scripted-whisper"},
              files={"file": ("a.wav", b"RIFF" + b"\0" * 100_000, "audio/wav")})
    assert r.status_code == 400  # the mock's own answer to multipart: it got there
    assert echo.requests == []
    assert upstream.last()["path"] == "/v1/audio/transcriptions"


def test_oversize_upload_without_model_is_413(two: ServedGateway, upstream: ServedUpstream,
                                              echo: ServedUpstream) -> None:
    r = _post(two, "/files", data={"purpose": "batch"},
              files={"file": ("a.jsonl", b"{}\n" * 300_000, "application/jsonl")})
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large"
    assert echo.requests == [] and upstream.requests == []


def test_small_upload_without_model_goes_first(two: ServedGateway, upstream: ServedUpstream,
                                               echo: ServedUpstream) -> None:
    r = _post(two, "/files", data={"purpose": "batch"},
              files={"file": ("a.jsonl", b"{}\n", "application/jsonl")})
    assert r.status_code == 400  # the mock cannot parse multipart: its answer
    assert upstream.requests == []
    assert echo.last()["path"] == "/v1/files"


def test_single_wildcard_upstream_streams_unchanged(
        make_gateway: Callable[..., ServedGateway], upstream: ServedUpstream) -> None:
    gw = make_gateway(max_body_bytes=LIMIT)
    body = orjson.dumps({"input": "x" * 70_000, "model": "anything"})
    r = _post(gw, "/embeddings", content=body,
              headers=JSON)
    assert r.status_code == 200
    assert upstream.last("/v1/embeddings")["json"] == orjson.loads(body)
