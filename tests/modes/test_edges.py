"""Edge cases of the inline and shadow runtime, through a real gateway and the openai
SDK: tool-call answers, a finish chunk that carries the last content, ..."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import openai
import orjson
import pytest

from modes import support
from modes.conftest import StartGateway
from modes.support import verity_headers, write_policy
from gateway.testing.scripted import read_all, serve_lifespan
from gateway.testing.servers import ServerThread

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import ServedUpstream

TOOLS = [{"type": "function", "function": {
    "name": "weather", "parameters": {"type": "object",
                                      "properties": {"city": {"type": "string"}}}}}]


def _policy(streaming: str = "buffer", layers: str = "[{name: length, config: {min_chars: 1}}]",
            extra: str = "") -> str:
    return f"""
mode: inline
default: true
streaming: {streaming}
layers: {layers}
actions: {{fail: {{type: block, message: "blocked"}}}}
{extra}
"""


@pytest.mark.parametrize("delivery", ["nonstream", "buffer", "passthrough"])
def test_tool_call_answer_is_delivered_unverified(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI], delivery: str) -> None:
    # `length: {min_chars: 1}` fails any empty text: a tool call has none to check.
    gw = start_gateway({"p": _policy("passthrough" if delivery == "passthrough" else "buffer")})
    kwargs: dict[str, Any] = {"model": "scripted-small", "tools": TOOLS,
                              "messages": [{"role": "user", "content": "weather in Paris?"}],
                              "extra_headers": {"x-mock-tool-call": "1"}}
    client = make_client(gw.base_url)
    if delivery == "nonstream":
        raw = client.chat.completions.with_raw_response.create(**kwargs)
        choice = raw.parse().choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        (call,) = choice.message.tool_calls or []
        assert (call.id, call.function.name, call.function.arguments) == \
            ("call_scripted", "weather", '{"city": "Paris"}')
    else:
        raw = client.chat.completions.with_raw_response.create(stream=True, **kwargs)
        chunks = list(raw.parse())
        deltas = [c.choices[0] for c in chunks if c.choices]
        assert "".join(d.delta.content or "" for d in deltas) == ""
        assert [d.finish_reason for d in deltas if d.finish_reason] == ["tool_calls"]
        args = "".join(t.function.arguments or "" for d in deltas
                       for t in d.delta.tool_calls or () if t.function)
        assert args == '{"city": "Paris"}'
    h = verity_headers(raw.headers)
    if delivery != "passthrough":
        assert (h["x-verity-verdict"], h["x-verity-action"], h["x-verity-score"]) == \
            ("pass", "pass", "n/a")
        # No layer ran: "n/a" like the score, not an empty header value.
        assert h["x-verity-layers"] == "n/a"
    else:
        assert "x-verity-layers" not in h
    (rec,) = gw.audit(expect=1)
    assert rec["verdict"] == "pass" and rec["layers"] == []
    assert rec["note"] == "not verified: the answer is tool calls only"


# ---- a canned upstream: exactly the events / body a test sets ----------------------------


class CannedUpstream:
    """Streams ``events`` (then ``[DONE]``) or answers ``body``, whatever was asked."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.body: dict[str, Any] = {}

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await serve_lifespan(receive, send)
        raw = await read_all(receive)
        if orjson.loads(raw).get("stream") is True:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            for event in self.events:
                await send({"type": "http.response.body", "more_body": True,
                            "body": b"data: " + orjson.dumps(event) + b"\n\n"})
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": orjson.dumps(self.body)})


@pytest.fixture(scope="module")
def canned_server() -> Iterator[tuple[CannedUpstream, ServerThread]]:
    app = CannedUpstream()
    with ServerThread(app) as server:
        yield app, server


@pytest.fixture
def canned(canned_server: tuple[CannedUpstream, ServerThread]
           ) -> tuple[CannedUpstream, list[dict[str, str]]]:
    """The canned upstream (reset) and the ``upstreams`` setting pointing at it."""
    app, server = canned_server
    app.events, app.body = [], {}
    return app, [{"name": "canned", "base_url": server.url + "/v1"}]


def _chunk(delta: dict[str, Any], finish: str | None = None, index: int = 0) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


USAGE = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
         "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 3,
                                  "total_tokens": 4}}
DISCLAIM = """
mode: inline
default: true
streaming: {streaming}
layers: [{{name: keyword, config: {{block: [forbidden]}}}}]
actions: {{fail: {{type: disclaimer, template: " [unverified]"}}}}
"""


@pytest.mark.parametrize("streaming", ["buffer", "passthrough"])
def test_disclaimer_follows_content_sent_with_the_finish_reason(
        start_gateway: StartGateway, canned: tuple[CannedUpstream, list[dict[str, str]]],
        make_client: Callable[..., openai.OpenAI], streaming: str) -> None:
    # Many servers send the last token in the chunk that carries finish_reason
    # (typically "length"): the disclaimer must come after that token.
    app, upstreams = canned
    app.events = [_chunk({"role": "assistant", "content": ""}),
                  _chunk({"content": "the forbidden "}), _chunk({"content": "word"}, "length"),
                  USAGE]
    gw = start_gateway({"p": DISCLAIM.format(streaming=streaming)}, upstreams=upstreams)
    chunks = list(make_client(gw.base_url).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], stream=True,
        stream_options={"include_usage": True}))
    choices = [c.choices[0] for c in chunks if c.choices]
    assert "".join(c.delta.content or "" for c in choices) == "the forbidden word [unverified]"
    assert [c.finish_reason for c in choices if c.finish_reason] == ["length"]
    assert choices[-1].finish_reason == "length"  # the finish is still the last choice event
    assert [c.usage.total_tokens for c in chunks if c.usage] == [4]  # exactly once


@pytest.mark.parametrize("delivery", ["nonstream", "buffer", "passthrough"])
def test_n_choices_only_choice_0_is_verified_and_the_audit_says_so(
        start_gateway: StartGateway, canned: tuple[CannedUpstream, list[dict[str, str]]],
        make_client: Callable[..., openai.OpenAI], delivery: str) -> None:
    app, upstreams = canned
    # choice 1 finishes first; choice 0 sends its last word after that
    app.events = [_chunk({"role": "assistant", "content": ""}, None, 0),
                  _chunk({"role": "assistant", "content": ""}, None, 1),
                  _chunk({"content": "the forbidden "}, None, 0),
                  _chunk({"content": "forbidden too"}, "stop", 1),
                  _chunk({"content": "word"}, None, 0), _chunk({}, "stop", 0)]
    app.body = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "choices": [
        {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        for i, text in enumerate(["the forbidden word", "forbidden too"])]}
    streaming = "passthrough" if delivery == "passthrough" else "buffer"
    gw = start_gateway({"p": DISCLAIM.format(streaming=streaming)}, upstreams=upstreams)
    client = make_client(gw.base_url)
    kwargs: dict[str, Any] = {"model": "m", "n": 2, "messages": [{"role": "user", "content": "x"}]}
    if delivery == "nonstream":
        texts = [c.message.content for c in client.chat.completions.create(**kwargs).choices]
    else:
        parts = ["", ""]
        for chunk in client.chat.completions.create(stream=True, **kwargs):
            for c in chunk.choices:
                parts[c.index] += c.delta.content or ""
        texts = list(parts)
    assert texts == ["the forbidden word [unverified]", "forbidden too"]
    (rec,) = gw.audit(expect=1)
    assert rec["action"] == "disclaimer"
    assert rec["note"] == "only choice 0 verified; choices 1-1 of n=2 were not"


def test_a_layer_id_that_is_not_header_safe_never_breaks_responses(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    # It went into x-verity-layers: with a CR/LF the server dropped every connection.
    gw = start_gateway({
        "bad": 'mode: inline\ndefault: true\nlayers: [{name: length, id: "a\\r\\nx-evil: 1"}]\n'})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=[{"role": "user", "content": "hi"}])
    assert raw.parse().choices[0].message.content == "You said: hi"
    assert "x-evil" not in raw.headers
    assert "layers.0.id" in gw.engine.store.errors[str(gw.policies_dir / "bad.yaml")]


# ---- regenerate: upstream errors and the time budget ------------------------------------


class RetryUpstream:
    """Answers the first call with a failing answer; a retry (more than one message)
    after ``retry_delay`` seconds with ``retry_status`` (a good answer when 200)."""

    def __init__(self) -> None:
        self.retry_status, self.retry_delay, self.calls = 200, 0.0, 0

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await serve_lifespan(receive, send)
        raw = await read_all(receive)
        self.calls += 1
        retry = len(orjson.loads(raw)["messages"]) > 1
        if retry and self.retry_delay:
            await asyncio.sleep(self.retry_delay)
        status = self.retry_status if retry else 200
        body: dict[str, Any] = {"error": {"message": "down", "type": "server_error",
                                          "param": None, "code": None}}
        if status == 200:
            body = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant",
                        "content": "A good answer." if retry else "A forbidden answer."}}]}
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": orjson.dumps(body)})


@pytest.fixture(scope="module")
def retry_server() -> Iterator[tuple[RetryUpstream, ServerThread]]:
    app = RetryUpstream()
    with ServerThread(app) as server:
        yield app, server


@pytest.fixture
def retry(retry_server: tuple[RetryUpstream, ServerThread]
          ) -> tuple[RetryUpstream, list[dict[str, str]]]:
    app, server = retry_server
    app.retry_status, app.retry_delay, app.calls = 200, 0.0, 0
    return app, [{"name": "retry", "base_url": server.url + "/v1"}]


def _regen(layers: str, on_error: str = "fail_open", total_ms: int = 5000) -> str:
    return f"""
mode: inline
default: true
on_error: {on_error}
layers: {layers}
decision: {{marginal_at: 0.9}}
budget: {{total_ms: {total_ms}}}
actions: {{fail: {{type: regenerate, max_attempts: 2,
                   fallback: {{type: block, message: "withheld"}}}}}}
"""


KEYWORD = "{name: keyword, config: {block: [forbidden]}}"


def test_regenerate_attempts_that_error_upstream_end_in_the_fallback(
        start_gateway: StartGateway, retry: tuple[RetryUpstream, list[dict[str, str]]],
        make_client: Callable[..., openai.OpenAI]) -> None:
    app, upstreams = retry
    app.retry_status = 503
    gw = start_gateway({"p": _regen(f"[{KEYWORD}]")}, upstreams=upstreams)
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": "q"}])
    assert raw.parse().choices[0].message.content == "withheld"
    h = verity_headers(raw.headers)
    assert (h["x-verity-action"], h["x-verity-attempts"]) == ("block", "2")
    (rec,) = gw.audit(expect=1)
    assert [a.get("error") for a in rec["attempt_history"]] == \
        [None, "upstream answered 503", "upstream answered 503"]
    assert rec["note"] == "regenerate failed after 2 attempt(s); fallback block"


@pytest.mark.usefixtures("test_layers")
@pytest.mark.parametrize("on_error", ["fail_open", "fail_closed"])
def test_a_slow_regenerate_call_does_not_spend_the_verification_budget(
        start_gateway: StartGateway, retry: tuple[RetryUpstream, list[dict[str, str]]],
        make_client: Callable[..., openai.OpenAI], on_error: str) -> None:
    # The retry takes longer than budget.total_ms; its answer must still be verified
    # (fail_open used to deliver it unverified as "regenerate", fail_closed to block it).
    app, upstreams = retry
    app.retry_delay = 0.5
    gw = start_gateway({"p": _regen(f"[{KEYWORD}]", on_error, total_ms=300)},
                       upstreams=upstreams)
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": "q"}])
    assert raw.parse().choices[0].message.content == "A good answer."
    h = verity_headers(raw.headers)
    assert (h["x-verity-action"], h["x-verity-verdict"], h["x-verity-layers"]) == \
        ("regenerate", "pass", "keyword=1.0000:pass")


@pytest.mark.usefixtures("test_layers")
def test_no_regenerate_attempt_once_the_verification_budget_is_spent(
        start_gateway: StartGateway, retry: tuple[RetryUpstream, list[dict[str, str]]],
        make_client: Callable[..., openai.OpenAI]) -> None:
    # The first verification uses the whole budget (the sleep layer times out at it):
    # an attempt could not be verified, and fail_open would deliver it unchecked.
    app, upstreams = retry
    layers = f"[{KEYWORD}, {{name: sleep, config: {{ms: 5000}}, timeout_ms: 10000}}]"
    gw = start_gateway({"p": _regen(layers, total_ms=200)}, upstreams=upstreams)
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": "q"}])
    assert raw.parse().choices[0].message.content == "withheld"
    assert verity_headers(raw.headers)["x-verity-action"] == "block"
    assert app.calls == 1  # nothing re-asked
    (rec,) = gw.audit(expect=1)
    assert rec["attempts"] == 0
    assert rec["note"] == ("regenerate stopped after 0 attempt(s): the verification time "
                           "budget is spent; fallback block")


def test_recorded_content_of_list_part_messages_is_their_text(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    gw = start_gateway({"p": """
mode: inline
default: true
layers: [{name: length}]
telemetry: {record_content: true, redact: ['code: \\d+']}
"""})
    image = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="
    make_client(gw.base_url).chat.completions.create(model="scripted-small", messages=[
        {"role": "system", "content": [{"type": "text", "text": "It's 'quoted'."}]},
        {"role": "user", "content": [{"type": "text", "text": "hi\ncode: 1234"},
                                     {"type": "image_url", "image_url": {"url": image}}]}])
    (rec,) = gw.audit(expect=1)
    assert rec["content"]["messages"] == [
        {"role": "system", "content": "It's 'quoted'."},
        {"role": "user", "content": "hi\n[REDACTED]"}]  # not a Python repr of the parts
    assert "base64" not in orjson.dumps(rec["content"]["messages"]).decode()


@pytest.mark.usefixtures("test_layers")
def test_a_request_in_flight_during_a_reload_finishes_with_its_version(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI], wait_until: Callable[..., Any]) -> None:
    v1 = _policy(layers="[{name: gate, timeout_ms: 60000}, {name: keyword, "
                        "config: {block: [alpha]}}]", extra="budget: {total_ms: 60000}")
    gw = start_gateway({"p": v1})
    client = make_client(gw.base_url)
    result: dict[str, Any] = {}

    def first() -> None:
        result["raw"] = client.chat.completions.with_raw_response.create(
            model="scripted-small", messages=[{"role": "user", "content": "alpha beta"}])

    thread = threading.Thread(target=first)
    thread.start()
    wait_until(lambda: support.GATE_ENTERED, message="first request verifying")
    write_policy(gw.policies_dir, "p", _policy(layers="[{name: keyword, config: {block: [beta]}}]"))
    assert gw.engine.store.reload()
    second = client.chat.completions.with_raw_response.create(
        model="scripted-small", messages=[{"role": "user", "content": "alpha"}])
    assert verity_headers(second.headers)["x-verity-layers"] == "keyword=1.0000:pass"  # new
    support.GATE.set()
    thread.join(60)  # a bound for a hang, not a timing: the first request ends once released
    assert not thread.is_alive() and "raw" in result, "the first request did not finish"
    h = verity_headers(result["raw"].headers)
    assert h["x-verity-layers"] == "gate=1.0000:pass,keyword=0.0000:fail"  # still the old version
    assert 'blocked by block[0]' in (result["raw"].parse().choices[0].message.content or "")
    versions = {r["audit_id"]: r["policy_version"] for r in gw.audit(expect=2)}
    assert versions[h["x-verity-audit-id"]] != \
        versions[verity_headers(second.headers)["x-verity-audit-id"]]
