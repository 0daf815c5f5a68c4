"""Responses API answers the gateway cannot verify, from a misbehaving upstream:
``on_error: fail_closed`` refuses them (502 ``upstream_error``; in a passthrough
stream an error event), ``fail_open`` relays them as they came with verdict ``n/a``;
a JSON response answering a stream request is verified and re-sent as events."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx
import openai
import orjson
import pytest

from modes.conftest import PolicyGateway, StartGateway
from modes.support import verity_headers
from gateway.testing import scripted_responses as sr
from gateway.testing.scripted import read_all, serve_lifespan
from gateway.testing.servers import ServerThread

_FINAL = sr.response({"model": "m", "input": "Hi."}, "resp_fixed", 1700000000,
                     "The answer is BAD news.")
_FAILED = {**_FINAL, "status": "failed", "output": [],
           "error": {"code": "server_error", "message": "boom"}}


def _stream(final: Mapping[str, Any], *, lie: bool = False) -> bytes:
    events = sr.events(final)
    if lie:  # the terminal response says other than the deltas did
        last = events[-1]
        item = last["response"]["output"][0]
        part = {**item["content"][0], "text": "Something else entirely."}
        events[-1] = {**last, "response": {**last["response"],
                                           "output": [{**item, "content": [part]}]}}
    return b"".join(sr.sse(e) for e in events)


CASES: dict[str, tuple[str, bytes]] = {
    "failed": ("application/json", orjson.dumps(_FAILED)),
    "not-a-response": ("application/json", b'{"hello": "world"}'),
    "json-for-stream": ("application/json", orjson.dumps(_FINAL)),
    "inconsistent": ("text/event-stream", _stream(_FINAL, lie=True)),
    "json": ("application/json", orjson.dumps(_FINAL, option=orjson.OPT_INDENT_2)),
    "stream": ("text/event-stream", _stream(_FINAL)),
}


class OddUpstream:
    """Answers ``POST /v1/responses`` with the bytes of the case named by ``x-case``."""

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await serve_lifespan(receive, send)
        await read_all(receive)
        case = dict(scope["headers"]).get(b"x-case", b"").decode()
        ctype, body = CASES[case]
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body, "more_body": False})


@pytest.fixture(scope="module")
def odd_upstream() -> Iterator[ServerThread]:
    with ServerThread(OddUpstream()) as server:
        yield server


@pytest.fixture
def start(start_gateway: StartGateway, odd_upstream: ServerThread
          ) -> Callable[..., PolicyGateway]:
    def go(on_error: str, streaming: str = "buffer", mode: str = "inline") -> PolicyGateway:
        policy = f"""
mode: {mode}
default: true
on_error: {on_error}
streaming: {streaming}
layers: [{{name: keyword, config: {{block: [BAD]}}}}]
actions: {{fail: {{type: disclaimer, template: " [unverified]"}}}}
"""
        return start_gateway({"p": policy},
                             upstreams=[{"name": "odd", "base_url": odd_upstream.url + "/v1"}])
    return go


def _client(gw: PolicyGateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key="sk-test", max_retries=0, timeout=10)


@pytest.mark.parametrize("case,what", [("failed", "the response is failed"),
                                       ("not-a-response", "")])
def test_an_unreadable_or_failed_response_fails_closed_or_open(
        case: str, what: str, start: Callable[..., PolicyGateway]) -> None:
    gw = start("fail_closed")
    with _client(gw) as client, pytest.raises(openai.APIStatusError) as err:
        client.responses.create(model="m", input="Hi.", extra_headers={"x-case": case})
    assert (err.value.status_code, err.value.code) == (502, "upstream_error")
    (rec,) = gw.audit(expect=1)
    assert rec["verdict"] is None
    assert rec["note"].startswith("not verified: the upstream body is not a response")
    assert what in rec["note"]

    gw2 = start("fail_open")
    with _client(gw2) as client:
        raw = client.responses.with_raw_response.create(model="m", input="Hi.",
                                                        extra_headers={"x-case": case})
    assert raw.http_response.content == CASES[case][1]  # as it came
    assert verity_headers(raw.headers)["x-verity-verdict"] == "n/a"


def test_a_stream_whose_end_contradicts_its_deltas_is_not_verified(
        start: Callable[..., PolicyGateway]) -> None:
    gw = start("fail_closed")
    with _client(gw) as client, pytest.raises(openai.APIStatusError) as err:
        list(client.responses.create(model="m", input="Hi.", stream=True,
                                     extra_headers={"x-case": "inconsistent"}))
    assert err.value.status_code == 502
    (rec,) = gw.audit(expect=1)
    assert "the terminal response's text is not the text that streamed" in rec["note"]


@pytest.mark.parametrize("streaming", ["buffer", "passthrough"])
def test_a_json_response_to_a_stream_request_is_verified_and_sent_as_events(
        streaming: str, start: Callable[..., PolicyGateway]) -> None:
    gw = start("fail_closed", streaming)
    with _client(gw) as client:
        with client.responses.stream(model="m", input="Hi.",
                                     extra_headers={"x-case": "json-for-stream"}) as s:
            final = s.get_final_response()
    assert final.output_text == "The answer is BAD news. [unverified]"
    (rec,) = gw.audit(expect=1)
    assert (rec["verdict"], rec["action"]) == ("fail", "disclaimer")
    assert "re-sent as SSE" in rec["note"]


@pytest.mark.parametrize("case", ["json", "stream"])
def test_shadow_relays_the_upstream_bytes_exactly(
        case: str, start: Callable[..., PolicyGateway]) -> None:
    gw = start("fail_closed", mode="shadow")
    body: dict[str, Any] = {"model": "m", "input": "Hi.", "stream": case == "stream"}
    with httpx.Client(timeout=10) as http:
        resp = http.post(gw.url + "/v1/responses", json=body,
                         headers={"x-case": case, "authorization": "Bearer sk-test"})
    assert resp.status_code == 200
    assert resp.content == CASES[case][1]
    assert verity_headers(resp.headers)["x-verity-mode"] == "shadow"
    (rec,) = gw.audit(expect=1)
    assert (rec["mode"], rec["verdict"]) == ("shadow", "fail")  # BAD is in the answer
