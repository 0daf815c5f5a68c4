"""Health, readiness, startup and graceful shutdown of a real server."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from serving import ServedGateway, ServedUpstream

USER = [{"role": "user", "content": "slow one two three"}]
Client = Callable[..., openai.OpenAI]


def test_healthz_and_readyz(gateway: ServedGateway) -> None:
    with httpx.Client(base_url=gateway.url) as http:
        health = http.get("/healthz")
        ready = http.get("/readyz")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert ready.status_code == 200
    # The status only: the detail (policy files, errors) needs a gateway key, or
    # readyz_detail: public (tests/security/test_readyz.py).
    assert ready.json() == {"status": "ready"}


def test_health_needs_no_key(make_gateway: Callable[..., ServedGateway]) -> None:
    gw = make_gateway(auth={"keys": [{"name": "k", "tenant": "t", "key": "gw-k"}]})
    with httpx.Client(base_url=gw.url) as http:
        assert http.get("/healthz").status_code == 200
        assert http.get("/readyz").status_code == 200
        assert http.get("/v1/models").status_code == 401


def test_the_collector_threshold_is_the_configured_one_while_ready(
        make_gateway: Callable[..., ServedGateway]) -> None:
    before = gc.get_threshold()
    gw = make_gateway(server={"gc_gen0_threshold": 23_456})
    assert gc.get_threshold() == (23_456, *before[1:])
    gw.stop()
    assert gc.get_threshold() == before  # what the process had, once the app is gone


def _in_background(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = fn()
        except BaseException as exc:  # reported by the test
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_graceful_shutdown_finishes_in_flight_request(
        make_gateway: Callable[..., ServedGateway], make_client: Client,
        upstream: ServedUpstream, wait_until: Callable[..., Any]) -> None:
    gw = make_gateway()
    c = make_client(gw, timeout=20)
    thread, out = _in_background(lambda: c.chat.completions.create(
        model="scripted-small", messages=USER, extra_headers={"x-mock-delay-ms": "800"}))
    wait_until(lambda: upstream.requests, message="request reaching upstream")
    gw.stop()  # returns once the server has exited
    thread.join(20)
    assert "error" not in out, out.get("error")
    assert out["result"].choices[0].message.content == "You said: slow one two three"
    assert gw.app.ready is False and gw.app.proxy is None  # lifespan ran its shutdown
    assert upstream.cancelled == 0
    with pytest.raises(openai.APIConnectionError):
        make_client(gw).models.list()


def test_graceful_shutdown_finishes_in_flight_stream(
        make_gateway: Callable[..., ServedGateway], make_client: Client,
        upstream: ServedUpstream, wait_until: Callable[..., Any]) -> None:
    gw = make_gateway()
    c = make_client(gw, timeout=20)
    stream = c.chat.completions.create(model="scripted-small", messages=USER, stream=True,
                                       extra_headers={"x-mock-chunk-delay-ms": "150"})
    chunks = iter(stream)
    first = next(chunks)
    stopper = threading.Thread(target=gw.stop)
    stopper.start()
    rest = list(chunks)
    stopper.join(20)
    text = "".join(ch.choices[0].delta.content or "" for ch in [first, *rest] if ch.choices)
    assert text == "You said: slow one two three"
    assert rest[-1].choices[0].finish_reason == "stop"
    assert upstream.cancelled == 0


def test_not_started_app_is_not_ready(upstream: ServedUpstream, empty_dir: object) -> None:
    from gateway.app import create_app
    from gateway.testing.servers import ServerThread
    from gateway.settings import load_settings

    settings = load_settings(environ={}, overrides={
        "upstreams": [{"name": "u", "base_url": upstream.base_url}],
        "policies_dir": str(empty_dir)})
    with ServerThread(create_app(settings), lifespan="off") as srv, \
            httpx.Client(base_url=srv.url) as http:
        assert http.get("/healthz").status_code == 200
        ready = http.get("/readyz")
        assert (ready.status_code, ready.json()["status"]) == (503, "not ready")
        r = http.post("/v1/chat/completions", json={"model": "m", "messages": []})
        assert r.status_code == 503
        assert r.json()["error"]["type"] == "service_unavailable"
        assert r.json()["error"]["code"] == "not_ready"
    assert upstream.requests == []
