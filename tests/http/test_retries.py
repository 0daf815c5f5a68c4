"""Retries against a real gateway: the openai SDK (its own retries off) → the gateway
→ scripted upstreams that fail a given number of times.

What is retried: 429 and 5xx statuses, connect errors, timeouts before the response
headers; never a 4xx, never a stream once it reached the client, never a forwarded
non-idempotent route unless ``routing.retries.non_idempotent``. The audit record's
``upstream`` says who answered and after how many calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from gateway.testing.scripted import ScriptedUpstream
from gateway.testing.servers import ServerThread, free_port
from serving import CLIENT_KEY, GatewayFactory, ServedGateway, ServedUpstream, wait_until

FAST = {"base_backoff": 0.001, "max_backoff": 0.005}
"""Backoff short enough for tests (the delays are not what is tested here)."""

POLICY = """
mode: inline
allow_header_selection: true
layers:
  - name: keyword
    config: {block: ["forbidden"]}
"""


@pytest.fixture(scope="module")
def second() -> Iterator[ServedUpstream]:
    """Another scripted upstream, answering "from second"."""
    app = ScriptedUpstream(default_reply="from second")
    with ServerThread(app) as server:
        yield ServedUpstream(app, server)


@pytest.fixture
def backup(second: ServedUpstream) -> ServedUpstream:
    second.reset()
    return second


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("retry-policies")
    (directory / "checked.yaml").write_text(POLICY, encoding="utf-8")
    return directory


def chat_calls(up: ServedUpstream) -> int:
    return sum(1 for r in up.requests if r["path"] == "/v1/chat/completions")


def audit(gw: ServedGateway, expect: int) -> list[dict[str, Any]]:
    path = Path(gw.settings.audit.path or "")
    proxy = gw.app.proxy
    assert proxy is not None

    def read() -> list[dict[str, Any]]:
        flush = getattr(getattr(proxy.engine, "audit", None), "flush", None)
        if flush is not None:
            flush()
        if not path.exists():
            return []
        records = [orjson.loads(line) for line in path.read_bytes().splitlines() if line]
        return records if len(records) >= expect else []

    records: list[dict[str, Any]] = wait_until(read, message=f"{expect} audit records")
    return records


def ask(client: openai.OpenAI, **kw: Any) -> Any:
    return client.chat.completions.create(
        model="scripted-small", messages=[{"role": "user", "content": "hello"}], **kw)


@pytest.fixture(scope="module")
def retrying(make_gateway: GatewayFactory) -> ServedGateway:
    """One upstream, three attempts."""
    return make_gateway(routing={"retries": FAST})


# ---- what is retried ---------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_a_retryable_status_is_retried_until_it_succeeds(
        status: int, retrying: ServedGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.failures = [status, status]
    reply = ask(make_client(retrying))
    assert reply.choices[0].message.content == "You said: hello"
    assert chat_calls(upstream) == 3


def test_the_last_failure_reaches_the_client_once_attempts_run_out(
        retrying: ServedGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.failures = [503, 503, 503, 503]
    with pytest.raises(openai.InternalServerError) as err:
        ask(make_client(retrying))
    assert err.value.status_code == 503
    assert err.value.body["code"] == "scripted_503"  # the upstream's own error body
    assert chat_calls(upstream) == 3
    assert upstream.app.failures == [503]  # the fourth was never asked for


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_a_client_error_is_not_retried(status: int, retrying: ServedGateway,
                                       upstream: ServedUpstream,
                                       make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.failures = [status]
    with pytest.raises(openai.APIStatusError) as err:
        ask(make_client(retrying))
    assert err.value.status_code == status
    assert chat_calls(upstream) == 1


def test_max_attempts_one_never_retries(make_gateway: GatewayFactory, upstream: ServedUpstream,
                                        make_client: Callable[..., openai.OpenAI]) -> None:
    gw = make_gateway(routing={"retries": {"max_attempts": 1}})
    upstream.app.failures = [503]
    with pytest.raises(openai.InternalServerError):
        ask(make_client(gw))
    assert chat_calls(upstream) == 1


def test_a_stream_is_retried_before_its_first_byte(
        retrying: ServedGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.failures = [503, 429]
    stream = ask(make_client(retrying), stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "You said: hello"
    assert chat_calls(upstream) == 3


def test_a_stream_cut_after_bytes_reached_the_client_is_not_retried(
        retrying: ServedGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    stream = ask(make_client(retrying), stream=True, extra_headers={"x-mock-cut-after": "2"})
    with pytest.raises((openai.APIError, httpx.HTTPError)):
        for _ in stream:
            pass
    assert chat_calls(upstream) == 1


def test_a_short_retry_after_is_waited_for_and_a_long_one_is_not(
        retrying: ServedGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.failures = [429]
    upstream.app.fail_retry_after = "0.01"
    assert ask(make_client(retrying)).choices[0].message.content == "You said: hello"
    assert chat_calls(upstream) == 2

    upstream.reset()
    upstream.app.failures = [429]
    upstream.app.fail_retry_after = "120"  # over retry_after_cap: not here, not now
    with pytest.raises(openai.RateLimitError) as err:
        ask(make_client(retrying))
    assert err.value.response.headers["retry-after"] == "120"
    assert chat_calls(upstream) == 1


def test_x_should_retry_false_is_honoured(make_gateway: GatewayFactory,
                                          make_client: Callable[..., openai.OpenAI]) -> None:
    async def refusing(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        refusing.calls += 1  # type: ignore[attr-defined]
        await send({"type": "http.response.start", "status": 503, "headers": [
            (b"content-type", b"application/json"), (b"x-should-retry", b"false")]})
        await send({"type": "http.response.body", "body": b'{"error": {"message": "no",'
                    b' "type": "overloaded", "param": null, "code": null}}'})

    refusing.calls = 0  # type: ignore[attr-defined]
    with ServerThread(refusing) as server:
        gw = make_gateway(upstreams=[{"name": "no", "base_url": server.url + "/v1"}],
                          routing={"retries": FAST})
        with pytest.raises(openai.InternalServerError):
            ask(make_client(gw))
        gw.stop()
    assert refusing.calls == 1  # type: ignore[attr-defined]


def test_a_connect_error_is_retried_on_another_upstream(
        make_gateway: GatewayFactory, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    gw = make_gateway(upstreams=[{"name": "dead", "base_url": dead},
                                 {"name": "live", "base_url": upstream.base_url}],
                      routing={"retries": FAST, "pools": {"both": {
                          "models": ["*"], "members": [{"upstream": "dead"},
                                                       {"upstream": "live"}]}}})
    client = make_client(gw)
    for _ in range(4):  # whichever member the pool picks first
        assert ask(client).choices[0].message.content == "You said: hello"
    assert chat_calls(upstream) == 4


def test_a_connect_error_everywhere_is_a_502_after_every_attempt(
        make_gateway: GatewayFactory, make_client: Callable[..., openai.OpenAI]) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    gw = make_gateway(upstreams=[{"name": "dead", "base_url": dead}], routing={"retries": FAST})
    with pytest.raises(openai.APIStatusError) as err:
        ask(make_client(gw))
    assert err.value.status_code == 502
    assert err.value.body["code"] == "upstream_connect_error"


def test_a_timeout_before_the_headers_is_retried_elsewhere(
        make_gateway: GatewayFactory, upstream: ServedUpstream, backup: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.latency_ms = 5000  # answers after the gateway's read timeout
    gw = make_gateway(upstreams=[
        {"name": "slow", "base_url": upstream.base_url, "timeouts": {"read": 0.2}},
        {"name": "backup", "base_url": backup.base_url, "models": []}],
        routing={"retries": FAST, "fallbacks": [
            {"model": "*", "targets": [{"upstream": "backup"}]}]})
    reply = ask(make_client(gw))
    assert reply.choices[0].message.content == "from second"
    assert chat_calls(upstream) == 1 and chat_calls(backup) == 1


# ---- forwarded routes ----------------------------------------------------------------------


def test_a_forwarded_inference_post_is_retried(retrying: ServedGateway, upstream: ServedUpstream,
                                               make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.failures = [502]
    out = make_client(retrying).embeddings.create(model="scripted-small", input="hi")
    assert out.data
    assert sum(1 for r in upstream.requests if r["path"] == "/v1/embeddings") == 2


@pytest.mark.parametrize("allowed", [False, True])
def test_a_non_idempotent_forwarded_post_is_retried_only_when_configured(
        allowed: bool, make_gateway: GatewayFactory, upstream: ServedUpstream) -> None:
    gw = make_gateway(routing={"retries": {**FAST, "non_idempotent": allowed}})
    upstream.app.failures = [503]
    r = httpx.post(gw.base_url + "/batches", json={"input_file_id": "file-1"},
                   headers={"authorization": f"Bearer {CLIENT_KEY}"})
    calls = sum(1 for r in upstream.requests if r["path"] == "/v1/batches")
    if allowed:
        assert (r.status_code, calls) == (404, 2)  # retried; the scripted upstream has no batches
    else:
        assert (r.status_code, calls) == (503, 1)


def test_a_get_is_retried(retrying: ServedGateway, upstream: ServedUpstream) -> None:
    upstream.app.failures = [503]
    r = httpx.get(retrying.base_url + "/models/scripted-small",
                  headers={"authorization": f"Bearer {CLIENT_KEY}"})
    assert r.status_code == 404  # scripted has no such route: it was asked twice
    assert sum(1 for r in upstream.requests if r["path"] == "/v1/models/scripted-small") == 2


# ---- what the audit says -------------------------------------------------------------------


def test_the_audit_record_counts_the_attempts(make_gateway: GatewayFactory, policies: Path,
                                              upstream: ServedUpstream,
                                              make_client: Callable[..., openai.OpenAI]) -> None:
    gw = make_gateway(policies_dir=str(policies), routing={"retries": FAST})
    client = make_client(gw)
    upstream.app.failures = [503, 429]
    reply = client.chat.completions.with_raw_response.create(
        model="scripted-small", messages=[{"role": "user", "content": "hello"}],
        extra_headers={"x-verity-policy": "checked"})
    assert reply.headers["x-verity-verdict"] == "pass"
    ask(client, extra_headers={"x-verity-policy": "checked"})  # no failure this time
    first, second_record = audit(gw, 2)[-2:]
    assert first["upstream"] == {"name": "scripted", "attempts": 3,
                                 "tried": ["scripted", "scripted", "scripted"],
                                 "reasons": ["retry", "retry"]}
    assert second_record["upstream"] == {"name": "scripted", "attempts": 1}
