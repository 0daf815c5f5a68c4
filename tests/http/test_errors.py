"""The gateway's own errors and upstream errors, as the openai SDK sees them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import openai
import pytest

from serving import ServedGateway, ServedUpstream
from gateway.testing.servers import free_port

USER = [{"role": "user", "content": "hi"}]
Client = Callable[..., openai.OpenAI]


def _error(resp: httpx.Response) -> dict[str, Any]:
    body = resp.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    err: dict[str, Any] = body["error"]
    return err


@pytest.fixture
def http(gateway: ServedGateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.url) as c:
        yield c


# ---- the gateway's own errors -------------------------------------------------------------


def test_invalid_json_is_400(http: httpx.Client, upstream: ServedUpstream) -> None:
    r = http.post("/v1/chat/completions", content=b'{"model": "x", "messages": [',
                  headers={"content-type": "application/json"})
    assert r.status_code == 400
    err = _error(r)
    assert (err["type"], err["code"]) == ("invalid_request_error", "invalid_json")
    assert upstream.requests == []


@pytest.mark.parametrize("body, param", [
    (b"[1, 2]", None),
    (b'{"messages": []}', "model"),
    (b'{"model": "scripted-small", "messages": "hi"}', "messages"),
])
def test_malformed_request_is_400(http: httpx.Client, upstream: ServedUpstream,
                                  body: bytes, param: str | None) -> None:
    r = http.post("/v1/chat/completions", content=body)
    assert r.status_code == 400
    err = _error(r)
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param
    assert upstream.requests == []


def test_sdk_bad_request_error(client: openai.OpenAI, upstream: ServedUpstream) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="scripted-small", messages=USER,
                                       extra_body={"messages": "not a list"})
    assert info.value.status_code == 400
    assert info.value.param == "messages"


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_another_method_on_chat_completions_is_405(http: httpx.Client, method: str) -> None:
    r = http.request(method, "/v1/chat/completions")
    assert r.status_code == 405
    assert r.headers["allow"] == "POST"
    assert _error(r)["code"] == "method_not_allowed"


class _BrokenEngine:
    """An engine with a bug: it raises for every request it handles."""

    def select(self, info: Any) -> Any:
        return "plan"

    async def handle(self, x: Any, plan: Any) -> None:
        raise RuntimeError("a bug in the engine")

    def status(self) -> tuple[bool, dict[str, Any]]:
        return True, {}

    def offload(self, size: int) -> None:
        return None  # bodies parsed in the relay


def test_a_bug_is_an_openai_shaped_500(make_gateway: Callable[..., ServedGateway],
                                       make_client: Client, upstream: ServedUpstream,
                                       caplog: pytest.LogCaptureFixture) -> None:
    @asynccontextmanager
    async def factory(*_: Any) -> AsyncIterator[_BrokenEngine]:
        yield _BrokenEngine()

    gw = make_gateway(app_kwargs={"engine_factory": factory})
    with httpx.Client() as http:
        r = http.post(gw.base_url + "/chat/completions",
                      json={"model": "scripted-small", "messages": USER})
    assert r.status_code == 500
    assert r.headers["content-type"] == "application/json"
    err = _error(r)
    assert (err["type"], err["code"]) == ("server_error", "internal_error")
    assert "a bug in the engine" not in err["message"]  # details go to the log only
    with pytest.raises(openai.InternalServerError) as info:
        make_client(gw).chat.completions.create(model="scripted-small", messages=USER)
    assert info.value.code == "internal_error"
    assert "a bug in the engine" in caplog.text


def test_unknown_path_is_404(http: httpx.Client) -> None:
    r = http.get("/nothing/here")
    assert r.status_code == 404
    assert _error(r)["code"] == "not_found"


@pytest.fixture(scope="module")
def small_gateway(make_gateway: Callable[..., ServedGateway]) -> ServedGateway:
    return make_gateway(max_body_bytes=2048)


def test_body_over_limit_is_413(small_gateway: ServedGateway, make_client: Client,
                                upstream: ServedUpstream) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        make_client(small_gateway).chat.completions.create(
            model="scripted-small", messages=[{"role": "user", "content": "x" * 4096}])
    assert info.value.status_code == 413
    assert info.value.code == "request_too_large"
    assert upstream.requests == []


def test_chunked_body_over_limit_is_413(small_gateway: ServedGateway,
                                        upstream: ServedUpstream) -> None:
    def parts() -> Iterator[bytes]:  # no content-length: transfer-encoding chunked
        yield b'{"model": "scripted-small", "messages": [{"role": "user", "content": "'
        for _ in range(8):
            yield b"x" * 512
        yield b'"}]}'

    with httpx.Client() as http:
        r = http.post(small_gateway.base_url + "/chat/completions", content=parts())
    assert r.status_code == 413
    assert _error(r)["code"] == "request_too_large"
    assert upstream.requests == []


def test_body_under_limit_passes(small_gateway: ServedGateway, make_client: Client,
                                 upstream: ServedUpstream) -> None:
    r = make_client(small_gateway).chat.completions.create(
        model="scripted-small", messages=[{"role": "user", "content": "x" * 100}])
    assert r.choices[0].message.content == "You said: " + "x" * 100


def test_unrouted_model_is_404(make_gateway: Callable[..., ServedGateway], make_client: Client,
                               upstream: ServedUpstream) -> None:
    gw = make_gateway(upstreams=[{"name": "only-gpt", "base_url": upstream.base_url,
                                  "models": ["gpt-*"]}])
    with pytest.raises(openai.NotFoundError) as info:
        make_client(gw).chat.completions.create(model="claude-3", messages=USER)
    assert info.value.code == "model_not_found"
    assert info.value.param == "model"
    assert "claude-3" in info.value.message
    assert upstream.requests == []


def test_upstream_connect_failure_is_502(make_gateway: Callable[..., ServedGateway],
                                         make_client: Client) -> None:
    gw = make_gateway(upstreams=[{"name": "down",
                                  "base_url": f"http://127.0.0.1:{free_port()}/v1"}])
    with pytest.raises(openai.InternalServerError) as info:
        make_client(gw).chat.completions.create(model="scripted-small", messages=USER)
    assert info.value.status_code == 502
    assert info.value.code == "upstream_connect_error"
    assert isinstance(info.value.body, dict) and info.value.body["type"] == "upstream_error"
    assert "down" in info.value.message


def test_upstream_connect_failure_when_streaming_is_502(
        make_gateway: Callable[..., ServedGateway], make_client: Client) -> None:
    gw = make_gateway(upstreams=[{"name": "down",
                                  "base_url": f"http://127.0.0.1:{free_port()}/v1"}])
    with pytest.raises(openai.InternalServerError) as info:
        make_client(gw).chat.completions.create(model="scripted-small", messages=USER,
                                                stream=True)
    assert info.value.status_code == 502


def test_upstream_timeout_is_504(make_gateway: Callable[..., ServedGateway], make_client: Client,
                                 upstream: ServedUpstream) -> None:
    gw = make_gateway(upstreams=[{"name": "slow", "base_url": upstream.base_url,
                                  "timeouts": {"read": 0.3}}])
    with pytest.raises(openai.APIStatusError) as info:
        make_client(gw).chat.completions.create(model="scripted-small", messages=USER,
                                                extra_headers={"x-mock-delay-ms": "5000"})
    assert info.value.status_code == 504
    assert info.value.code == "upstream_timeout"
    assert isinstance(info.value.body, dict) and info.value.body["type"] == "upstream_error"


# ---- client-side SDK errors ---------------------------------------------------------------


def test_gateway_unreachable_is_api_connection_error(make_client: Client) -> None:
    c = make_client(f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(openai.APIConnectionError):
        c.chat.completions.create(model="scripted-small", messages=USER)


def test_client_timeout_is_api_timeout_error(client: openai.OpenAI,
                                             upstream: ServedUpstream) -> None:
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="scripted-small", messages=USER, timeout=0.3,
                                       extra_headers={"x-mock-delay-ms": "3000"})


# ---- upstream errors pass through ---------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_rate_limit_passes_through_with_headers(client: openai.OpenAI, upstream: ServedUpstream,
                                                stream: bool) -> None:
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="scripted-small", messages=USER, stream=stream,
                                       extra_headers={"x-mock-status": "429",
                                                      "x-mock-retry-after": "7"})
    err = info.value
    assert err.status_code == 429
    assert err.response.headers["retry-after"] == "7"
    assert err.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert err.response.headers["x-request-id"] == "req_mock_error"
    assert err.request_id == "req_mock_error"
    assert err.code == "scripted_429"
    assert err.body == {"message": "scripted error 429", "type": "scripted_error",
                        "param": None, "code": "scripted_429"}


def test_sdk_retries_honour_retry_after(make_client: Client, gateway: ServedGateway,
                                        upstream: ServedUpstream) -> None:
    c = make_client(gateway, max_retries=1)
    with pytest.raises(openai.RateLimitError):
        c.chat.completions.create(model="scripted-small", messages=USER,
                                  extra_headers={"x-mock-status": "429",
                                                 "x-mock-retry-after": "0"})
    # Two client requests (the SDK's retry), each retried by the gateway itself up to
    # routing.retries.max_attempts (3) before the last 429 is relayed.
    assert len(upstream.requests) == 2 * 3


@pytest.mark.parametrize("status, exc", [
    (400, openai.BadRequestError),
    (401, openai.AuthenticationError),
    (403, openai.PermissionDeniedError),
    (404, openai.NotFoundError),
    (422, openai.UnprocessableEntityError),
    (500, openai.InternalServerError),
    (503, openai.InternalServerError),
])
def test_upstream_status_passes_through(client: openai.OpenAI, upstream: ServedUpstream,
                                        status: int, exc: type[openai.APIStatusError]) -> None:
    with pytest.raises(exc) as info:
        client.chat.completions.create(model="scripted-small", messages=USER,
                                       extra_headers={"x-mock-status": str(status)})
    assert info.value.status_code == status
    assert info.value.code == f"scripted_{status}"
    assert info.value.request_id == "req_mock_error"


@pytest.mark.anyio
async def test_async_rate_limit(make_gateway: Callable[..., ServedGateway],
                                make_async_client: Callable[..., openai.AsyncOpenAI],
                                upstream: ServedUpstream) -> None:
    # One attempt: this reads what is relayed, not the retries (the 429's retry-after 3
    # would otherwise be waited for twice).
    async_client = make_async_client(make_gateway(routing={"retries": {"max_attempts": 1}}))
    with pytest.raises(openai.RateLimitError) as info:
        await async_client.chat.completions.create(
            model="scripted-small", messages=USER,
            extra_headers={"x-mock-status": "429", "x-mock-retry-after": "3"})
    assert info.value.response.headers["retry-after"] == "3"
    assert len(upstream.requests) == 1


@pytest.mark.anyio
async def test_async_timeout_error(async_client: openai.AsyncOpenAI,
                                   upstream: ServedUpstream) -> None:
    with pytest.raises(openai.APITimeoutError):
        await async_client.chat.completions.create(
            model="scripted-small", messages=USER, timeout=0.3,
            extra_headers={"x-mock-delay-ms": "3000"})


def test_client_timeout_cancels_upstream(gateway: ServedGateway, upstream: ServedUpstream,
                                         wait_until: Callable[..., Any]) -> None:
    with httpx.Client(timeout=0.3) as http, pytest.raises(httpx.ReadTimeout):
        http.post(gateway.base_url + "/chat/completions",
                  json={"model": "scripted-small", "messages": USER},
                  headers={"x-mock-delay-ms": "5000"})
    wait_until(lambda: upstream.cancelled >= 1, message="upstream cancellation")
