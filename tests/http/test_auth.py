"""Auth modes: gateway keys (own upstream key) and forward (client's Authorization)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import httpx
import openai
import pytest

from serving import CLIENT_KEY, ServedGateway, ServedUpstream
from gateway.app import create_app
from gateway.testing.servers import ServerThread, free_port
from gateway.settings import load_settings

USER = [{"role": "user", "content": "hi"}]
GATEWAY_KEY = "gw-team-a-secret-0001"
UPSTREAM_KEY = "sk-upstream-secret-do-not-leak-42"
KEY_ENV = "VERITY_TEST_UPSTREAM_KEY"
Client = Callable[..., openai.OpenAI]


@pytest.fixture(scope="module")
def keyed(make_gateway: Callable[..., ServedGateway], upstream_server: ServedUpstream
          ) -> Iterator[ServedGateway]:
    """Gateway-keys mode; the upstream's key comes from an environment variable."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, UPSTREAM_KEY)
        yield make_gateway(
            auth={"keys": [{"name": "team-a", "tenant": "acme", "key": GATEWAY_KEY}]},
            upstreams=[{"name": "scripted", "base_url": upstream_server.base_url,
                        "api_key_env": KEY_ENV}])


@pytest.mark.parametrize("headers", [
    {},
    {"authorization": "Bearer wrong-key"},
    {"authorization": f"Basic {GATEWAY_KEY}"},
    {"authorization": "Bearer"},
])
@pytest.mark.parametrize("path", ["/chat/completions", "/embeddings", "/models"])
def test_missing_or_wrong_key_is_401_and_never_reaches_upstream(
        keyed: ServedGateway, upstream: ServedUpstream, headers: dict[str, str],
        path: str) -> None:
    body = {"model": "scripted-small", "messages": USER, "input": "x"}
    with httpx.Client() as http:
        r = http.request("GET" if path == "/models" else "POST", keyed.base_url + path,
                         json=body, headers=headers)
    assert r.status_code == 401
    err = r.json()["error"]
    assert (err["type"], err["code"]) == ("authentication_error", "invalid_api_key")
    assert upstream.requests == []


def test_sdk_authentication_error(keyed: ServedGateway, make_client: Client,
                                  upstream: ServedUpstream) -> None:
    with pytest.raises(openai.AuthenticationError) as info:
        make_client(keyed, api_key="not-the-key").chat.completions.create(
            model="scripted-small", messages=USER)
    assert info.value.status_code == 401
    assert upstream.requests == []


def test_upstream_gets_its_own_key(keyed: ServedGateway, make_client: Client,
                                   upstream: ServedUpstream) -> None:
    c = make_client(keyed, api_key=GATEWAY_KEY)
    r = c.chat.completions.create(model="scripted-small", messages=USER)
    assert r.choices[0].message.content == "You said: hi"
    list(c.chat.completions.create(model="scripted-small", messages=USER, stream=True))
    c.embeddings.create(model="embed-small", input="x")
    c.models.list()
    assert [q["path"] for q in upstream.requests] == [
        "/v1/chat/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/models"]
    for q in upstream.requests:
        assert q["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}"
        assert GATEWAY_KEY not in str(q["headers"])


def test_client_provider_key_headers_are_not_forwarded_with_gateway_keys(
        keyed: ServedGateway, make_client: Client, upstream: ServedUpstream) -> None:
    # The gateway owns the upstream credential in this mode: a client's own provider
    # key (Azure's api-key, Anthropic-style x-api-key) must not ride along with it.
    c = make_client(keyed, api_key=GATEWAY_KEY,
                    default_headers={"api-key": "sk-client-azure", "x-api-key": "sk-client-x"})
    c.chat.completions.create(model="scripted-small", messages=USER)
    list(c.chat.completions.create(model="scripted-small", messages=USER, stream=True))
    c.embeddings.create(model="embed-small", input="x")
    c.models.list()
    assert len(upstream.requests) == 4
    for q in upstream.requests:
        assert "api-key" not in q["headers"] and "x-api-key" not in q["headers"]
        assert q["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_upstream_key_never_leaks(keyed: ServedGateway, make_client: Client,
                                  upstream: ServedUpstream,
                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []
    c = make_client(keyed, api_key=GATEWAY_KEY)
    raw = c.chat.completions.with_raw_response.create(model="scripted-small", messages=USER)
    seen += [raw.text, str(raw.headers)]
    for status in ("400", "401", "429", "500"):
        with pytest.raises(openai.APIStatusError) as info:
            c.chat.completions.create(model="scripted-small", messages=USER,
                                      extra_headers={"x-mock-status": status})
        seen += [info.value.response.text, str(info.value.response.headers)]
    with pytest.raises(openai.APIError) as cut:
        list(c.chat.completions.create(model="scripted-small", messages=USER, stream=True,
                                       extra_headers={"x-mock-cut-after": "1"}))
    seen.append(str(cut.value.body))
    with pytest.raises(openai.AuthenticationError) as denied:
        make_client(keyed, api_key=UPSTREAM_KEY).chat.completions.create(
            model="scripted-small", messages=USER)
    seen.append(denied.value.response.text)
    seen.append(caplog.text)
    assert not [s for s in seen if UPSTREAM_KEY in s]


def test_connect_error_does_not_leak_key(make_gateway: Callable[..., ServedGateway],
                                         make_client: Client, upstream: ServedUpstream,
                                         caplog: pytest.LogCaptureFixture,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(KEY_ENV, UPSTREAM_KEY)
    gw = make_gateway(
        auth={"keys": [{"name": "team-a", "tenant": "acme", "key": GATEWAY_KEY}]},
        upstreams=[{"name": "down", "base_url": f"http://127.0.0.1:{free_port()}/v1",
                    "api_key_env": KEY_ENV}])
    with pytest.raises(openai.InternalServerError) as info:
        make_client(gw, api_key=GATEWAY_KEY).chat.completions.create(
            model="scripted-small", messages=USER)
    assert UPSTREAM_KEY not in info.value.response.text
    assert UPSTREAM_KEY not in caplog.text


def test_gateway_key_from_env(make_gateway: Callable[..., ServedGateway], make_client: Client,
                              upstream: ServedUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERITY_TEST_GATEWAY_KEY", "gw-from-env-7")
    gw = make_gateway(auth={"keys": [{"name": "env", "tenant": "t",
                                      "key_env": "VERITY_TEST_GATEWAY_KEY"}]})
    r = make_client(gw, api_key="gw-from-env-7").chat.completions.create(
        model="scripted-small", messages=USER)
    assert r.choices[0].message.content == "You said: hi"
    assert "authorization" not in upstream.last()["headers"]


def test_gateway_key_env_unset_fails_startup(upstream: ServedUpstream, empty_dir: object,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERITY_TEST_UNSET_KEY", raising=False)
    settings = load_settings(environ={}, overrides={
        "upstreams": [{"name": "u", "base_url": upstream.base_url}],
        "policies_dir": str(empty_dir),
        "auth": {"keys": [{"name": "k", "tenant": "t", "key_env": "VERITY_TEST_UNSET_KEY"}]}})
    server = ServerThread(create_app(settings))
    with pytest.raises(RuntimeError, match="failed to start"):
        server.start()
    server.stop()


# ---- forward mode ------------------------------------------------------------------------


def test_forward_mode_sends_client_authorization(client: openai.OpenAI,
                                                 upstream: ServedUpstream) -> None:
    client.chat.completions.create(model="scripted-small", messages=USER)
    client.embeddings.create(model="embed-small", input="x")
    client.models.list()
    assert [q["headers"]["authorization"] for q in upstream.requests] == \
        [f"Bearer {CLIENT_KEY}"] * 3


def test_forward_mode_sends_client_provider_key_headers(client: openai.OpenAI,
                                                       upstream: ServedUpstream) -> None:
    client.chat.completions.create(model="scripted-small", messages=USER,
                                   extra_headers={"api-key": "sk-azure-own"})
    assert upstream.last()["headers"]["api-key"] == "sk-azure-own"


def test_forward_mode_ignores_upstream_key(make_gateway: Callable[..., ServedGateway],
                                           make_client: Client, upstream: ServedUpstream,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, UPSTREAM_KEY)
    gw = make_gateway(upstreams=[{"name": "scripted", "base_url": upstream.base_url,
                                  "api_key_env": KEY_ENV}])
    make_client(gw, api_key="sk-caller-own").chat.completions.create(
        model="scripted-small", messages=USER)
    assert upstream.last()["headers"]["authorization"] == "Bearer sk-caller-own"


def test_forward_mode_without_authorization(gateway: ServedGateway,
                                            upstream: ServedUpstream) -> None:
    with httpx.Client() as http:
        r = http.post(gateway.base_url + "/chat/completions",
                      json={"model": "scripted-small", "messages": USER})
    assert r.status_code == 200
    assert "authorization" not in upstream.last()["headers"]
