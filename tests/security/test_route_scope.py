"""Which routes a gateway key may use, and whose account it acts for (issue 10, item 5).

In gateway-keys mode every caller shares the upstream's key, so a route that reaches
upstream state (files, batches, fine-tunes, assistants, …) is shared by every
tenant: one tenant could list, read or delete another's files. Keys get an
allowlist of routes (``METHOD /path-glob``); by default only chat completions,
model listing and embeddings. A client's ``OpenAI-Organization`` /
``OpenAI-Project`` headers, which would pick the account the shared key acts for,
are dropped. Forward mode (each client its own upstream key) stays transparent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
from security.hostile_upstream import ANSWER, HostileUpstream
from serving import GatewayFactory, ServedGateway

from gateway.testing.servers import ServerThread
from gateway.settings import ConfigError, load_settings

UPSTREAM_KEY = "sk-upstream-shared-key-0042"
KEY_ENV = "VERITY_TEST_ROUTES_UPSTREAM_KEY"
APP = "gw-acme-app-0001"           # tenant acme, default routes
FILES = "gw-acme-files-0002"       # its own routes: files only
BATCH = "gw-initech-batch-0003"    # tenant initech: the tenant's routes
USER = [{"role": "user", "content": "capital of France?"}]
Client = Callable[..., openai.OpenAI]

AUTH = {
    "keys": [
        {"name": "acme-app", "tenant": "acme", "key": APP},
        {"name": "acme-files", "tenant": "acme", "key": FILES,
         "routes": ["* /v1/files/**"]},
        {"name": "initech-batch", "tenant": "initech", "key": BATCH},
    ],
    "tenants": {"initech": {"routes": ["POST /v1/chat/completions", "POST /v1/batches",
                                       "GET /v1/batches/*"]}},
}


@pytest.fixture(scope="module")
def hostile() -> Iterator[tuple[HostileUpstream, ServerThread]]:
    app = HostileUpstream()
    with ServerThread(app, lifespan="off", log_level="critical") as server:
        yield app, server


@pytest.fixture
def up(hostile: tuple[HostileUpstream, ServerThread]) -> HostileUpstream:
    hostile[0].requests.clear()
    return hostile[0]


@pytest.fixture(scope="module")
def keyed(make_gateway: GatewayFactory,
          hostile: tuple[HostileUpstream, ServerThread]) -> Iterator[ServedGateway]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, UPSTREAM_KEY)
        yield make_gateway(auth=AUTH, upstreams=[{
            "name": "hostile", "base_url": hostile[1].url + "/v1", "api_key_env": KEY_ENV}])


@pytest.fixture(scope="module")
def forward(make_gateway: GatewayFactory,
            hostile: tuple[HostileUpstream, ServerThread]) -> ServedGateway:
    return make_gateway(upstreams=[{"name": "hostile", "base_url": hostile[1].url + "/v1"}])


def _denied(info: pytest.ExceptionInfo[openai.PermissionDeniedError]) -> None:
    assert info.value.status_code == 403
    body: Any = info.value.body
    assert set(body) == {"message", "type", "param", "code"}
    assert (body["type"], body["code"]) == ("permission_denied", "route_not_allowed")


# ---- defaults: chat, models, embeddings ----------------------------------------------------


def test_default_key_may_chat_list_models_and_embed(keyed: ServedGateway, make_client: Client,
                                                    up: HostileUpstream) -> None:
    c = make_client(keyed, api_key=APP)
    assert c.chat.completions.create(model="m", messages=USER).choices[0].message.content \
        == ANSWER
    assert "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
        model="m", messages=USER, stream=True) if ch.choices) == ANSWER
    assert [m.id for m in c.models.list()] == ["hostile-model"]
    c.models.retrieve("hostile-model")
    c.with_raw_response.embeddings.create(model="m", input="x")  # the echo is no embedding
    assert [(r["method"], r["path"]) for r in up.requests] == [
        ("POST", "/v1/chat/completions"), ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"), ("GET", "/v1/models/hostile-model"),
        ("POST", "/v1/embeddings")]
    assert all(r["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}" for r in up.requests)


def test_default_key_cannot_delete_another_tenants_file(keyed: ServedGateway,
                                                        make_client: Client,
                                                        up: HostileUpstream) -> None:
    c = make_client(keyed, api_key=APP)
    with pytest.raises(openai.PermissionDeniedError) as info:
        c.files.delete("file-of-initech")
    _denied(info)
    assert "DELETE /v1/files/file-of-initech" in info.value.message
    for call in (lambda: c.files.list(), lambda: c.files.retrieve("file-x"),
                 lambda: c.batches.list(), lambda: c.fine_tuning.jobs.list(),
                 lambda: c.models.delete("ft:m:acme::1"),
                 lambda: c.completions.create(model="m", prompt="hi")):
        with pytest.raises(openai.PermissionDeniedError) as info:
            call()
        _denied(info)
    assert up.requests == []  # nothing reached the upstream with its shared key


def test_refusal_comes_after_authentication(keyed: ServedGateway, make_client: Client,
                                            up: HostileUpstream) -> None:
    with pytest.raises(openai.AuthenticationError):
        make_client(keyed, api_key="not-a-key").files.delete("file-1")
    assert up.requests == []


# ---- opt-in routes: per key, per tenant -------------------------------------------------


def test_key_routes_replace_the_defaults(keyed: ServedGateway, make_client: Client,
                                         up: HostileUpstream) -> None:
    c = make_client(keyed, api_key=FILES)
    c.files.delete("file-abc")
    c.with_raw_response.files.content("file-abc")
    assert [(r["method"], r["path"]) for r in up.requests] == [
        ("DELETE", "/v1/files/file-abc"), ("GET", "/v1/files/file-abc/content")]
    with pytest.raises(openai.PermissionDeniedError) as info:
        c.chat.completions.create(model="m", messages=USER)
    _denied(info)
    with pytest.raises(openai.PermissionDeniedError):
        c.models.list()
    assert len(up.requests) == 2


def test_tenant_routes_apply_to_the_tenants_keys(keyed: ServedGateway, make_client: Client,
                                                 up: HostileUpstream) -> None:
    c = make_client(keyed, api_key=BATCH)
    c.chat.completions.create(model="m", messages=USER)
    with httpx.Client(base_url=keyed.base_url,
                      headers={"authorization": f"Bearer {BATCH}"}) as http:
        assert http.post("/batches", json={"input_file_id": "f"}).status_code == 200
        assert http.get("/batches/batch_1").status_code == 200
        assert http.get("/batches/batch_1/cancel").status_code == 403  # one segment only
        assert http.post("/embeddings", json={"model": "m", "input": "x"}).status_code == 403
    assert [(r["method"], r["path"]) for r in up.requests] == [
        ("POST", "/v1/chat/completions"), ("POST", "/v1/batches"), ("GET", "/v1/batches/batch_1")]


def test_trailing_slash_matches_the_same_route(keyed: ServedGateway, up: HostileUpstream) -> None:
    with httpx.Client(base_url=keyed.base_url, headers={"authorization": f"Bearer {APP}"}) as http:
        assert http.post("/embeddings/", json={"model": "m", "input": "x"}).status_code == 200
        assert http.post("/chat/completions/", json={"model": "m", "messages": USER}
                         ).status_code == 200


# ---- the account the shared key acts for ---------------------------------------------------


def test_client_organization_and_project_are_dropped_with_gateway_keys(
        keyed: ServedGateway, make_client: Client, up: HostileUpstream) -> None:
    c = make_client(keyed, api_key=APP, organization="org-victim", project="proj-victim")
    c.chat.completions.create(model="m", messages=USER)
    list(c.chat.completions.create(model="m", messages=USER, stream=True))
    c.models.list()
    c.with_raw_response.embeddings.create(model="m", input="x")
    assert len(up.requests) == 4
    for r in up.requests:
        assert "openai-organization" not in r["headers"], r["path"]
        assert "openai-project" not in r["headers"], r["path"]
        assert r["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_forward_mode_is_transparent(forward: ServedGateway, make_client: Client,
                                     up: HostileUpstream) -> None:
    c = make_client(forward, api_key="sk-clients-own-key", organization="org-mine",
                    project="proj-mine")
    c.files.delete("file-abc")
    c.chat.completions.create(model="m", messages=USER)
    assert [(r["method"], r["path"]) for r in up.requests] == [
        ("DELETE", "/v1/files/file-abc"), ("POST", "/v1/chat/completions")]
    for r in up.requests:
        assert r["headers"]["openai-organization"] == "org-mine"
        assert r["headers"]["openai-project"] == "proj-mine"
        assert r["headers"]["authorization"] == "Bearer sk-clients-own-key"


def test_forward_mode_honours_an_explicit_allowlist(make_gateway: GatewayFactory,
                                                    make_client: Client,
                                                    hostile: tuple[HostileUpstream, ServerThread],
                                                    up: HostileUpstream) -> None:
    gw = make_gateway(auth={"routes": ["POST /v1/chat/completions"]},
                      upstreams=[{"name": "hostile", "base_url": hostile[1].url + "/v1"}])
    c = make_client(gw)
    c.chat.completions.create(model="m", messages=USER)
    with pytest.raises(openai.PermissionDeniedError) as info:
        c.files.delete("file-abc")
    _denied(info)
    assert [r["path"] for r in up.requests] == ["/v1/chat/completions"]


# ---- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(("auth", "message"), [
    ({"keys": [{"name": "k", "tenant": "t", "key": "s", "routes": ["FETCH /v1/files"]}]},
     "auth.keys.0.routes.0: Value error, 'FETCH /v1/files': the method must be"),
    ({"keys": [{"name": "k", "tenant": "t", "key": "s", "routes": ["/v1/files"]}]},
     "auth.keys.0.routes.0: Value error, '/v1/files': expected 'METHOD /path'"),
    ({"routes": ["GET files/*"]}, "auth.routes.0: Value error, 'GET files/*': the path must "
                                  "start with /v1/"),
    ({"routes": ["GET /v1/files/**/x"]}, "auth.routes.0: Value error, 'GET /v1/files/**/x': "
                                         "'**' is allowed only as the last segment"),
    ({"routes": "POST /v1/chat/completions"}, "auth.routes: expected a list of routes"),
    ({"keys": [{"name": "k", "tenant": "acme", "key": "s"}],
      "tenants": {"acmee": {"routes": []}}},
     "auth.tenants.acmee: no gateway key has this tenant (tenants of auth.keys: acme)"),
])
def test_bad_route_configuration_names_the_key(auth: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(environ={}, overrides={"auth": auth})
    assert message in str(info.value)
