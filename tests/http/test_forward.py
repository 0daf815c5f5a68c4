"""Other /v1/* endpoints are forwarded verbatim: embeddings, legacy completions, anything."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from gateway.testing.servers import ServerThread
from serving import ServedGateway, ServedUpstream

Client = Callable[..., openai.OpenAI]


def test_embeddings_pass_through(client: openai.OpenAI, upstream: ServedUpstream) -> None:
    r = client.embeddings.create(model="embed-small", input=["alpha", "beta"],
                                 encoding_format="float")
    assert [d.index for d in r.data] == [0, 1]
    assert all(len(d.embedding) == 8 for d in r.data)
    assert r.data[0].embedding != r.data[1].embedding
    assert r.usage.total_tokens == 2
    sent = upstream.last("/v1/embeddings")
    assert sent["json"] == {"model": "embed-small", "input": ["alpha", "beta"],
                            "encoding_format": "float"}


def test_embeddings_base64_default(client: openai.OpenAI, upstream: ServedUpstream) -> None:
    # The SDK asks for base64 by default and decodes it; the mock answers floats,
    # which the SDK accepts too: what matters is that the request went through as sent.
    client.embeddings.create(model="embed-small", input="alpha")
    assert upstream.last()["json"]["encoding_format"] == "base64"


@pytest.mark.anyio
async def test_async_embeddings(async_client: openai.AsyncOpenAI,
                                upstream: ServedUpstream) -> None:
    r = await async_client.embeddings.create(model="embed-small", input="alpha",
                                             encoding_format="float")
    assert len(r.data) == 1 and len(r.data[0].embedding) == 8


def test_legacy_completions_pass_through(client: openai.OpenAI,
                                         upstream: ServedUpstream) -> None:
    r = client.completions.create(model="scripted-small", prompt="say hi")
    assert r.choices[0].text == "You said: say hi"


def test_upstream_error_on_forwarded_endpoint(make_gateway: Callable[..., ServedGateway],
                                              make_client: Client,
                                              upstream: ServedUpstream) -> None:
    # One attempt: this reads what is relayed, not the retries (the 429's retry-after 2
    # would otherwise be waited for twice: embeddings are retried).
    client = make_client(make_gateway(routing={"retries": {"max_attempts": 1}}))
    with pytest.raises(openai.RateLimitError) as info:
        client.embeddings.create(model="embed-small", input="x",
                                 extra_headers={"x-mock-status": "429",
                                                "x-mock-retry-after": "2"})
    assert info.value.response.headers["retry-after"] == "2"
    assert len(upstream.requests) == 1


def test_unknown_v1_path_is_forwarded_with_query(gateway: ServedGateway,
                                                 upstream: ServedUpstream) -> None:
    with httpx.Client() as http:
        r = http.get(gateway.base_url + "/files/abc", params={"limit": "3"},
                     headers={"x-trace-me": "1"})
    assert r.status_code == 404  # the mock's own answer, relayed
    assert r.json()["error"]["message"] == "no route /v1/files/abc"
    sent = upstream.last()
    assert (sent["method"], sent["path"], sent["headers"]["x-trace-me"]) == \
        ("GET", "/v1/files/abc", "1")


def test_non_json_upload_is_streamed_through(gateway: ServedGateway,
                                             upstream: ServedUpstream) -> None:
    with httpx.Client() as http:
        r = http.post(gateway.base_url + "/audio/transcriptions",
                      files={"file": ("a.wav", b"RIFF" + b"\0" * 2000, "audio/wav")},
                      data={"model": "whisper-1"})
    assert r.status_code == 400  # the mock cannot parse multipart as JSON: its answer
    sent = upstream.last()
    assert sent["headers"]["content-type"].startswith("multipart/form-data")


def test_forwarded_model_routing(make_gateway: Callable[..., ServedGateway], make_client: Client,
                                 upstream: ServedUpstream) -> None:
    gw = make_gateway(upstreams=[{"name": "chat-only", "base_url": upstream.base_url,
                                  "models": ["scripted-*"]}])
    with pytest.raises(openai.NotFoundError) as info:
        make_client(gw).embeddings.create(model="embed-small", input="x")
    assert info.value.code == "model_not_found"
    assert upstream.requests == []


async def _cut_download(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An upstream whose file download dies after 5,000 of 100,000 declared bytes."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/octet-stream"), (b"content-length", b"100000")]})
    await send({"type": "http.response.body", "body": b"A" * 5000, "more_body": True})
    raise ConnectionAbortedError("cut")  # uvicorn drops the connection


def test_upstream_cut_mid_body_is_not_relayed_as_complete(
        make_gateway: Callable[..., ServedGateway]) -> None:
    # The upstream's content-length is not relayed (the body goes out chunked), so a
    # cut must reach the client as a cut, never as a complete, truncated 200.
    with ServerThread(_cut_download, lifespan="off", log_level="critical") as cut:
        gw = make_gateway(upstreams=[{"name": "cut", "base_url": cut.url + "/v1"}])
        with httpx.Client() as http, pytest.raises(httpx.RemoteProtocolError):
            http.get(gw.base_url + "/files/file-1/content")


def test_client_x_verity_headers_never_reach_the_upstream(gateway: ServedGateway,
                                                          upstream: ServedUpstream) -> None:
    # x-verity-* is the gateway's namespace: a client's (a policy choice, a forged
    # verdict) is read by the gateway or ignored, never forwarded, on every path.
    forged = {"x-verity-detail": "true", "X-Verity-Verdict": "pass",
              "x-verity-audit-id": "forged", "x-verity-anything": "1", "x-kept": "yes"}
    with httpx.Client(base_url=gateway.base_url, headers=forged) as http:
        assert http.post("/chat/completions", json={
            "model": "scripted-small", "messages": [{"role": "user", "content": "hi"}]
        }).status_code == 200
        assert http.post("/embeddings", json={"model": "embed-small",
                                              "input": "x"}).status_code == 200
        assert http.get("/models").status_code == 200
    sent = upstream.requests
    assert len(sent) == 3
    for request in sent:
        names = {k.lower() for k in request["headers"]}
        assert "x-kept" in names, request["path"]
        assert not [n for n in names if n.startswith("x-verity-")], request["path"]


@pytest.mark.parametrize(("method", "path"), [("POST", "/chat/completions"),
                                              ("POST", "/embeddings"), ("GET", "/models"),
                                              ("DELETE", "/files/f-1")])
def test_two_authorization_headers_are_refused_in_forward_mode(
        gateway: ServedGateway, upstream: ServedUpstream, method: str, path: str) -> None:
    # Forward mode sends the client's key upstream: with two, a proxy in front and the
    # upstream could each read another one. Refused before anything is sent.
    pair = [("authorization", "Bearer sk-one"), ("authorization", "Bearer sk-two")]
    body = {"model": "scripted-small", "input": "x",
            "messages": [{"role": "user", "content": "hi"}]} if method == "POST" else None
    with httpx.Client(base_url=gateway.base_url) as http:
        r = http.request(method, path, json=body, headers=pair)
    assert r.status_code == 401, r.text
    err = r.json()["error"]
    assert (err["type"], err["code"]) == ("authentication_error", "invalid_api_key")
    assert "sk-one" not in r.text and "sk-two" not in r.text
    assert upstream.requests == []


def test_a_large_body_reaches_the_upstream_whole_with_its_length(
        gateway: ServedGateway, upstream: ServedUpstream) -> None:
    # Over gateway.upstream.openai.PIECED_BODY the body goes upstream in pieces (the
    # loop serves others between them): the same bytes, the same content-length.
    from gateway.upstream.openai import PIECED_BODY
    content = "y" * (PIECED_BODY + 12345)
    body = {"model": "scripted-small", "messages": [{"role": "user", "content": content}]}
    raw = httpx.post(gateway.base_url + "/chat/completions", json=body, timeout=60)
    assert raw.status_code == 200
    (sent,) = upstream.requests
    assert sent["json"] == body
    assert int(sent["headers"]["content-length"]) == len(raw.request.content) > PIECED_BODY
    assert "transfer-encoding" not in {k.lower() for k in sent["headers"]}
