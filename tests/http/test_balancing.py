"""Fallbacks, pools and passive health against a real gateway: the openai SDK → the
gateway → two scripted upstreams (``a`` echoes, ``b`` answers "from b").

- fallbacks: ordered targets per model glob, with a model rewrite; regenerate's
  ``fallback_model`` is routed the same way (its pool, its fallbacks, retries);
- pools: weighted round-robin and least-in-flight;
- passive health: consecutive failures open an upstream (skipped), a probe after the
  cooldown closes it; ``/readyz`` shows it and never goes unready for it.
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
from gateway.testing.servers import ServerThread
from serving import GatewayFactory, ServedGateway, ServedUpstream, wait_until

FAST = {"base_backoff": 0.001, "max_backoff": 0.005}


@pytest.fixture(scope="module")
def b_server() -> Iterator[ServedUpstream]:
    app = ScriptedUpstream(default_reply="from b")
    with ServerThread(app) as server:
        yield ServedUpstream(app, server)


@pytest.fixture
def b(b_server: ServedUpstream) -> ServedUpstream:
    b_server.reset()
    return b_server


@pytest.fixture
def a(upstream: ServedUpstream) -> ServedUpstream:
    return upstream


def calls(up: ServedUpstream) -> int:
    return sum(1 for r in up.requests if r["path"] == "/v1/chat/completions")


def models_asked(up: ServedUpstream) -> list[str]:
    return [r["json"]["model"] for r in up.requests if r["path"] == "/v1/chat/completions"]


def ask(client: openai.OpenAI, model: str = "gpt-4o", **kw: Any) -> str:
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hello"}], **kw)
    return reply.choices[0].message.content or ""


def two(a: ServedUpstream, b: ServedUpstream, **b_extra: Any) -> list[dict[str, Any]]:
    return [{"name": "a", "base_url": a.base_url},
            {"name": "b", "base_url": b.base_url, "models": [], **b_extra}]


def readyz(gw: ServedGateway) -> dict[str, Any]:
    r = httpx.get(gw.url + "/readyz")
    assert r.status_code == 200  # an upstream's health never makes the gateway unready
    detail: dict[str, Any] = r.json()["upstreams"]
    return detail


# ---- fallbacks ---------------------------------------------------------------------------


def test_every_request_succeeds_through_the_fallback_when_the_first_always_fails(
        make_gateway: GatewayFactory, a: ServedUpstream, b: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    a.app.fail_rate = 1.0  # 503 on every call
    gw = make_gateway(readyz_detail="public", upstreams=two(a, b), routing={"retries": FAST, "fallbacks": [
        {"model": "gpt-4o*", "targets": [{"upstream": "b"}]}]})
    client = make_client(gw)
    for _ in range(10):
        assert ask(client) == "from b"
    assert calls(b) == 10
    assert calls(a) == 3  # three failures opened it: skipped since, not asked
    assert readyz(gw)["upstreams"]["a"]["state"] == "open"


def test_a_fallback_can_ask_for_another_model(
        make_gateway: GatewayFactory, a: ServedUpstream, b: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    a.app.failures = [503]
    gw = make_gateway(readyz_detail="public", upstreams=two(a, b), routing={"retries": FAST, "fallbacks": [
        {"model": "gpt-4o*", "targets": [{"upstream": "b", "model": "gpt-4o-mini"}]}]})
    reply = make_client(gw).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hello"}])
    assert reply.choices[0].message.content == "from b"
    assert models_asked(a) == ["gpt-4o"] and models_asked(b) == ["gpt-4o-mini"]


def test_a_model_without_a_fallback_rule_gets_the_failure(
        make_gateway: GatewayFactory, a: ServedUpstream, b: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    a.app.fail_rate = 1.0
    gw = make_gateway(readyz_detail="public", upstreams=two(a, b), routing={"retries": FAST, "fallbacks": [
        {"model": "claude-*", "targets": [{"upstream": "b"}]}]})
    with pytest.raises(openai.InternalServerError):
        ask(make_client(gw))
    assert calls(b) == 0


def test_a_streamed_request_falls_back_too(
        make_gateway: GatewayFactory, a: ServedUpstream, b: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    a.app.failures = [502]
    gw = make_gateway(readyz_detail="public", upstreams=two(a, b), routing={"retries": FAST, "fallbacks": [
        {"model": "*", "targets": [{"upstream": "b"}]}]})
    stream = make_client(gw).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hello"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "from b"


REGENERATE = """
mode: inline
allow_header_selection: true
layers:
  - name: keyword
    config: {block: ["forbidden"]}
actions:
  fail: {type: regenerate, max_attempts: 1, fallback_model: backup-model,
         fallback: {type: block}}
"""


def test_regenerate_fallback_model_is_routed_with_retries_and_fallbacks(
        make_gateway: GatewayFactory, a: ServedUpstream, b: ServedUpstream,
        make_client: Callable[..., openai.OpenAI], tmp_path: Path) -> None:
    (tmp_path / "regen.yaml").write_text(REGENERATE, encoding="utf-8")
    a.app.default_reply = "the forbidden answer"
    b.app.failures = [503]  # the fallback model's upstream fails once: retried
    gw = make_gateway(readyz_detail="public", policies_dir=str(tmp_path),
                      upstreams=[{"name": "a", "base_url": a.base_url, "models": ["gpt-*"]},
                                 {"name": "b", "base_url": b.base_url, "models": ["backup-*"]}],
                      routing={"retries": FAST})
    raw = make_client(gw).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hello"}],
        extra_headers={"x-verity-policy": "regen"})
    assert raw.parse().choices[0].message.content == "from b"
    assert raw.headers["x-verity-verdict"] == "pass"
    assert models_asked(a) == ["gpt-4o", "gpt-4o"]  # the answer, the regenerate attempt
    assert models_asked(b) == ["backup-model", "backup-model"]  # failed once, retried


# ---- pools -------------------------------------------------------------------------------


def pool(strategy: str, wa: int = 1, wb: int = 1) -> dict[str, Any]:
    return {"retries": FAST, "pools": {"gpt": {
        "models": ["gpt-*"], "strategy": strategy,
        "members": [{"upstream": "a", "weight": wa}, {"upstream": "b", "weight": wb}]}}}


def test_weighted_round_robin_spreads_by_weight(
        make_gateway: GatewayFactory, a: ServedUpstream, b: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    gw = make_gateway(readyz_detail="public", upstreams=two(a, b), routing=pool("weighted_round_robin", 3, 1))
    client = make_client(gw)
    answers = [ask(client) for _ in range(8)]
    assert (calls(a), calls(b)) == (6, 2)
    assert answers[:4] == ["You said: hello", "You said: hello", "from b", "You said: hello"]


def test_a_model_outside_the_pool_keeps_the_first_matching_upstream(
        make_gateway: GatewayFactory, a: ServedUpstream, b: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    gw = make_gateway(readyz_detail="public", upstreams=two(a, b), routing=pool("weighted_round_robin"))
    client = make_client(gw)
    for _ in range(3):
        assert ask(client, model="scripted-small") == "You said: hello"
    assert calls(b) == 0


@pytest.mark.parametrize("strategy", ["least_in_flight", "weighted_round_robin"])
def test_least_in_flight_sends_the_next_call_where_no_stream_is_open(
        strategy: str, make_gateway: GatewayFactory, a: ServedUpstream, b: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    a.app.chunk_delay_ms = 50  # a's streams stay open a while
    gw = make_gateway(readyz_detail="public", upstreams=two(a, b), routing=pool(strategy, 3, 1))
    client = make_client(gw)
    stream = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "one two three four"}],
        stream=True)
    first = next(iter(stream))  # a's stream is open (weight 3: the first pick)
    assert first.choices and calls(a) == 1
    second = ask(client)
    for _ in stream:
        pass
    if strategy == "least_in_flight":
        assert second == "from b"  # a has a call in flight, b none
    else:
        assert second == "You said: hello"  # smooth WRR 3:1 picks a twice first


def test_an_open_member_is_skipped_and_a_probe_closes_it(
        make_gateway: GatewayFactory, a: ServedUpstream, b: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    routing = pool("weighted_round_robin")
    # The cooldown is long enough that a loaded box cannot reach half-open while the six
    # requests below run (0.3 s could: seen in CI); the wait for half-open is polled.
    routing["health"] = {"failure_threshold": 2, "cooldown": 3.0, "max_cooldown": 10}
    gw = make_gateway(readyz_detail="public", upstreams=two(a, b), routing=routing)
    client = make_client(gw)
    a.app.fail_rate = 1.0
    for _ in range(6):
        assert ask(client) == "from b"  # every failure of a was retried on b
    assert calls(a) == 2
    health = readyz(gw)
    assert health["upstreams"]["a"]["state"] == "open"
    assert health["upstreams"]["a"]["opened"] == 1
    assert health["pools"]["gpt"]["available"] == 1
    assert health["upstreams"]["b"]["state"] == "closed"

    a.app.fail_rate = 0.0  # a recovers; after its cooldown one probe call closes it
    wait_until(lambda: readyz(gw)["upstreams"]["a"]["state"] == "half_open",
               timeout=10, message="a half-open")
    answers = {ask(client) for _ in range(4)}
    assert answers == {"You said: hello", "from b"}
    assert readyz(gw)["upstreams"]["a"]["state"] == "closed"


def test_a_failed_probe_opens_it_again_for_longer(
        make_gateway: GatewayFactory, a: ServedUpstream, b: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    routing = pool("weighted_round_robin")
    routing["health"] = {"failure_threshold": 1, "cooldown": 0.2, "max_cooldown": 60,
                         "growth": 100}
    gw = make_gateway(readyz_detail="public", upstreams=two(a, b), routing=routing)
    client = make_client(gw)
    a.app.fail_rate = 1.0
    while calls(a) == 0:
        assert ask(client) == "from b"
    wait_until(lambda: readyz(gw)["upstreams"]["a"]["state"] == "half_open",
               message="a half-open")
    while calls(a) == 1:  # the probe fails: open again, now for 20 s
        assert ask(client) == "from b"
    health = readyz(gw)["upstreams"]["a"]
    assert health["state"] == "open" and health["opened"] == 2
    assert health["cooldown_remaining"] > 1


def test_readyz_detail_lists_upstreams_and_pools(
        make_gateway: GatewayFactory, a: ServedUpstream, b: ServedUpstream) -> None:
    gw = make_gateway(readyz_detail="public", upstreams=two(a, b), routing=pool("least_in_flight", 2, 1))
    r = httpx.get(gw.url + "/readyz")
    assert r.status_code == 200
    detail = r.json()["upstreams"]
    assert set(detail["upstreams"]) == {"a", "b"}
    assert detail["pools"]["gpt"] == {"strategy": "least_in_flight", "available": 2,
                                      "members": [{"upstream": "a", "weight": 2},
                                                  {"upstream": "b", "weight": 1}]}


def test_an_unknown_upstream_in_routing_is_a_config_error() -> None:
    from gateway.settings import ConfigError, load_settings

    with pytest.raises(ConfigError) as err:
        load_settings(environ={}, overrides={
            "upstreams": [{"name": "a", "base_url": "http://127.0.0.1:9/v1"}],
            "routing": {"fallbacks": [{"model": "*", "targets": [{"upstream": "nope"}]}]}})
    assert "routing.fallbacks.0.targets.0.upstream: no upstream named 'nope'" in str(err.value)


def test_audit_names_the_fallback(make_gateway: GatewayFactory, a: ServedUpstream,
                                  b: ServedUpstream, tmp_path: Path,
                                  make_client: Callable[..., openai.OpenAI]) -> None:
    (tmp_path / "checked.yaml").write_text(
        "mode: inline\nallow_header_selection: true\nlayers:\n  - name: keyword\n"
        "    config: {block: [\"forbidden\"]}\n", encoding="utf-8")
    a.app.failures = [503]
    gw = make_gateway(readyz_detail="public", policies_dir=str(tmp_path), upstreams=two(a, b), routing={
        "retries": FAST, "fallbacks": [{"model": "*", "targets": [
            {"upstream": "b", "model": "gpt-4o-mini"}]}]})
    ask(make_client(gw), extra_headers={"x-verity-policy": "checked"})
    path = Path(gw.settings.audit.path or "")

    def record() -> dict[str, Any] | None:
        gw.app.proxy.engine.audit.flush()  # type: ignore[union-attr]
        lines = path.read_bytes().splitlines() if path.exists() else []
        return orjson.loads(lines[-1]) if lines else None

    rec = wait_until(record, message="the audit record")
    assert rec["upstream"] == {"name": "b", "attempts": 2, "tried": ["a", "b"],
                               "reasons": ["retry"], "fallback": True, "model": "gpt-4o-mini"}


@pytest.mark.parametrize("keyed", [True, False])
def test_a_long_retry_after_opens_the_upstream_only_with_the_gateways_own_key(
        keyed: bool, make_gateway: GatewayFactory, a: ServedUpstream, b: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    """Over ``retry_after_cap`` the retry goes elsewhere; with the gateway's own key the
    429 is every client's, so ``a`` is left alone for that long; in forward mode it was
    one client's limit, and ``a`` stays in the rotation."""
    from serving import CLIENT_KEY

    extra: dict[str, Any] = {"auth": {"keys": [{"name": "k", "tenant": "t",
                                                 "key": CLIENT_KEY}]}} if keyed else {}
    a.app.failures = [429]
    a.app.fail_retry_after = "120"
    gw = make_gateway(readyz_detail="public", upstreams=two(a, b),
                      routing=pool("weighted_round_robin"), **extra)
    client = make_client(gw)
    assert ask(client) == "from b"  # a answered 429 first: retried on b at once
    for _ in range(4):
        ask(client)
    r = httpx.get(gw.url + "/readyz").json()["upstreams"]["upstreams"]["a"]
    if keyed:
        assert r["state"] == "open" and r["cooldown_remaining"] > 60
        assert calls(a) == 1
    else:
        assert r["state"] == "closed"
        assert calls(a) == 3  # 1 + its share of the next 4
