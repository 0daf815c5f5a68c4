"""Fault suite, hostile or broken upstream: resets, garbage, HTML, silence, and an upstream
that echoes the credential it was sent — against a real ``gateway serve`` process in
gateway-keys mode, logging at ``debug``.

Every fault the client sees is an OpenAI-shaped error with the right status (before a
stream starts) or one OpenAI error event ending the stream (after), never a clean end;
neither the upstream key nor the gateway key appears in anything the client gets, the
log or the audit file. Each behaviour is reached as a model of its name
(``security.hostile``); ``<behaviour>.guarded`` is the same upstream under an inline
policy, so failures on a policy's path are audited too.

Covered elsewhere, not repeated: connection refused and upstream timeouts
(``tests/core/test_errors.py``; on every policy path ``tests/engine/test_upstream_failures.py``),
streams cut or stalled (``tests/core/test_streaming.py``), forwarded bodies cut
(``tests/core/test_forward.py``), bodies a policy cannot verify
(``tests/engine/test_unverifiable_bodies.py``), oversized and truncated bodies
(``test_response_limits.py``, ``test_truncated_streams.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from security.hostile import ANSWER, HostileUpstream
from security.process import GatewayProcess, openai_error, serve_gateway
from serving import GatewayFactory

KEY = "gw-initech-fault-key-0007"
UPSTREAM_KEY = "sk-upstream-fault-secret-9931"
ENV = {"FAULT_GATEWAY_KEY": KEY, "FAULT_UPSTREAM_KEY": UPSTREAM_KEY}
USER: Any = [{"role": "user", "content": "What is the capital of France?"}]
BEHAVIOURS = ("ok", "reset-before-headers", "reset-mid-body", "reset-mid-stream",
              "garbage-sse", "slow-headers", "html-200", "html-502", "status-500",
              "status-429", "truncated-sse", "echo-auth", "echo-auth-html")
ECHOES = ("echo-auth", "echo-auth-html")

GUARD = """
mode: inline
streaming: passthrough
match: {models: ["*.guarded"]}
on_error: fail_closed
layers: [{name: keyword, config: {block: [zzz]}}]
"""


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileUpstream]:
    with HostileUpstream() as up:
        yield up


@pytest.fixture(scope="module")
def gw(hostile: HostileUpstream, tmp_path_factory: pytest.TempPathFactory
       ) -> Iterator[GatewayProcess]:
    upstreams = [{"name": b, "base_url": hostile.base_url(b), "models": [b, f"{b}.guarded"],
                  "api_key_env": "FAULT_UPSTREAM_KEY",
                  "timeouts": {"read": 0.3 if b == "slow-headers" else 10}}
                 for b in BEHAVIOURS]
    upstreams += [{"name": f"{b}-anthropic", "kind": "anthropic",
                   "base_url": hostile.base_url(b), "models": [f"{b}.anthropic"],
                   "api_key_env": "FAULT_UPSTREAM_KEY"} for b in (*ECHOES, "html-502")]
    # Retries without the backoff between them: every retry path (and what it logs) still
    # runs, without sleeping through it for each failing behaviour in the key sweep.
    config = {"log_level": "debug", "upstreams": upstreams,
              "routing": {"retries": {"base_backoff": 0, "max_backoff": 0}},
              "auth": {"keys": [{"name": "initech-app", "tenant": "initech",
                                 "key_env": "FAULT_GATEWAY_KEY",
                                 "routes": ["POST /v1/chat/completions", "POST /v1/embeddings",
                                            "GET /v1/models"]}]}}
    with serve_gateway(tmp_path_factory.mktemp("fault-upstream"), config,
                       policies={"guard": GUARD}, env=ENV) as served:
        yield served


@pytest.fixture
def client(gw: GatewayProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gw.base_url, api_key=KEY, max_retries=0, timeout=20) as c:
        yield c


def _status_error(call: Any) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as info:
        call()
    openai_error(info.value.response.content)
    return info.value


def _stream_error(client: openai.OpenAI, model: str) -> tuple[str, openai.APIError]:
    text = ""
    with pytest.raises(openai.APIError) as info:
        for chunk in client.chat.completions.create(model=model, messages=USER, stream=True):
            text += (chunk.choices[0].delta.content or "") if chunk.choices else ""
    assert not isinstance(info.value, openai.APIStatusError), "the stream had not started"
    assert isinstance(info.value.body, dict)
    openai_error({"error": info.value.body})
    return text, info.value


# ---- faults before the answer starts: a status and an OpenAI error body --------------------

@pytest.mark.parametrize(("behaviour", "stream", "status", "code"), [
    ("reset-before-headers", False, 502, "upstream_connect_error"),
    ("reset-before-headers", True, 502, "upstream_connect_error"),
    ("reset-mid-body", False, 502, "upstream_stream_error"),
    ("slow-headers", True, 504, "upstream_timeout"),
])
@pytest.mark.parametrize("guarded", [False, True], ids=["pass-through", "inline"])
def test_a_fault_before_the_answer_is_an_openai_error(
        client: openai.OpenAI, gw: GatewayProcess, behaviour: str, stream: bool, status: int,
        code: str, guarded: bool) -> None:
    model = f"{behaviour}.guarded" if guarded else behaviour
    err = _status_error(lambda: client.chat.completions.create(model=model, messages=USER,
                                                               stream=stream))
    assert (err.status_code, err.code) == (status, code), err
    assert err.response.headers["content-type"] == "application/json"
    if guarded:
        rec = gw.record(err.response.headers["x-verity-audit-id"])
        assert rec["verdict"] is None and rec["note"].startswith("not verified"), rec


# ---- faults after a stream started: one error event, never a clean end ---------------------

@pytest.mark.parametrize(("behaviour", "code"), [
    ("reset-mid-stream", "upstream_stream_error"),
    ("truncated-sse", "upstream_stream_truncated"),
])
@pytest.mark.parametrize("guarded", [False, True], ids=["pass-through", "inline"])
def test_a_fault_inside_a_stream_ends_it_with_an_error_event(
        client: openai.OpenAI, behaviour: str, code: str, guarded: bool) -> None:
    text, err = _stream_error(client, f"{behaviour}.guarded" if guarded else behaviour)
    assert text.startswith("word word")  # the stream had started
    assert isinstance(err.body, dict) and err.body["code"] == code, err.body


@pytest.mark.parametrize("guarded", [False, True], ids=["pass-through", "inline"])
def test_a_stream_of_garbage_ends_with_an_error_event(gw: GatewayProcess,
                                                      guarded: bool) -> None:
    # Pass-through relays the upstream's bytes as they come (binary garbage included:
    # the SDK's decoder may choke on it before the end), then the gateway's event.
    with httpx.Client(base_url=gw.base_url, timeout=20) as http:
        r = http.post("/chat/completions", headers={"authorization": f"Bearer {KEY}"}, json={
            "model": "garbage-sse.guarded" if guarded else "garbage-sse", "messages": USER,
            "stream": True})
    assert r.status_code == 200
    last = r.content.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
    assert last.startswith(b"data: "), r.content[-300:]
    err = openai_error(last.removeprefix(b"data: "))
    assert err["code"] == "upstream_stream_truncated"
    if guarded:  # parsed, not relayed: no byte of the garbage reached the client
        assert b"{not json" not in r.content and b"PNG" not in r.content


# ---- what is relayed as the upstream sent it ------------------------------------------------

@pytest.mark.parametrize("stream", [False, True])
def test_a_wrong_content_type_passes_through_unverified_but_fails_closed_under_a_policy(
        gw: GatewayProcess, stream: bool) -> None:
    # No policy: the gateway is a relay and a 2xx is the upstream's answer, whatever its
    # type (docs/security.md, "what is not defended"). Under a fail_closed policy it is
    # not an answer.
    body = {"messages": USER, "stream": stream}
    with httpx.Client(base_url=gw.base_url, timeout=20,
                      headers={"authorization": f"Bearer {KEY}"}) as http:
        relayed = http.post("/chat/completions", json={"model": "html-200", **body})
        guarded = http.post("/chat/completions", json={"model": "html-200.guarded", **body})
    assert (relayed.status_code, relayed.headers["content-type"]) == (200, "text/html")
    assert relayed.content.startswith(b"<html>")
    assert guarded.status_code == 502, guarded.text
    openai_error(guarded.content)


@pytest.mark.parametrize("behaviour", ["status-500", "status-429"])
def test_an_openai_shaped_upstream_error_keeps_its_status(client: openai.OpenAI,
                                                          behaviour: str) -> None:
    err = _status_error(lambda: client.chat.completions.create(model=behaviour, messages=USER))
    assert err.status_code == int(behaviour[-3:])


@pytest.mark.parametrize("route", ["chat", "chat-stream", "chat-guarded", "embeddings",
                                   "chat-anthropic"])
def test_an_html_error_page_reaches_the_client_as_an_openai_error(
        gw: GatewayProcess, route: str) -> None:
    # A load balancer's HTML 502 page, on every path: the status kept, the body the
    # OpenAI error shape, naming what the upstream sent and quoting none of it.
    with httpx.Client(base_url=gw.base_url, timeout=20,
                      headers={"authorization": f"Bearer {KEY}"}) as http:
        if route == "embeddings":
            r = http.post("/embeddings", json={"model": "html-502", "input": "x"})
        else:
            model = {"chat-guarded": "html-502.guarded",
                     "chat-anthropic": "html-502.anthropic"}.get(route, "html-502")
            r = http.post("/chat/completions", json={
                "model": model, "messages": USER, "stream": route == "chat-stream"})
    assert r.status_code == 502, r.text
    assert r.headers["content-type"] == "application/json"
    err = openai_error(r.content)
    assert b"Bad Gateway" not in r.content and b"nginx" not in r.content
    if route != "chat-guarded":  # under fail_closed the policy's own 502 stands
        assert "text/html" in err["message"], err


def test_a_forwarded_html_error_is_replaced_and_head_answers_like_get(
        make_gateway: GatewayFactory) -> None:
    # Forward mode (no keys, every route): GET gets the OpenAI shape; HEAD the same status
    # and content type without a body (the server drops it), the connection still usable.
    # Its own upstream: the module's records only gateway-keys traffic (the key sweep).
    with HostileUpstream() as lb:
        served = make_gateway(upstreams=[{"name": "lb", "base_url": lb.base_url("html-502")}])
        with httpx.Client(base_url=served.base_url, timeout=10) as http:
            got = http.get("/files/file-1")
            head = http.head("/files/file-1")
            again = http.get("/files/file-1")
        served.stop()
    assert got.status_code == 502 and got.headers["content-type"] == "application/json"
    assert "text/html" in openai_error(got.content)["message"]
    assert head.status_code == 502 and head.content == b""
    assert head.headers["content-type"] == "application/json"
    assert again.status_code == 502 and again.content == got.content


# ---- keys ----------------------------------------------------------------------------------

def _leaks(text: str | bytes) -> list[str]:
    data = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return [name for name, key in (("upstream key", UPSTREAM_KEY), ("gateway key", KEY))
            if key in data]


def _fetch(http: httpx.Client, method: str, path: str, key: str, body: Any = None) -> bytes:
    """Status, headers and every body byte that arrived (a cut response included)."""
    got = b""
    with http.stream(method, path, json=body, headers={"authorization": f"Bearer {key}"}) as r:
        got = f"{r.status_code} {r.headers}".encode()
        try:
            for piece in r.iter_raw():
                got += piece
        except httpx.RemoteProtocolError as exc:  # a forwarded body the upstream cut
            got += str(exc).encode()
    return got


def test_keys_never_reach_a_client_the_log_or_the_audit(gw: GatewayProcess,
                                                        hostile: HostileUpstream) -> None:
    seen: list[tuple[str, bytes]] = []
    with httpx.Client(base_url=gw.base_url, timeout=20) as http:
        for behaviour in BEHAVIOURS:
            if behaviour == "slow-headers":
                continue  # a timeout quotes nothing
            for model in (behaviour, f"{behaviour}.guarded"):
                for stream in (False, True):
                    seen.append((f"{model} stream={stream}", _fetch(
                        http, "POST", "/chat/completions", KEY,
                        {"model": model, "messages": USER, "stream": stream})))
            seen.append((f"{behaviour} embeddings", _fetch(
                http, "POST", "/embeddings", KEY, {"model": behaviour, "input": "x"})))
        for wrong in (UPSTREAM_KEY, KEY + "x", KEY[:-1]):  # a client trying keys
            got = _fetch(http, "GET", "/models", wrong)
            assert got.startswith(b"401 ")
            seen.append((f"models with {wrong[:6]}…", got))
    assert [(what, _leaks(data)) for what, data in seen if _leaks(data)] == []
    log = gw.log_text()
    assert "upstream 'truncated-sse'" in log  # the faults were logged, by upstream name
    assert _leaks(log) == []
    assert gw.audit(expect=1) and _leaks(gw.audit_bytes()) == []
    # The upstream got its own key, never the client's (an Anthropic one as x-api-key).
    sent = {(q.headers.get("authorization"), q.headers.get("x-api-key"))
            for q in hostile.requests}
    assert (f"Bearer {UPSTREAM_KEY}", None) in sent
    assert sent <= {(f"Bearer {UPSTREAM_KEY}", None), (None, UPSTREAM_KEY)}


@pytest.mark.parametrize("route", ["chat", "chat-stream", "chat-guarded", "embeddings"])
@pytest.mark.parametrize("behaviour", ECHOES)
def test_an_upstream_echoing_its_credential_does_not_leak_it(
        gw: GatewayProcess, behaviour: str, route: str) -> None:
    with httpx.Client(base_url=gw.base_url, timeout=20,
                      headers={"authorization": f"Bearer {KEY}"}) as http:
        if route == "embeddings":
            r = http.post("/embeddings", json={"model": behaviour, "input": "x"})
        else:
            r = http.post("/chat/completions", json={
                "model": f"{behaviour}.guarded" if route == "chat-guarded" else behaviour,
                "messages": USER, "stream": route == "chat-stream"})
    assert r.status_code >= 400
    assert _leaks(r.content) == [] and _leaks(str(r.headers)) == []


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("behaviour", ECHOES)
def test_an_anthropic_upstream_echoing_its_credential_does_not_leak_it(
        gw: GatewayProcess, hostile: HostileUpstream, behaviour: str, stream: bool) -> None:
    # The key goes out as x-api-key; the error is translated to OpenAI's shape after
    # the secrets are taken out.
    with httpx.Client(base_url=gw.base_url, timeout=20,
                      headers={"authorization": f"Bearer {KEY}"}) as http:
        r = http.post("/chat/completions", json={"model": f"{behaviour}.anthropic",
                                                 "messages": USER, "stream": stream})
    assert r.status_code >= 400
    openai_error(r.content)
    assert _leaks(r.content) == [] and _leaks(str(r.headers)) == []
    assert any(q.headers.get("x-api-key") == UPSTREAM_KEY for q in hostile.requests)


def test_the_upstream_is_really_asked_and_really_answers(client: openai.OpenAI) -> None:
    # The control: the faults above are the upstream's, not the set-up's.
    assert client.chat.completions.create(model="ok", messages=USER).choices[0].message \
        .content == ANSWER
