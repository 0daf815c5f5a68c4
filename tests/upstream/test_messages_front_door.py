"""``POST /v1/messages`` with the official ``anthropic`` SDK as the client: a real
gateway in front of an OpenAI-compatible upstream (the scripted one, through the
translators) and an Anthropic one (the fake, natively when no policy applies).

Policies are chosen per request with ``x-verity-policy`` (the key may choose): the
``keyword`` layer fails answers containing "forbidden".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import pytest

from fake_anthropic import FakeAnthropic
from gateway.testing.servers import ServerThread
from serving import CLIENT_KEY, GatewayFactory, ServedGateway, ServedUpstream

KEY_ENV = "VERITY_TEST_MESSAGES_KEY"
UPSTREAM_KEY = "sk-ant-upstream-0001"
Q = "tell me the forbidden thing"

POLICIES = {
    "flagged": 'fail: {type: disclaimer, template: "\\n[unverified: {verdict}]"}',
    "blocked": 'fail: {type: block, message: "Blocked by {policy}."}',
    "refused": "fail: {type: block, style: error, status: 422}",
}


def policy(name: str, mode: str, action: str, streaming: str = "buffer") -> str:
    """Applies only to requests that ask for it by name."""
    return (f"mode: {mode}\nallow_header_selection: true\nstreaming: {streaming}\n"
            f'match: {{headers: {{x-verity-policy: "{name}"}}}}\n'
            "layers:\n  - name: keyword\n    config: {block: [\"forbidden\"]}\n"
            f"actions:\n  {action}\n")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    app = FakeAnthropic(key=UPSTREAM_KEY)
    with ServerThread(app) as server:
        app.url = server.url
        yield app


@pytest.fixture(autouse=True)
def _forget(fake: FakeAnthropic, upstream_server: ServedUpstream) -> None:
    fake.requests.clear()
    upstream_server.reset()  # a test that scripted it may not have asked for ``upstream``


@pytest.fixture(scope="module")
def gw(make_gateway: GatewayFactory, fake: FakeAnthropic, upstream_server: ServedUpstream,
       tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    policies = tmp_path_factory.mktemp("messages-policies")
    for name, action in POLICIES.items():
        (policies / f"{name}.yaml").write_text(policy(name, "inline", action), encoding="utf-8")
        (policies / f"{name}-pt.yaml").write_text(policy(f"{name}-pt", "inline", action, "passthrough"),
                                                  encoding="utf-8")
    (policies / "shadowed.yaml").write_text(policy("shadowed", "shadow", POLICIES["flagged"]),
                                            encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, UPSTREAM_KEY)
        yield make_gateway(
            policies_dir=str(policies), reload_policies=False,
            upstreams=[{"name": "claude", "kind": "anthropic", "base_url": fake.url + "/v1",
                        "api_key_env": KEY_ENV, "models": ["claude-*"]},
                       {"name": "scripted", "base_url": upstream_server.base_url}],
            auth={"keys": [{"name": "app", "tenant": "acme", "key": CLIENT_KEY,
                            "policy_selection": True}]},
            routing={"retries": {"base_backoff": 0.001, "max_backoff": 0.002}})


@pytest.fixture
def make_anthropic(gw: ServedGateway) -> Iterator[Callable[..., anthropic.Anthropic]]:
    made: list[anthropic.Anthropic] = []

    def factory(**kw: Any) -> anthropic.Anthropic:
        kw.setdefault("api_key", CLIENT_KEY)
        c = anthropic.Anthropic(base_url=gw.url, max_retries=0, **kw)
        made.append(c)
        return c

    yield factory
    for c in made:
        c.close()


@pytest.fixture
def client(make_anthropic: Callable[..., anthropic.Anthropic]) -> anthropic.Anthropic:
    return make_anthropic()


MODELS = ["scripted-small", "claude-verity-test"]  # OpenAI-compatible, Anthropic


def ask(client: anthropic.Anthropic, model: str, text: str = "hello",
        verity: str | None = None) -> Any:
    headers = {"x-verity-policy": verity} if verity else {}
    return client.messages.with_raw_response.create(
        model=model, max_tokens=200, messages=[{"role": "user", "content": text}],
        extra_headers=headers)


def stream(client: anthropic.Anthropic, model: str, text: str = "hello",
           verity: str | None = None) -> tuple[str, Any, dict[str, str]]:
    headers = {"x-verity-policy": verity} if verity else {}
    with client.messages.stream(model=model, max_tokens=200,
                                messages=[{"role": "user", "content": text}],
                                extra_headers=headers) as s:
        text_out = "".join(s.text_stream)
        final = s.get_final_message()
        got = {k.lower(): v for k, v in s.response.headers.items()}
    return text_out, final, got


def raw_headers(client: anthropic.Anthropic, model: str) -> dict[str, str]:
    return {k.lower(): v for k, v in ask(client, model).headers.items()}


# ---- no policy ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_create(client: anthropic.Anthropic, model: str) -> None:
    message = ask(client, model).parse()
    assert isinstance(message, anthropic.types.Message)
    assert message.content[0].type == "text"
    assert message.content[0].text == "You said: hello"
    assert message.stop_reason == "end_turn" and message.role == "assistant"
    assert message.usage.output_tokens > 0
    assert "x-verity-policy" not in raw_headers(client, model)


@pytest.mark.parametrize("model", MODELS)
def test_stream(client: anthropic.Anthropic, model: str) -> None:
    text, final, _ = stream(client, model)
    assert text == "You said: hello"
    assert final.content[0].text == "You said: hello"
    assert final.stop_reason == "end_turn"


def test_an_anthropic_upstream_gets_the_request_as_sent(client: anthropic.Anthropic,
                                                        fake: FakeAnthropic) -> None:
    client.messages.create(model="claude-verity-test", max_tokens=50, extra_body={"top_k": 3},
                           thinking={"type": "enabled", "budget_tokens": 1024},
                           messages=[{"role": "user", "content": "hello"}])
    sent = fake.last()
    assert sent["path"] == "/v1/messages"
    assert sent["body"]["thinking"] == {"type": "enabled", "budget_tokens": 1024}  # not dropped
    assert sent["body"]["top_k"] == 3
    assert sent["headers"]["x-api-key"] == UPSTREAM_KEY  # the gateway's key, not the client's


def test_an_openai_upstream_gets_a_chat_completion(client: anthropic.Anthropic,
                                                   upstream: ServedUpstream) -> None:
    client.messages.create(model="scripted-small", max_tokens=50, system="Be brief.",
                           messages=[{"role": "user", "content": "hello"}])
    sent = upstream.last("/v1/chat/completions")["json"]
    assert sent["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "hello"}]
    assert sent["max_tokens"] == 50
    assert "authorization" not in {k.lower() for k in sent}  # gateway-keys mode


def test_retries_apply(client: anthropic.Anthropic, upstream: ServedUpstream) -> None:
    upstream.app.failures = [503, 502]
    assert ask(client, "scripted-small").parse().content[0].text == "You said: hello"
    assert sum(1 for r in upstream.requests if r["path"] == "/v1/chat/completions") == 3


# ---- policies ----------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_inline_disclaimer(client: anthropic.Anthropic, model: str) -> None:
    raw = ask(client, model, Q, verity="flagged")
    assert raw.headers["x-verity-verdict"] == "fail"
    assert raw.headers["x-verity-action"] == "disclaimer"
    assert raw.headers["x-verity-policy"] == "flagged"
    message = raw.parse()
    assert message.content[0].text == f"You said: {Q}\n[unverified: fail]"


@pytest.mark.parametrize("model", MODELS)
def test_inline_block_is_a_refusal(client: anthropic.Anthropic, model: str) -> None:
    raw = ask(client, model, Q, verity="blocked")
    assert raw.headers["x-verity-action"] == "block"
    message = raw.parse()
    assert [b.text for b in message.content if b.type == "text"] == ["Blocked by blocked."]
    assert message.stop_reason == "refusal"


@pytest.mark.parametrize("model", MODELS)
def test_a_pass_keeps_the_answer(client: anthropic.Anthropic, model: str) -> None:
    raw = ask(client, model, "hello", verity="blocked")
    assert raw.headers["x-verity-verdict"] == "pass"
    assert raw.parse().content[0].text == "You said: hello"


def test_block_style_error_is_an_anthropic_error(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.UnprocessableEntityError) as err:
        ask(client, "scripted-small", Q, verity="refused")
    assert err.value.body["type"] == "error"
    assert err.value.body["error"]["type"] == "invalid_request_error"
    assert err.value.response.headers["x-verity-action"] == "block"


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("name", ["flagged", "flagged-pt"])
def test_stream_disclaimer(client: anthropic.Anthropic, model: str, name: str) -> None:
    text, final, headers = stream(client, model, Q, verity=name)
    assert text == f"You said: {Q}\n[unverified: fail]"
    assert final.content[-1].text.endswith("[unverified: fail]")
    if name == "flagged":  # buffered: the verdict is known before the headers
        assert headers["x-verity-verdict"] == "fail"
    assert headers["x-verity-policy"] == name


@pytest.mark.parametrize("model", MODELS)
def test_stream_block(client: anthropic.Anthropic, model: str) -> None:
    text, final, headers = stream(client, model, Q, verity="blocked")
    assert text == "Blocked by blocked."
    assert final.stop_reason == "refusal"
    assert headers["x-verity-action"] == "block"


def test_stream_block_after_text_was_sent(client: anthropic.Anthropic) -> None:
    """streaming: passthrough relays text before the verdict: the block message follows
    it in the same text block, and the stop reason says refusal."""
    text, final, _ = stream(client, "scripted-small", Q, verity="blocked-pt")
    assert text.endswith("Blocked by blocked-pt.")
    assert final.stop_reason == "refusal"


def test_stream_block_style_error_is_an_error_event(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.APIStatusError) as err:
        stream(client, "scripted-small", Q, verity="refused-pt")
    assert "error" in str(err.value).lower()


REGENERATE = ('fail: {type: regenerate, max_attempts: 1, fallback_model: claude-verity-test, '
              'fallback: {type: block}}')


def test_regenerate_falls_back_to_another_upstream(
        make_gateway: GatewayFactory, fake: FakeAnthropic, upstream: ServedUpstream,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    policies = tmp_path_factory.mktemp("messages-regen")
    (policies / "regen.yaml").write_text(policy("regen", "inline", REGENERATE))
    upstream.app.default_reply = "the forbidden answer"  # fails every time
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, UPSTREAM_KEY)
        gw = make_gateway(policies_dir=str(policies), reload_policies=False, upstreams=[
            {"name": "claude", "kind": "anthropic", "base_url": fake.url + "/v1",
             "api_key_env": KEY_ENV, "models": ["claude-*"]},
            {"name": "scripted", "base_url": upstream.base_url}],
            auth={"keys": [{"name": "app", "tenant": "acme", "key": CLIENT_KEY,
                            "policy_selection": True}]})
    client = anthropic.Anthropic(base_url=gw.url, api_key=CLIENT_KEY, max_retries=0)
    try:
        raw = ask(client, "scripted-small", "hello", verity="regen")
    finally:
        client.close()
    assert raw.headers["x-verity-verdict"] == "pass"
    assert raw.parse().content[0].text.startswith("You said:")  # Claude's (the fake's) answer
    assert fake.last()["body"]["model"] == "claude-verity-test"


@pytest.mark.parametrize("model", MODELS)
def test_shadow_leaves_the_answer(client: anthropic.Anthropic, model: str) -> None:
    raw = ask(client, model, Q, verity="shadowed")
    assert raw.headers["x-verity-mode"] == "shadow"
    assert raw.parse().content[0].text == f"You said: {Q}"


# ---- errors, count_tokens, models --------------------------------------------------------


def test_errors_are_anthropic_shaped(client: anthropic.Anthropic,
                                     make_anthropic: Callable[..., anthropic.Anthropic]) -> None:
    with pytest.raises(anthropic.BadRequestError) as unknown:
        ask(client, "scripted-small", verity="nope")  # no such policy
    assert unknown.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.AuthenticationError) as auth:
        ask(make_anthropic(api_key="sk-wrong"), "scripted-small")
    assert auth.value.body["error"]["type"] == "authentication_error"
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="scripted-small", max_tokens=0,
                               messages=[{"role": "user", "content": "hi"}])
    assert bad.value.body == {"type": "error", "error": {
        "type": "invalid_request_error", "message": bad.value.body["error"]["message"]}}


def test_an_upstream_error_keeps_its_status(client: anthropic.Anthropic,
                                            upstream: ServedUpstream,
                                            fake: FakeAnthropic) -> None:
    upstream.app.failures = [429, 429, 429]
    with pytest.raises(anthropic.RateLimitError) as err:
        ask(client, "scripted-small")
    assert err.value.body["error"]["type"] == "rate_limit_error"
    with pytest.raises(anthropic.InternalServerError) as native:
        ask(client, "claude-verity-test", "status:529")  # relayed as Anthropic sent it
    assert native.value.status_code == 529
    assert native.value.body["error"]["type"] == "overloaded_error"


def test_count_tokens(client: anthropic.Anthropic) -> None:
    counted = client.messages.count_tokens(
        model="claude-verity-test", messages=[{"role": "user", "content": "one two three"}])
    assert counted.input_tokens == 3
    with pytest.raises(anthropic.NotFoundError) as err:
        client.messages.count_tokens(model="scripted-small",
                                     messages=[{"role": "user", "content": "hi"}])
    assert err.value.body["error"]["type"] == "not_found_error"


def test_models(client: anthropic.Anthropic) -> None:
    ids = [m.id for m in client.models.list()]
    assert "claude-sonnet-4-5" in ids and "scripted-small" in ids


def test_the_openai_sdk_path_is_unchanged(gw: ServedGateway) -> None:
    r = httpx.get(gw.base_url + "/models", headers={"authorization": f"Bearer {CLIENT_KEY}"})
    assert r.json()["object"] == "list"  # no anthropic-version: OpenAI's shape


def test_forward_mode_sends_the_clients_key(make_gateway: GatewayFactory, fake: FakeAnthropic,
                                            upstream: ServedUpstream) -> None:
    """No gateway keys: the SDK's x-api-key goes to an Anthropic upstream as x-api-key,
    to an OpenAI-compatible one as a bearer token."""
    gw = make_gateway(upstreams=[
        {"name": "claude", "kind": "anthropic", "base_url": fake.url + "/v1",
         "models": ["claude-*"]},
        {"name": "scripted", "base_url": upstream.base_url}])
    client = anthropic.Anthropic(base_url=gw.url, api_key=UPSTREAM_KEY, max_retries=0)
    try:
        assert ask(client, "claude-verity-test").parse().content[0].text == "You said: hello"
        assert ask(client, "scripted-small").parse().content[0].text == "You said: hello"
    finally:
        client.close()
    assert fake.last()["headers"]["x-api-key"] == UPSTREAM_KEY
    sent = {k.lower(): v for k, v in upstream.last("/v1/chat/completions")["headers"].items()}
    assert sent["authorization"] == f"Bearer {UPSTREAM_KEY}"


# ---- the security rules every front door keeps ---------------------------------------------


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_a_wrong_method_is_a_405_only_for_a_caller_with_a_key(gw: ServedGateway,
                                                              path: str) -> None:
    with httpx.Client(base_url=gw.url, timeout=10) as http:
        anonymous = http.get(path)
        keyed = http.get(path, headers={"x-api-key": CLIENT_KEY})
    assert anonymous.status_code == 401 and "allow" not in anonymous.headers
    assert anonymous.json()["error"]["type"] == "authentication_error"
    assert keyed.status_code == 405, keyed.text
    assert keyed.headers["allow"] == "POST"
    assert keyed.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("headers", [
    [("x-api-key", CLIENT_KEY), ("x-api-key", CLIENT_KEY)],
    [("authorization", f"Bearer {CLIENT_KEY}"), ("authorization", f"Bearer {CLIENT_KEY}")],
])
def test_several_credentials_are_refused(gw: ServedGateway, fake: FakeAnthropic,
                                         headers: list[tuple[str, str]]) -> None:
    r = httpx.post(gw.url + "/v1/messages", headers=headers, timeout=10, json={
        "model": "claude-verity-test", "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 401, r.text
    assert r.json()["error"]["type"] == "authentication_error"
    assert fake.requests == []


def test_a_duplicate_key_is_refused(gw: ServedGateway, fake: FakeAnthropic) -> None:
    body = (b'{"model": "claude-verity-test", "model": "scripted-small", "max_tokens": 8, '
            b'"messages": [{"role": "user", "content": "hi"}]}')
    r = httpx.post(gw.url + "/v1/messages", content=body, timeout=10,
                   headers={"x-api-key": CLIENT_KEY, "content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert "twice" in r.json()["error"]["message"]
    assert fake.requests == []
