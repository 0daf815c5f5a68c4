"""``POST /v1/responses`` and retries, through a real gateway and the ``openai`` SDK:
a request that keeps nothing upstream (``store: false``) is retried like a chat
completion; one that may be stored is sent once unless ``retries.non_idempotent``."""

from __future__ import annotations

from collections.abc import Callable

import openai
import pytest

from serving import GatewayFactory, ServedUpstream

RETRIES = {"max_attempts": 3, "base_backoff": 0.001, "max_backoff": 0.002}


def _sent(upstream: ServedUpstream) -> int:
    return sum(1 for r in upstream.requests if r["path"] == "/v1/responses")


def test_store_false_is_retried(make_gateway: GatewayFactory, upstream: ServedUpstream,
                                make_client: Callable[..., openai.OpenAI]) -> None:
    gw = make_gateway(routing={"retries": RETRIES})
    upstream.app.failures = [503]
    reply = make_client(gw).responses.create(model="gpt-test", input="hi", store=False)
    assert reply.output_text
    assert _sent(upstream) == 2


@pytest.mark.parametrize("store", [True, None])
def test_a_stored_response_is_sent_once(make_gateway: GatewayFactory, upstream: ServedUpstream,
                                        make_client: Callable[..., openai.OpenAI],
                                        store: bool | None) -> None:
    gw = make_gateway(routing={"retries": RETRIES})
    upstream.app.failures = [503]
    client = make_client(gw)
    with pytest.raises(openai.InternalServerError) as err:
        if store is None:  # the API's default: stored
            client.responses.create(model="gpt-test", input="hi")
        else:
            client.responses.create(model="gpt-test", input="hi", store=store)
    assert err.value.status_code == 503
    assert _sent(upstream) == 1


def test_non_idempotent_retries_a_stored_response(
        make_gateway: GatewayFactory, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    gw = make_gateway(routing={"retries": {**RETRIES, "non_idempotent": True}})
    upstream.app.failures = [503]
    assert make_client(gw).responses.create(model="gpt-test", input="hi").output_text
    assert _sent(upstream) == 2
