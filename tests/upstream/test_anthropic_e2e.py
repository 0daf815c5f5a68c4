"""An OpenAI SDK app talking to Claude through the gateway: a real gateway with a
``kind: anthropic`` upstream in front of a fake Anthropic server (both under uvicorn),
the official ``openai`` client (sync and async, streaming and not) in front of it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from fake_anthropic import TOOL_INPUT, FakeAnthropic
from gateway.testing.servers import ServerThread
from serving import CLIENT_KEY, GatewayFactory, ServedGateway

UPSTREAM_KEY = "sk-ant-upstream-secret-0042"
KEY_ENV = "VERITY_TEST_ANTHROPIC_KEY"
MODEL = "claude-sonnet-4-5"
ASK: Any = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"}]
WEATHER: Any = {"type": "function", "function": {
    "name": "weather", "description": "Forecast",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}}}}}
Client = Callable[..., openai.OpenAI]


def _user(text: str) -> Any:
    return [{"role": "user", "content": text}]
AsyncClient = Callable[..., openai.AsyncOpenAI]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    app = FakeAnthropic(key=UPSTREAM_KEY)
    with ServerThread(app) as server:
        app.url = server.url
        yield app


@pytest.fixture(autouse=True)
def _forget(fake: FakeAnthropic) -> None:
    fake.requests.clear()


@pytest.fixture(scope="module")
def upstream_key() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, UPSTREAM_KEY)
        yield


def _upstreams(fake: FakeAnthropic, **kw: Any) -> list[dict[str, Any]]:
    return [{"name": "claude", "kind": "anthropic", "base_url": fake.url + "/v1",
             "models": ["claude-*"], **kw}]


@pytest.fixture(scope="module")
def gw(make_gateway: GatewayFactory, fake: FakeAnthropic, upstream_key: None) -> ServedGateway:
    """Gateway-keys mode: clients send the gateway key, upstream gets its own key."""
    return make_gateway(upstreams=_upstreams(fake, api_key_env=KEY_ENV),
                        auth={"keys": [{"name": "app", "tenant": "acme", "key": CLIENT_KEY}]})


@pytest.fixture
def client(make_client: Client, gw: ServedGateway) -> openai.OpenAI:
    return make_client(gw)


# ---- plain completions --------------------------------------------------------------------


def test_completion(client: openai.OpenAI, fake: FakeAnthropic) -> None:
    r = client.chat.completions.create(model=MODEL, messages=ASK)
    assert r.object == "chat.completion"
    assert r.choices[0].message.content == "You said: hello there"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason == "stop"
    assert r.id == "msg_fake0001" and r.model == MODEL and r.created > 0
    assert r.usage is not None
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (2, 4, 6)
    req = fake.last()
    assert (req["method"], req["path"]) == ("POST", "/v1/messages")
    assert req["body"] == {"model": MODEL, "system": "Be brief.", "max_tokens": 4096,
                           "messages": [{"role": "user", "content": "hello there"}]}
    assert req["headers"]["x-api-key"] == UPSTREAM_KEY
    assert req["headers"]["anthropic-version"] == "2023-06-01"
    assert "authorization" not in req["headers"]
    assert not any(k.startswith("x-stainless") for k in req["headers"])


@pytest.mark.anyio
async def test_async_completion(make_async_client: AsyncClient, gw: ServedGateway) -> None:
    r = await make_async_client(gw).chat.completions.create(
        model=MODEL, messages=_user("async hi"), max_tokens=3,
        stop=["zzz"], temperature=0.2)
    assert r.choices[0].message.content == "You said: async"
    assert r.choices[0].finish_reason == "length"


def test_stop_sequence(client: openai.OpenAI, fake: FakeAnthropic) -> None:
    r = client.chat.completions.create(model=MODEL, stop=["there"],
                                       messages=_user("hello there"))
    assert r.choices[0].message.content == "You said: hello "
    assert r.choices[0].finish_reason == "stop"
    assert fake.last()["body"]["stop_sequences"] == ["there"]


# ---- streams ------------------------------------------------------------------------------


def test_stream(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(model=MODEL, messages=ASK, stream=True)
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: hello there"
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) == 4
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert all(c.usage is None for c in chunks)


def test_stream_with_usage(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=ASK, stream=True, stream_options={"include_usage": True}))
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (2, 4)


def test_stream_wire_format(gw: ServedGateway) -> None:
    with httpx.stream("POST", gw.base_url + "/chat/completions", json={
            "model": MODEL, "messages": ASK, "stream": True},
            headers={"authorization": f"Bearer {CLIENT_KEY}"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        body = b"".join(r.iter_bytes())
    events = body.split(b"\n\n")
    assert events[-1] == b"" and events[-2] == b"data: [DONE]"
    assert all(e.startswith(b"data: {") for e in events[:-2])
    assert b"event:" not in body  # Anthropic's event names do not leak through


@pytest.mark.anyio
async def test_async_stream(make_async_client: AsyncClient, gw: ServedGateway) -> None:
    stream = await make_async_client(gw).chat.completions.create(
        model=MODEL, messages=ASK, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "You said: hello there"


def test_stream_error_event_raises_api_error(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL, messages=_user("stream-error please"), stream=True)
    seen: list[str] = []
    with pytest.raises(openai.APIError) as info:
        for chunk in stream:
            seen.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
    assert "Overloaded" in info.value.message
    assert "".join(seen) == "You "  # what arrived before the error was relayed


def test_stream_cut_raises_api_error(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIError) as info:
        list(client.chat.completions.create(
            model=MODEL, messages=_user("stream-cut please"),
            stream=True))
    assert "message_stop" in info.value.message


# ---- tools --------------------------------------------------------------------------------


def test_tool_call(client: openai.OpenAI, fake: FakeAnthropic) -> None:
    r = client.chat.completions.create(
        model=MODEL, messages=_user("Weather in Paris?"),
        tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "weather"}})
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me check."
    (call,) = choice.message.tool_calls or []
    assert call.id == "toolu_fake01" and call.type == "function"
    assert call.function.name == "weather"
    assert orjson.loads(call.function.arguments) == TOOL_INPUT
    body = fake.last()["body"]
    assert body["tool_choice"] == {"type": "tool", "name": "weather"}
    assert body["tools"][0]["input_schema"] == WEATHER["function"]["parameters"]

    # the app answers the tool call the OpenAI way; Claude gets tool_use / tool_result
    history: Any = [
        {"role": "user", "content": "Weather in Paris?"},
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21C"},
    ]
    follow = client.chat.completions.create(model=MODEL, tools=[WEATHER], messages=history)
    assert follow.choices[0].message.content == "You said: tool said sunny, 21C"
    sent = fake.last()["body"]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"][1] == {"type": "tool_use", "id": "toolu_fake01",
                                     "name": "weather", "input": TOOL_INPUT}
    assert sent[2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_fake01",
                                   "content": "sunny, 21C"}]


def test_streamed_tool_call(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=_user("use-tool now"), tools=[WEATHER],
        stream=True))
    args = "".join(tc.function.arguments or "" for c in chunks if c.choices
                   for tc in c.choices[0].delta.tool_calls or () if tc.function)
    starts = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or ()
              if tc.id]
    assert [(t.index, t.id, t.function.name if t.function else None) for t in starts] == [
        (0, "toolu_fake01", "weather")]
    assert orjson.loads(args) == TOOL_INPUT
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"


@pytest.mark.anyio
async def test_async_streamed_tool_call_with_stream_helper(make_async_client: AsyncClient,
                                                           gw: ServedGateway) -> None:
    async with make_async_client(gw).chat.completions.stream(
            model=MODEL, messages=_user("use-tool"),
            tools=[WEATHER]) as stream:
        done = await stream.get_final_completion()
    (call,) = done.choices[0].message.tool_calls or []
    assert orjson.loads(call.function.arguments) == TOOL_INPUT
    assert done.choices[0].finish_reason == "tool_calls"


# ---- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("code, exc, status", [
    (400, openai.BadRequestError, 400),
    (429, openai.RateLimitError, 429),
    (529, openai.InternalServerError, 503),
    (500, openai.InternalServerError, 500),
])
def test_upstream_errors(client: openai.OpenAI, code: int, exc: type[openai.APIStatusError],
                         status: int, stream: bool) -> None:
    with pytest.raises(exc) as info:
        client.chat.completions.create(
            model=MODEL, messages=_user(f"status:{code}"),
            stream=stream)
    err = info.value
    assert err.status_code == status
    body = err.response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"].startswith("fake ")
    if code == 429:
        assert err.response.headers["retry-after"] == "7"
        assert body["error"]["type"] == "rate_limit_error"
    if code == 529:
        assert body["error"]["code"] == "overloaded"
    assert err.response.headers["x-request-id"] == "req_fake0001"


def test_upstream_401_forward_mode(make_gateway: GatewayFactory, make_client: Client,
                                   fake: FakeAnthropic) -> None:
    """No gateway keys: the client's bearer token is the Anthropic key."""
    fwd = make_gateway(upstreams=_upstreams(fake))
    r = make_client(fwd, api_key=UPSTREAM_KEY).chat.completions.create(model=MODEL,
                                                                      messages=ASK)
    assert r.choices[0].message.content == "You said: hello there"
    assert fake.last()["headers"]["x-api-key"] == UPSTREAM_KEY
    with pytest.raises(openai.AuthenticationError) as info:
        make_client(fwd, api_key="sk-wrong").chat.completions.create(model=MODEL, messages=ASK)
    assert info.value.status_code == 401
    assert info.value.response.json()["error"]["code"] == "invalid_api_key"
    assert fake.last()["headers"]["x-api-key"] == "sk-wrong"


def test_gateway_key_is_checked_before_upstream(make_client: Client, gw: ServedGateway,
                                                fake: FakeAnthropic) -> None:
    with pytest.raises(openai.AuthenticationError):
        make_client(gw, api_key="sk-not-a-gateway-key").chat.completions.create(
            model=MODEL, messages=ASK)
    assert fake.requests == []


def test_untranslatable_request_is_400_and_not_sent(client: openai.OpenAI,
                                                    fake: FakeAnthropic) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=ASK, n=2)
    assert info.value.param == "n"
    assert "anthropic" in info.value.message
    assert fake.requests == []


def test_upstream_key_never_reaches_the_client(gw: ServedGateway) -> None:
    auth = {"authorization": f"Bearer {CLIENT_KEY}"}
    with httpx.Client(base_url=gw.base_url, headers=auth) as http:
        responses = [
            http.post("/chat/completions", json={"model": MODEL, "messages": ASK}),
            http.post("/chat/completions", json={"model": MODEL, "messages": ASK,
                                                 "stream": True}),
            http.post("/chat/completions", json={"model": MODEL, "messages": [
                {"role": "user", "content": "status:401"}]}),
            http.post("/chat/completions", json={"model": MODEL, "messages": [
                {"role": "user", "content": "stream-error"}], "stream": True}),
            http.get("/models"),
            http.post("/embeddings", json={"model": MODEL, "input": "x"}),
        ]
    for r in responses:
        dump = r.content + b"".join(k + b": " + v for k, v in r.headers.raw)
        assert UPSTREAM_KEY.encode() not in dump


# ---- models and other endpoints -----------------------------------------------------------


def test_models(client: openai.OpenAI, fake: FakeAnthropic) -> None:
    models = client.models.list()
    assert [m.id for m in models] == ["claude-sonnet-4-5", "claude-haiku-4-5"]
    assert models.data[0].owned_by == "anthropic" and models.data[0].created == 1759104000
    req = fake.last()
    assert (req["path"], req["query"]) == ("/v1/models", "limit=1000")
    assert req["headers"]["x-api-key"] == UPSTREAM_KEY


def test_other_endpoints_are_404(client: openai.OpenAI, fake: FakeAnthropic) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.embeddings.create(model=MODEL, input="hello")
    assert "not supported by an anthropic upstream" in info.value.message
    assert fake.requests == []


# ---- verification over an anthropic upstream ----------------------------------------------

POLICY = """
name: no-secrets
mode: inline
default: true
layers:
  - name: keyword
    config: {block: [password]}
actions:
  fail: {type: block, message: "blocked by policy"}
"""


@pytest.fixture(scope="module")
def verified(make_gateway: GatewayFactory, fake: FakeAnthropic, upstream_key: None,
             tmp_path_factory: pytest.TempPathFactory) -> ServedGateway:
    policies: Path = tmp_path_factory.mktemp("anthropic-policies")
    (policies / "no-secrets.yaml").write_text(POLICY)
    return make_gateway(upstreams=_upstreams(fake, api_key_env=KEY_ENV),
                        auth={"keys": [{"name": "app", "tenant": "acme", "key": CLIENT_KEY}]},
                        policies_dir=str(policies), reload_policies=False)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("text, verdict", [("hello there", "pass"),
                                           ("my password is hunter2", "fail")])
def test_policy_verified_request(make_client: Client, verified: ServedGateway,
                                 stream: bool, text: str, verdict: str) -> None:
    raw = make_client(verified).chat.completions.with_raw_response.create(
        model=MODEL, messages=_user(text), stream=stream)
    headers = raw.headers
    assert headers["x-verity-policy"] == "no-secrets"
    assert headers["x-verity-verdict"] == verdict
    parsed: Any = raw.parse()
    if stream:
        content = "".join(c.choices[0].delta.content or "" for c in parsed if c.choices)
    else:
        content = parsed.choices[0].message.content or ""
    if verdict == "pass":
        assert headers["x-verity-action"] == "pass"
        assert content == f"You said: {text}"
    else:
        assert headers["x-verity-action"] == "block"
        assert content == "blocked by policy"

