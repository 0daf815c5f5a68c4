"""An inline policy never lets an upstream success it cannot verify through as if it
were verified: a body that is not a chat completion (invalid UTF-8, trailing bytes,
no ``choices``, plain text, SSE answering ``stream: false``), a stream with an
unreadable event or without chunks. ``on_error: fail_closed`` answers 502
``upstream_error`` (passthrough, once the body started: an error event), ``fail_open``
relays the bytes with ``x-verity-verdict: n/a``; both write an audit record and log.
A JSON chat completion answering ``stream: true`` is verified and re-sent as SSE.

A real gateway (uvicorn), a custom upstream (below) and the official SDK (httpx
where the SDK cannot read what the gateway relays)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx
import openai
import orjson
import pytest

from modes.conftest import PolicyGateway, StartGateway
from modes.support import verity_headers
from gateway.testing.scripted import read_all, serve_lifespan
from gateway.testing.servers import ServerThread

ASK: Any = [{"role": "user", "content": "hello"}]


def _completion(content: str) -> bytes:
    return orjson.dumps({
        "id": "chatcmpl-up", "object": "chat.completion", "created": 1700000000,
        "model": "m", "choices": [{"index": 0, "message": {"role": "assistant",
                                                            "content": content},
                                   "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}})


def _chunk(delta: Mapping[str, Any], finish: str | None = None) -> bytes:
    return orjson.dumps({"id": "chatcmpl-up", "object": "chat.completion.chunk",
                         "created": 1700000000, "model": "m",
                         "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}]})


def _sse(*datas: bytes) -> bytes:
    return b"".join(b"data: " + d + b"\n\n" for d in datas)


JSON = b"application/json"
SSE = b"text/event-stream"
TEXT = b"text/plain; charset=utf-8"

# name -> (content type, body)
BODIES: dict[str, tuple[bytes, bytes]] = {
    "bad-utf8": (JSON, _completion("answer is BAD").replace(b"BAD", b"BAD \xff")),
    "trailing": (JSON, _completion("answer is BAD") + b" trailing garbage"),
    "no-choices": (JSON, b'{"id":"chatcmpl-up","object":"chat.completion","model":"m",'
                         b'"answer":"answer is BAD"}'),
    "plain": (TEXT, b"answer is BAD"),
    "sse": (SSE, _sse(_chunk({"role": "assistant", "content": ""}),
                      _chunk({"content": "answer is BAD"}), _chunk({}, "stop"), b"[DONE]")),
    "json-bad": (JSON, _completion("answer is BAD")),
    "json-ok": (JSON, _completion("answer is fine")),
    "sse-bad-utf8": (SSE, _sse(_chunk({"role": "assistant", "content": ""}),
                               _chunk({"content": "first part. "}),
                               _chunk({"content": "answer is BAD"}).replace(b"BAD", b"BAD \xff"),
                               _chunk({}, "stop"), b"[DONE]")),
    "sse-no-chunks": (SSE, _sse(b'{"answer":"answer is BAD"}', b"[DONE]")),
}


def _shaped(choice: Any) -> bytes:
    return orjson.dumps({"id": "chatcmpl-up", "object": "chat.completion", "model": "m",
                         "choices": [choice]})


def _shaped_chunk(choices: Any) -> bytes:
    return orjson.dumps({"id": "chatcmpl-up", "object": "chat.completion.chunk",
                         "model": "m", "choices": choices})


PARTS = [{"type": "text", "text": "answer is BAD"}]
# JSON of another shape than a chat completion's: never verified as empty text
SHAPED: dict[str, bytes] = {
    "choice-int": orjson.dumps({"id": "chatcmpl-up", "model": "m", "choices": [1]}),
    "message-str": _shaped({"index": 0, "message": "answer is BAD", "finish_reason": "stop"}),
    "content-obj": _shaped({"index": 0, "message": {"role": "assistant",
                                                     "content": {"text": "answer is BAD"}}}),
    "content-image": _shaped({"index": 0, "message": {"role": "assistant", "content": [
        *PARTS, {"type": "image_url", "image_url": {"url": "https://x/BAD.png"}}]}}),
}
BODIES.update({name: (JSON, body) for name, body in SHAPED.items()})
BODIES["json-parts-bad"] = (JSON, _shaped({"index": 0, "finish_reason": "stop", "message": {
    "role": "assistant", "content": PARTS}}))
BODIES["json-parts-ok"] = (JSON, _shaped({"index": 0, "finish_reason": "stop", "message": {
    "role": "assistant", "content": [{"type": "text", "text": "answer is fine"}]}}))
# Streams with an event of another shape after "first part. " (the passthrough client
# gets that part before the bad event arrives, and nothing from the bad event on).
_FIRST = (_chunk({"role": "assistant", "content": ""}), _chunk({"content": "first part. "}))
_LAST = (_chunk({"content": "answer is fine"}), _chunk({}, "stop"), b"[DONE]")
SHAPED_SSE: dict[str, bytes] = {
    "sse-choice-int": _shaped_chunk([1, {"index": 0, "delta": {"content": "answer is BAD"}}]),
    "sse-delta-str": _shaped_chunk([{"index": 0, "delta": "answer is BAD"}]),
    "sse-content-list": _shaped_chunk([{"index": 0, "delta": {"content": PARTS}}]),
    "sse-tool-call-str": _shaped_chunk([{"index": 0, "delta": {"tool_calls": [
        "answer is BAD"]}}]),
    "sse-choices-str": orjson.dumps({"id": "chatcmpl-up", "choices": "answer is BAD"}),
    # readable JSON, not a chunk: relayed by the old passthrough before any verdict
    "sse-other-json": b'{"answer":"answer is BAD"}',
}
BODIES.update({name: (SSE, _sse(*_FIRST, bad, *_LAST)) for name, bad in SHAPED_SSE.items()})


class BadUpstream:
    """Answers 200 with ``BODIES[x-bad]`` whatever the request asks (stream or not)."""

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await serve_lifespan(receive, send)
        await read_all(receive)
        name = dict(scope["headers"]).get(b"x-bad", b"").decode()
        ctype, body = BODIES[name]
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", ctype), (b"x-upstream", b"bad")]})
        if ctype == SSE:  # event by event, as a server streams
            for part in body.split(b"\n\n")[:-1]:
                await send({"type": "http.response.body", "body": part + b"\n\n",
                            "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            await send({"type": "http.response.body", "body": body, "more_body": False})


@pytest.fixture(scope="module")
def bad_upstream() -> Iterator[ServerThread]:
    with ServerThread(BadUpstream()) as server:
        yield server


def _policy(on_error: str, streaming: str = "buffer") -> str:
    return f"""
mode: inline
default: true
on_error: {on_error}
streaming: {streaming}
layers: [{{name: keyword, config: {{block: [BAD]}}}}]
actions: {{fail: {{type: block, message: "blocked"}}}}
"""


@pytest.fixture
def start(start_gateway: StartGateway, bad_upstream: ServerThread
          ) -> Callable[..., PolicyGateway]:
    def go(on_error: str, streaming: str = "buffer") -> PolicyGateway:
        return start_gateway({"p": _policy(on_error, streaming)},
                             upstreams=[{"name": "bad", "base_url": bad_upstream.url + "/v1"}])
    return go


def _post(gw: PolicyGateway, case: str, stream: bool) -> httpx.Response:
    body: dict[str, Any] = {"model": "m", "messages": ASK}
    if stream:
        body["stream"] = True
    with httpx.Client(timeout=10) as http:
        return http.post(gw.url + "/v1/chat/completions", json=body,
                         headers={"x-bad": case, "authorization": "Bearer sk-test"})


def _record(gw: PolicyGateway, audit_id: str) -> dict[str, Any]:
    (rec,) = gw.audit(expect=1)
    assert rec["audit_id"] == audit_id
    return rec


def _assert_refused(gw: PolicyGateway, err: openai.APIStatusError, *, stream: bool,
                    what: str) -> None:
    assert (err.status_code, err.code, err.type) == (502, "upstream_error", "upstream_error")
    assert what in err.message and "fails closed" in err.message
    h = verity_headers(err.response.headers)
    assert set(h) == {"x-verity-policy", "x-verity-mode", "x-verity-audit-id"}
    assert (h["x-verity-policy"], h["x-verity-mode"]) == ("p", "inline")
    rec = _record(gw, h["x-verity-audit-id"])
    assert (rec["mode"], rec["stream"], rec["upstream_status"]) == ("inline", stream, 200)
    assert (rec["verdict"], rec["score"], rec["action"], rec["layers"]) == (None, None, None, [])
    assert rec["note"].startswith(f"not verified: {what} (")
    assert rec["note"].endswith("; fail_closed: answered 502 upstream_error")


def _assert_flagged(gw: PolicyGateway, resp: httpx.Response, *, case: str, stream: bool,
                    what: str) -> None:
    assert resp.status_code == 200
    assert resp.content == BODIES[case][1]  # as the upstream sent it, byte for byte
    assert resp.headers["x-upstream"] == "bad"
    h = verity_headers(resp.headers)
    assert (h["x-verity-policy"], h["x-verity-mode"]) == ("p", "inline")
    assert (h["x-verity-verdict"], h["x-verity-score"], h["x-verity-action"],
            h["x-verity-layers"]) == ("n/a", "n/a", "pass", "n/a")
    rec = _record(gw, h["x-verity-audit-id"])
    assert (rec["stream"], rec["upstream_status"]) == (stream, 200)
    assert (rec["verdict"], rec["score"], rec["action"], rec["applied"]) == \
        (None, None, "pass", True)
    assert rec["note"].startswith(f"not verified: {what} (")
    assert rec["note"].endswith("; fail_open: delivered unverified")


NOT_JSON_CASES = ["bad-utf8", "trailing", "no-choices", "plain", "sse", *SHAPED]
NOT_COMPLETION = "the upstream body is not a chat completion"


# ---- stream: false -----------------------------------------------------------------------

@pytest.mark.parametrize("case", NOT_JSON_CASES)
def test_fail_closed_refuses_a_body_that_is_not_a_completion(
        start: Callable[..., PolicyGateway], make_client: Callable[..., openai.OpenAI],
        case: str, caplog: pytest.LogCaptureFixture) -> None:
    gw = start("fail_closed")
    with caplog.at_level(logging.WARNING, "gateway.engine"), \
            pytest.raises(openai.APIStatusError) as info:
        make_client(gw.base_url).chat.completions.create(
            model="m", messages=ASK, extra_headers={"x-bad": case})
    _assert_refused(gw, info.value, stream=False, what=NOT_COMPLETION)
    assert b"BAD" not in info.value.response.content
    assert any(NOT_COMPLETION in r.getMessage() and "fail_closed" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize("case", NOT_JSON_CASES)
def test_fail_open_relays_it_marked_not_verified(start: Callable[..., PolicyGateway],
                                                 case: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    gw = start("fail_open")
    with caplog.at_level(logging.WARNING, "gateway.engine"):
        resp = _post(gw, case, stream=False)
    _assert_flagged(gw, resp, case=case, stream=False, what=NOT_COMPLETION)
    assert any("delivered unverified" in r.getMessage() for r in caplog.records)


def test_the_reason_is_named(start: Callable[..., PolicyGateway],
                            make_client: Callable[..., openai.OpenAI]) -> None:
    gw = start("fail_closed")
    client = make_client(gw.base_url)
    reasons = {}
    for case in NOT_JSON_CASES:
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model="m", messages=ASK,
                                           extra_headers={"x-bad": case})
        reasons[case] = info.value.message.split("(")[1].split(")")[0]
    assert reasons == {"bad-utf8": "not valid UTF-8", "trailing": "not valid JSON",
                       "no-choices": "JSON without a non-empty 'choices' list",
                       "plain": "not valid JSON",
                       "sse": "a server-sent event stream, not JSON",
                       **dict.fromkeys(SHAPED, "a choice that is not an object with a "
                                       "message object whose content is a string, null "
                                       "or a list of text parts")}


# ---- stream: true answered without SSE ---------------------------------------------------

STREAMINGS = ["buffer", "passthrough"]


@pytest.mark.parametrize("on_error", ["fail_open", "fail_closed"])
def test_text_parts_content_is_verified(start: Callable[..., PolicyGateway],
                                        make_client: Callable[..., openai.OpenAI],
                                        on_error: str) -> None:
    """``content`` as a list of text parts (some servers answer so) is the answer's text."""
    gw = start(on_error)
    client = make_client(gw.base_url)
    raw = client.chat.completions.with_raw_response.create(
        model="m", messages=ASK, extra_headers={"x-bad": "json-parts-bad"})
    assert b"BAD" not in raw.http_response.content
    assert raw.parse().choices[0].message.content == "blocked"
    h = verity_headers(raw.headers)
    assert (h["x-verity-verdict"], h["x-verity-action"]) == ("fail", "block")
    rec = _record(gw, h["x-verity-audit-id"])
    assert (rec["verdict"], rec["action"], rec["note"]) == ("fail", "block", None)

    resp = _post(gw, "json-parts-ok", stream=False)
    assert resp.status_code == 200 and resp.content == BODIES["json-parts-ok"][1]
    h = verity_headers(resp.headers)
    assert (h["x-verity-verdict"], h["x-verity-action"]) == ("pass", "pass")
    assert h["x-verity-layers"] != "n/a"


@pytest.mark.parametrize("streaming", STREAMINGS)
@pytest.mark.parametrize("case", ["bad-utf8", "trailing", "no-choices", "plain", *SHAPED])
def test_a_stream_request_answered_with_a_bad_body_fails_closed(
        start: Callable[..., PolicyGateway], make_client: Callable[..., openai.OpenAI],
        case: str, streaming: str) -> None:
    gw = start("fail_closed", streaming)
    with pytest.raises(openai.APIStatusError) as info:
        make_client(gw.base_url).chat.completions.create(
            model="m", messages=ASK, stream=True, extra_headers={"x-bad": case})
    _assert_refused(gw, info.value, stream=True, what=NOT_COMPLETION)


@pytest.mark.parametrize("streaming", STREAMINGS)
@pytest.mark.parametrize("case", ["bad-utf8", "trailing", "no-choices", "plain", *SHAPED])
def test_a_stream_request_answered_with_a_bad_body_fails_open_marked(
        start: Callable[..., PolicyGateway], case: str, streaming: str) -> None:
    gw = start("fail_open", streaming)
    _assert_flagged(gw, _post(gw, case, stream=True), case=case, stream=True,
                    what=NOT_COMPLETION)


@pytest.mark.parametrize("on_error", ["fail_open", "fail_closed"])
@pytest.mark.parametrize("streaming", STREAMINGS)
def test_a_json_completion_answering_a_stream_is_verified_and_sent_as_sse(
        start: Callable[..., PolicyGateway], make_client: Callable[..., openai.OpenAI],
        streaming: str, on_error: str) -> None:
    gw = start(on_error, streaming)
    client = make_client(gw.base_url)
    raw = client.chat.completions.with_raw_response.create(
        model="m", messages=ASK, stream=True, extra_headers={"x-bad": "json-bad"})
    assert raw.headers["content-type"].startswith("text/event-stream")
    chunks = list(raw.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "BAD" not in text and "blocked" in text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "content_filter"
    h = verity_headers(raw.headers)
    assert (h["x-verity-verdict"], h["x-verity-action"]) == ("fail", "block")
    rec = _record(gw, h["x-verity-audit-id"])
    assert (rec["verdict"], rec["action"], rec["stream"]) == ("fail", "block", True)
    assert "re-sent as SSE" in rec["note"]

    # a clean answer goes through, as a stream the SDK reads, usage included when asked
    raw = client.chat.completions.with_raw_response.create(
        model="m", messages=ASK, stream=True, stream_options={"include_usage": True},
        extra_headers={"x-bad": "json-ok"})
    chunks = list(raw.parse())
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == \
        "answer is fine"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 4
    assert verity_headers(raw.headers)["x-verity-verdict"] == "pass"


# ---- SSE that cannot be verified -----------------------------------------------------------

SSE_CASES = ["sse-bad-utf8", "sse-no-chunks", *SHAPED_SSE]
UNREADABLE = "1 event(s) not valid JSON or UTF-8, or not chat completion chunks"
NOT_CHUNKS = "the upstream stream is not a chat completion stream"


@pytest.mark.parametrize("case", SSE_CASES)
def test_buffer_fails_closed_on_an_unverifiable_stream(
        start: Callable[..., PolicyGateway], make_client: Callable[..., openai.OpenAI],
        case: str) -> None:
    gw = start("fail_closed", "buffer")
    with pytest.raises(openai.APIStatusError) as info:
        make_client(gw.base_url).chat.completions.create(
            model="m", messages=ASK, stream=True, extra_headers={"x-bad": case})
    _assert_refused(gw, info.value, stream=True, what=NOT_CHUNKS)


@pytest.mark.parametrize("streaming", STREAMINGS)
@pytest.mark.parametrize("case", SSE_CASES)
def test_an_unverifiable_stream_fails_open_marked_never_pass(
        start: Callable[..., PolicyGateway], case: str, streaming: str) -> None:
    gw = start("fail_open", streaming)
    resp = _post(gw, case, stream=True)
    assert resp.status_code == 200
    assert resp.content == BODIES[case][1]
    h = verity_headers(resp.headers)
    if streaming == "buffer":
        assert (h["x-verity-verdict"], h["x-verity-score"]) == ("n/a", "n/a")
    else:  # the body started before any verdict: policy, mode and audit id only
        assert set(h) == {"x-verity-policy", "x-verity-mode", "x-verity-audit-id"}
    rec = _record(gw, h["x-verity-audit-id"])
    assert (rec["verdict"], rec["action"], rec["upstream_status"]) == (None, "pass", 200)
    assert rec["note"].startswith(f"not verified: {NOT_CHUNKS} (")
    assert rec["note"].endswith("; fail_open: delivered unverified")
    if case != "sse-no-chunks":
        assert UNREADABLE in rec["note"]


@pytest.mark.parametrize("case", SSE_CASES)
def test_passthrough_fails_closed_in_band_and_never_sends_the_bad_event(
        start: Callable[..., PolicyGateway], make_client: Callable[..., openai.OpenAI],
        case: str) -> None:
    gw = start("fail_closed", "passthrough")
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="m", messages=ASK, stream=True, extra_headers={"x-bad": case})
    got: list[str] = []
    with pytest.raises(openai.APIError) as info:
        for chunk in raw.parse():
            got.extend(c.delta.content or "" for c in chunk.choices or ())
    assert isinstance(info.value.body, dict)
    assert info.value.body["code"] == "upstream_error"
    assert "BAD" not in "".join(got)
    h = verity_headers(raw.headers)
    rec = _record(gw, h["x-verity-audit-id"])
    assert (rec["verdict"], rec["action"], rec["upstream_status"]) == (None, None, 200)
    assert rec["note"].endswith("; fail_closed: the stream ended with an upstream_error event")

    resp = _post(gw, case, stream=True)
    assert resp.status_code == 200
    assert b"[DONE]" not in resp.content
    # no trace of the unreadable event, nor of what followed it
    assert b"BAD" not in resp.content and b"\xff" not in resp.content
    assert b"answer is fine" not in resp.content
    if case != "sse-no-chunks":
        assert b"first part." in resp.content  # relayed before the bad event arrived
    last = resp.content.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
    assert orjson.loads(last.removeprefix(b"data: "))["error"]["code"] == "upstream_error"


@pytest.mark.parametrize("case", SSE_CASES)
def test_buffer_never_sends_an_event_of_another_shape(
        start: Callable[..., PolicyGateway], case: str) -> None:
    gw = start("fail_closed", "buffer")
    resp = _post(gw, case, stream=True)
    assert resp.status_code == 502 and b"BAD" not in resp.content
    rec = _record(gw, verity_headers(resp.headers)["x-verity-audit-id"])
    assert rec["note"].startswith(f"not verified: {NOT_CHUNKS} (")


# ---- shadow: the client gets the upstream's bytes, the request is accounted for ----------

@pytest.fixture
def start_shadow(start_gateway: StartGateway, bad_upstream: ServerThread
                 ) -> Callable[[], PolicyGateway]:
    def go() -> PolicyGateway:
        policy = _policy("fail_closed").replace("mode: inline", "mode: shadow")
        return start_gateway({"p": policy},
                             upstreams=[{"name": "bad", "base_url": bad_upstream.url + "/v1"}])
    return go


@pytest.mark.parametrize("case", SSE_CASES)
def test_shadow_relays_a_stream_of_another_shape_whole(
        start_shadow: Callable[[], PolicyGateway], case: str) -> None:
    gw = start_shadow()
    resp = _post(gw, case, stream=True)
    assert resp.status_code == 200
    assert resp.content == BODIES[case][1]  # not cut: every event, [DONE] included
    h = verity_headers(resp.headers)
    assert set(h) == {"x-verity-policy", "x-verity-mode", "x-verity-audit-id"}
    assert h["x-verity-mode"] == "shadow"
    rec = _record(gw, h["x-verity-audit-id"])
    assert (rec["mode"], rec["stream"], rec["upstream_status"]) == ("shadow", True, 200)
    # Verifying the readable part alone would audit an answer the client did not get.
    assert (rec["verdict"], rec["action"]) == (None, None)
    assert rec["note"].startswith("not verified: the upstream stream is not a chat "
                                  "completion stream"), rec["note"]


@pytest.mark.parametrize("case", list(SHAPED))
def test_shadow_does_not_verify_a_body_of_another_shape(
        start_shadow: Callable[[], PolicyGateway], case: str) -> None:
    gw = start_shadow()
    resp = _post(gw, case, stream=False)
    assert resp.status_code == 200 and resp.content == BODIES[case][1]
    rec = _record(gw, verity_headers(resp.headers)["x-verity-audit-id"])
    assert (rec["mode"], rec["verdict"], rec["action"]) == ("shadow", None, None)
    assert rec["note"] == f"not verified: {NOT_COMPLETION}"


def test_shadow_verifies_text_parts(start_shadow: Callable[[], PolicyGateway]) -> None:
    gw = start_shadow()
    resp = _post(gw, "json-parts-bad", stream=False)
    assert resp.status_code == 200 and resp.content == BODIES["json-parts-bad"][1]
    rec = _record(gw, verity_headers(resp.headers)["x-verity-audit-id"])
    assert (rec["mode"], rec["verdict"], rec["action"]) == ("shadow", "fail", "block")
