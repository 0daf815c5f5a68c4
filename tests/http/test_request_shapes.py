"""Request shapes the gateway judges itself on every chat completion (``model``), and
the ones it leaves to the upstream when no policy applies (``messages`` entries)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from serving import ServedGateway, ServedUpstream

USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("model, named", [
    (5, "an integer"), (1.5, "a number"), (True, "a boolean"), (["scripted-small"], "an array"),
    ({"id": "scripted-small"}, "an object"),
])
def test_model_not_a_string_is_400(client: openai.OpenAI, upstream: ServedUpstream,
                                   model: Any, named: str) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="scripted-small", messages=USER,
                                       extra_body={"model": model})
    err = info.value
    assert (err.status_code, err.type, err.param, err.code) == \
        (400, "invalid_request_error", "model", "invalid_type")
    assert isinstance(err.body, dict)
    assert err.body["message"] == \
        f"Invalid type for 'model': expected a string, but got {named} instead."
    assert upstream.requests == []


@pytest.mark.parametrize("body", [{"messages": USER}, {"model": None, "messages": USER},
                                  {"model": "", "messages": USER}])
def test_model_missing_is_400(gateway: ServedGateway, upstream: ServedUpstream,
                              body: dict[str, Any]) -> None:
    r = httpx.post(gateway.url + "/v1/chat/completions", json=body)
    assert r.status_code == 400
    assert r.json()["error"] == {"message": "You must provide a model parameter.",
                                 "type": "invalid_request_error", "param": "model",
                                 "code": None}
    assert upstream.requests == []


def test_without_a_policy_message_entries_are_the_upstreams_to_judge(
        client: openai.OpenAI, upstream: ServedUpstream) -> None:
    # Pure pass-through does not read the messages: the body goes upstream as sent.
    body = b'{"model": "scripted-small", "messages": ["hi", {"role": 1, "content": 5}]}'
    r = httpx.post(str(client.base_url) + "chat/completions", content=body,
                   headers={"content-type": "application/json"})
    assert r.status_code == 200
    (sent,) = upstream.requests
    assert sent["json"]["messages"] == ["hi", {"role": 1, "content": 5}]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/embeddings"])
def test_a_duplicate_key_in_a_large_body_is_refused(gateway: ServedGateway,
                                                    upstream: ServedUpstream, path: str) -> None:
    # Over LARGE_BODY the duplicate-key scan runs on a thread: the verdict is the same.
    from gateway.http.asgi import LARGE_BODY
    body = (b'{"model": "scripted-small", "max_tokens": 8, "messages": [{"role": "user", '
            b'"content": "' + b"a" * LARGE_BODY + b'"}], "model": "other"}')
    r = httpx.post(gateway.url + path, content=body, timeout=30,
                   headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]  # the Messages door answers Anthropic-shaped: no "code"
    assert err["type"] == "invalid_request_error" and "'model' twice" in err["message"]
    assert err.get("code", "duplicate_key") == "duplicate_key"
    assert upstream.requests == []
