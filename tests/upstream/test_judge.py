"""The judge client against a real scripted OpenAI-compatible server."""

from __future__ import annotations

import contextlib

import pytest

from gateway.upstream.judge import OpenAIJudge, create_judge
from gateway.layers._judged import parse_json_reply
from gateway.settings import ConfigError, JudgeConfig, load_settings
from gateway.layers.base import JudgeError
from serving import ServedUpstream

pytestmark = pytest.mark.anyio


def _judge(upstream: ServedUpstream, **cfg: object) -> OpenAIJudge:
    return OpenAIJudge(JudgeConfig(**cfg), upstream.base_url, "sk-judge-key")  # type: ignore[arg-type]


async def test_complete_counts_tokens_prices_and_sends_the_key(upstream: ServedUpstream) -> None:
    upstream.app.default_reply = '{"verdict": "entailment"}'
    judge = _judge(upstream, model="judge-m", price_per_1k_input=1.0, price_per_1k_output=2.0)
    try:
        reply = await judge.complete([{"role": "user", "content": "is it so?"}])
    finally:
        await judge.aclose()
    assert reply.texts == ['{"verdict": "entailment"}']
    assert reply.model == "judge-m" and not reply.cached
    assert reply.input_tokens > 0 and reply.output_tokens > 0
    assert reply.cost == pytest.approx((reply.input_tokens * 1 + reply.output_tokens * 2) / 1000)
    sent = upstream.last("/v1/chat/completions")
    assert sent["headers"]["authorization"] == "Bearer sk-judge-key"
    assert sent["json"]["model"] == "judge-m" and sent["json"]["temperature"] == 0.0


async def test_temperature_zero_replies_are_cached_and_n_is_filled(
        upstream: ServedUpstream) -> None:
    judge = _judge(upstream)
    try:
        msgs = [{"role": "user", "content": "same prompt"}]
        first = await judge.complete(msgs, model="m")
        second = await judge.complete(msgs, model="m")
        sampled = await judge.complete(msgs, model="m", temperature=0.7, n=3)
    finally:
        await judge.aclose()
    assert not first.cached and second.cached and second.cost == 0.0
    assert len(sampled.texts) == 3  # the scripted server ignores n: the judge asked again
    assert len(upstream.requests) == 1 + 3


async def test_http_errors_and_missing_model_are_judge_errors(upstream: ServedUpstream) -> None:
    judge = _judge(upstream)
    try:
        with pytest.raises(JudgeError, match="no judge model"):
            await judge.complete([{"role": "user", "content": "x"}])
        upstream.app.default_reply = None
        judge2 = OpenAIJudge(JudgeConfig(), upstream.base_url, None)
        try:
            judge2._client.headers["x-mock-status"] = "500"
            with pytest.raises(JudgeError, match="HTTP 500"):
                await judge2.complete([{"role": "user", "content": "x"}], model="m")
        finally:
            await judge2.aclose()
    finally:
        await judge.aclose()


async def test_connect_failure_is_a_judge_error() -> None:
    judge = OpenAIJudge(JudgeConfig(timeout=2), "http://127.0.0.1:9/v1", None)
    try:
        with pytest.raises(JudgeError, match="failed"):
            await judge.complete([{"role": "user", "content": "x"}], model="m")
    finally:
        await judge.aclose()


def test_parse_json_reply_tolerates_fences_and_prose() -> None:
    assert parse_json_reply('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_reply('Sure! Here it is: {"a": [1, 2]} hope it helps') == {"a": [1, 2]}
    assert parse_json_reply("[1, 2]") == [1, 2]
    with pytest.raises(JudgeError):
        parse_json_reply("no json here")


def test_create_judge_follows_config() -> None:
    base = {"upstreams": [{"name": "a", "base_url": "http://127.0.0.1:1/v1"},
                          {"name": "b", "base_url": "http://127.0.0.1:2/v1"}]}
    s = load_settings(environ={}, overrides={**base, "judge": {"upstream": "b"}})
    judge = create_judge(s)
    assert isinstance(judge, OpenAIJudge) and judge.url == "http://127.0.0.1:2/v1/chat/completions"
    assert create_judge(load_settings(environ={})) is None
    with pytest.raises(ConfigError, match="judge.upstream"):
        load_settings(environ={}, overrides={**base, "judge": {"upstream": "zzz"}})


async def test_model_precedence_override_then_configured_then_request(
        upstream: ServedUpstream) -> None:
    configured = _judge(upstream, model="judge-m", cache_size=0)
    bare = _judge(upstream, cache_size=0)
    msgs = [{"role": "user", "content": "which model?"}]
    try:
        await configured.complete(msgs, model="request-m", override="layer-m")
        await configured.complete(msgs, model="request-m")
        await bare.complete(msgs, model="request-m")
    finally:
        await configured.aclose()
        await bare.aclose()
    sent = [r["json"]["model"] for r in upstream.requests]
    assert sent == ["layer-m", "judge-m", "request-m"]


def test_judge_kind_follows_its_upstream() -> None:
    from gateway.upstream.judge import AnthropicJudge

    s = load_settings(environ={}, overrides={"upstreams": [
        {"name": "claude", "kind": "anthropic", "base_url": "http://127.0.0.1:1/v1"}]})
    judge = create_judge(s)
    assert isinstance(judge, AnthropicJudge)
    assert str(judge._client.base_url).rstrip("/") == "http://127.0.0.1:1"
    s = load_settings(environ={}, overrides={
        "upstreams": [{"name": "claude", "kind": "anthropic", "base_url": "http://127.0.0.1:1/v1"}],
        "judge": {"base_url": "http://127.0.0.1:2/v1"}})
    assert isinstance(create_judge(s), OpenAIJudge)


async def test_extra_choices_beyond_n_are_dropped_and_not_cached() -> None:
    """A server that returns more choices than ``n`` asked for: the reply (and the
    cached copy) has exactly ``n`` texts, so a layer reading them all gets n."""
    import httpx
    import orjson

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=orjson.dumps({
            "model": "m", "usage": {"prompt_tokens": 3, "completion_tokens": 6},
            "choices": [{"message": {"content": f"answer {i}"}} for i in range(3)]}))

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    judge = OpenAIJudge(JudgeConfig(), "http://judge.test/v1", None, client=client)
    try:
        msgs = [{"role": "user", "content": "x"}]
        one = await judge.complete(msgs, model="m")
        again = await judge.complete(msgs, model="m")
        two = await judge.complete(msgs, model="m", temperature=1.0, n=2)
    finally:
        await judge.aclose()
    assert one.texts == ["answer 0"] and again.cached and again.texts == ["answer 0"]
    assert two.texts == ["answer 0", "answer 1"]


async def test_samples_a_server_did_not_return_are_asked_for_together() -> None:
    """A server that ignores ``n``: the missing samples are asked for at once (one
    round trip more, not n - 1), each request under ``max_concurrency``."""
    import asyncio

    import httpx
    import orjson

    in_flight = most = 0
    calls: list[int] = []
    all_in = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, most
        calls.append(orjson.loads(request.content)["n"])
        in_flight += 1
        most = max(most, in_flight)
        if len(calls) > 1 and in_flight >= 3:
            all_in.set()
        if len(calls) > 1:  # the follow-ups wait for each other (or 0.5 s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_in.wait(), 0.5)
        in_flight -= 1
        return httpx.Response(200, content=orjson.dumps({
            "model": "m", "choices": [{"message": {"content": f"answer {len(calls)}"}}]}))

    for limit, expected in ((16, 3), (2, 2)):
        calls.clear()
        most = 0
        all_in.clear()
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        judge = OpenAIJudge(JudgeConfig(max_concurrency=limit), "http://judge.test/v1", None,
                            client=client)
        try:
            reply = await judge.complete([{"role": "user", "content": "x"}], model="m",
                                         temperature=1.0, n=4)
        finally:
            await judge.aclose()
        assert len(reply.texts) == 4 and calls == [4, 1, 1, 1]
        assert most == expected, (limit, most)


async def test_anthropic_judge_sends_system_and_developer_text_as_system() -> None:
    """The Messages API has no system/developer role: their text goes to ``system``;
    content given as text parts is sent as its text, not as a Python repr."""
    from types import SimpleNamespace

    from gateway.upstream.judge import AnthropicJudge

    sent: list[dict[str, object]] = []

    async def create(**kwargs: object) -> SimpleNamespace:
        sent.append(kwargs)
        return SimpleNamespace(content=[SimpleNamespace(text="ok")],
                               usage=SimpleNamespace(input_tokens=1, output_tokens=1))

    judge = AnthropicJudge(JudgeConfig(), "key", "http://127.0.0.1:9")
    await judge.aclose()
    judge._client = SimpleNamespace(messages=SimpleNamespace(create=create))  # type: ignore[assignment]
    reply = await judge.complete([
        {"role": "system", "content": "Be strict."},
        {"role": "developer", "content": [{"type": "text", "text": "Answer in JSON."}]},
        {"role": "user", "content": [{"type": "text", "text": "Is it so?"}]}], model="claude")
    assert reply.texts == ["ok"]
    assert sent[0]["system"] == "Be strict.\n\nAnswer in JSON."
    assert sent[0]["messages"] == [{"role": "user", "content": "Is it so?"}]


async def test_a_failed_sample_keeps_its_underlying_error_as_the_cause() -> None:
    """The judge error raised out of concurrent samples still says why (logs show it)."""
    import httpx

    calls = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:  # the first reply has one choice: two more are asked for at once
            return httpx.Response(200, json={"model": "m", "choices": [
                {"message": {"content": "one"}}]})
        raise httpx.ConnectError("refused")

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    judge = OpenAIJudge(JudgeConfig(), "http://judge.test/v1", None, client=client)
    try:
        with pytest.raises(JudgeError) as info:
            await judge.complete([{"role": "user", "content": "x"}], model="m",
                                 temperature=1.0, n=3)
    finally:
        await judge.aclose()
    assert isinstance(info.value.__cause__, httpx.ConnectError)


async def test_a_reply_the_layer_could_not_use_leaves_the_cache() -> None:
    """QA: a judge reply the audit layer could not parse stayed cached, so identical
    requests kept failing after the judge was fixed, until a restart. The pipeline runs
    every layer under uncache_on_error: the replies a failing layer got are dropped
    (hits included); a layer that succeeds keeps them."""
    import httpx

    from gateway.layers.base import uncache_on_error

    replies = iter(["bad", "good", "unused"])

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"model": "m", "choices": [
            {"message": {"content": next(replies)}}]})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    judge = OpenAIJudge(JudgeConfig(), "http://judge.test/v1", None, client=client)
    msgs = [{"role": "user", "content": "x"}]

    async def layer() -> str:
        text = (await judge.complete(msgs, model="m")).texts[0]
        if text != "good":
            raise JudgeError(f"unusable reply {text!r}")
        return text

    try:
        with pytest.raises(JudgeError), uncache_on_error():
            await layer()
        with uncache_on_error():
            assert await layer() == "good"  # asked again, not the cached "bad"
        again = await judge.complete(msgs, model="m")
        assert again.cached and again.texts == ["good"]  # a good reply stays cached
    finally:
        await judge.aclose()
