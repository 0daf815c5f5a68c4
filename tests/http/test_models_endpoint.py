"""GET /v1/models merges the upstreams' lists, keeping only models routed to each."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import openai
import pytest

from serving import ServedGateway, ServedUpstream
from gateway.testing.scripted import ScriptedUpstream
from gateway.testing.servers import ServerThread, free_port

Client = Callable[..., openai.OpenAI]


@pytest.fixture(scope="module")
def second() -> Iterator[ServedUpstream]:
    app = ScriptedUpstream(models=("gpt-4o", "scripted-large", "scripted-small"),
                           default_reply="from second")
    with ServerThread(app) as server:
        yield ServedUpstream(app, server)


@pytest.fixture(scope="module")
def two(make_gateway: Callable[..., ServedGateway], upstream_server: ServedUpstream,
        second: ServedUpstream) -> ServedGateway:
    return make_gateway(upstreams=[
        {"name": "first", "base_url": upstream_server.base_url, "models": ["scripted-small"]},
        {"name": "second", "base_url": second.base_url, "models": ["*"]},
    ])


def test_single_upstream_models(client: openai.OpenAI, upstream: ServedUpstream) -> None:
    models = client.models.list()
    assert [m.id for m in models] == ["scripted-small", "scripted-large"]
    assert models.data[0].owned_by == "scripted"
    assert upstream.last()["path"] == "/v1/models"


def test_two_upstreams_respect_routing(two: ServedGateway, make_client: Client,
                                       upstream: ServedUpstream, second: ServedUpstream) -> None:
    second.reset()
    ids = sorted(m.id for m in make_client(two).models.list())
    # 'scripted-large' is listed by both but routed to 'second' only; no duplicates.
    assert ids == ["gpt-4o", "scripted-large", "scripted-small"]
    c = make_client(two)
    small = c.chat.completions.create(model="scripted-small",
                                      messages=[{"role": "user", "content": "a"}])
    large = c.chat.completions.create(model="scripted-large",
                                      messages=[{"role": "user", "content": "b"}])
    assert small.choices[0].message.content == "You said: a"
    assert large.choices[0].message.content == "from second"


def test_one_upstream_down_still_lists_the_other(make_gateway: Callable[..., ServedGateway],
                                                 make_client: Client,
                                                 upstream: ServedUpstream) -> None:
    gw = make_gateway(upstreams=[
        {"name": "down", "base_url": f"http://127.0.0.1:{free_port()}/v1", "models": ["gpt-*"]},
        {"name": "up", "base_url": upstream.base_url}])
    assert [m.id for m in make_client(gw).models.list()] == ["scripted-small", "scripted-large"]


def test_all_upstreams_down_is_502(make_gateway: Callable[..., ServedGateway],
                                   make_client: Client) -> None:
    gw = make_gateway(upstreams=[
        {"name": "down", "base_url": f"http://127.0.0.1:{free_port()}/v1"}])
    with pytest.raises(openai.InternalServerError) as info:
        make_client(gw).models.list()
    assert info.value.status_code == 502
    assert info.value.code == "upstream_connect_error"


def test_upstream_models_error_is_relayed(client: openai.OpenAI,
                                          upstream: ServedUpstream) -> None:
    with pytest.raises(openai.InternalServerError) as info:
        client.models.list(extra_headers={"x-mock-status": "503"})
    assert info.value.status_code == 503
