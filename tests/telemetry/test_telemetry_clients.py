"""HTTP client spans: httpx (judge calls) and the upstream aiohttp session."""

from __future__ import annotations

import asyncio

from types import ModuleType

import aiohttp
import httpx
import httpx2
import pytest
from aiohttp import web
from otlp_receiver import OTLPReceiver

from gateway.telemetry import semconv as sc
from gateway.telemetry import Telemetry, create_telemetry

SECRET = "sk-judge-DO-NOT-LEAK-77aa11"


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_httpx_judge_call_nests_under_layer(lib: ModuleType, otel: Telemetry,
                                            otlp_receiver: OTLPReceiver) -> None:
    """httpx2 is what the openai/anthropic SDKs run on (judge clients built on them)."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return lib.Response(200, json={"ok": True})  # type: ignore[no-any-return]

    async def main() -> None:
        async with lib.AsyncClient(transport=lib.MockTransport(handler)) as client:
            otel.instrument_httpx(client)
            trace = otel.start_request({"method": "POST", "headers": []}, "/v1/chat/completions")
            with trace.layer("nli") as layer:
                await client.post("http://judge.test/v1/chat/completions?api_key=" + SECRET,
                                  headers={"authorization": f"Bearer {SECRET}"}, json={})
                layer.result({"name": "nli", "score": 1.0, "passed": True, "judge_calls": 1})
            trace.end(200)

    asyncio.run(main())
    otel.shutdown()
    layer = otlp_receiver.span("verify nli")
    http = otlp_receiver.span("POST")
    assert http.kind == "CLIENT" and http.parent_span_id == layer.span_id
    assert seen[0].headers["traceparent"].split("-")[2] == http.span_id
    url = http.attributes.get(sc.URL_FULL) or http.attributes["http.url"]  # new/old semconv
    assert url == "http://judge.test/v1/chat/completions"
    assert not [b for b in otlp_receiver.raw_bytes() if SECRET.encode() in b]


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_judge_http_spans_use_the_current_http_conventions(
        lib: ModuleType, otel: Telemetry, otlp_receiver: OTLPReceiver) -> None:
    """The same attributes as the upstream's HTTP spans: ``http.request.method``,
    ``url.full`` (no query, no userinfo), ``server.*``, ``http.response.status_code``;
    an error status is the span's ``error.type``."""

    def handler(request: httpx.Request) -> httpx.Response:
        return lib.Response(503 if request.url.path.endswith("/down") else 200,  # type: ignore[no-any-return]
                            json={"ok": True})

    async def main() -> None:
        async with lib.AsyncClient(transport=lib.MockTransport(handler)) as client:
            otel.instrument_httpx(client)
            await client.post(f"http://user:{SECRET}@judge.test:8443/v1/chat?key={SECRET}",
                              json={})
            await client.get("http://judge.test/v1/down")

    asyncio.run(main())
    otel.shutdown()
    post, get = otlp_receiver.span("POST"), otlp_receiver.span("GET")
    assert post.kind == "CLIENT" and post.attributes[sc.HTTP_REQUEST_METHOD] == "POST"
    assert post.attributes[sc.URL_FULL] == "http://judge.test:8443/v1/chat"
    assert (post.attributes[sc.SERVER_ADDRESS], post.attributes[sc.SERVER_PORT]) == (
        "judge.test", 8443)
    assert post.attributes[sc.HTTP_RESPONSE_STATUS_CODE] == 200
    assert sc.ERROR_TYPE not in post.attributes
    assert get.attributes[sc.HTTP_RESPONSE_STATUS_CODE] == 503
    assert get.attributes[sc.ERROR_TYPE] == "503" and get.attributes[sc.SERVER_PORT] == 80
    assert not {"http.method", "http.url", "http.status_code"} & set(post.attributes)
    assert not [b for b in otlp_receiver.raw_bytes() if SECRET.encode() in b]


def test_no_instrumentation_when_disabled() -> None:
    client = httpx.AsyncClient()
    create_telemetry({}).instrument_httpx(client)  # a no-op, nothing to undo
    assert create_telemetry({}).aiohttp_trace_configs() == []
    asyncio.run(client.aclose())


def test_no_aiohttp_hooks_unless_opted_in(otel: Telemetry) -> None:
    assert otel.aiohttp_trace_configs() == []


def test_aiohttp_upstream_http_span_beneath_chat_span(otlp_receiver: OTLPReceiver) -> None:
    otel = create_telemetry(otlp_receiver.environ(VERITY_OTEL_HTTP_SPANS="true"))
    received: list[str] = []

    async def chat(request: web.Request) -> web.Response:
        received.append(request.headers["traceparent"])
        return web.json_response({"id": "x", "model": "m", "choices": []})

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async with aiohttp.ClientSession(trace_configs=otel.aiohttp_trace_configs()) as s:
                trace = otel.start_request({"method": "POST", "headers": []}, "/v1/chat")
                with trace.upstream(model="m", provider="openai", server_address="127.0.0.1",
                                    stream=False) as up:
                    headers = {k.decode(): v.decode() for k, v in up.headers()}
                    headers["authorization"] = f"Bearer {SECRET}"
                    async with s.post(f"http://127.0.0.1:{port}/v1/chat/completions"
                                      f"?key={SECRET}", json={}, headers=headers) as resp:
                        up.response(resp.status, await resp.json())
                trace.end(200)
                # an untraced call (no traceparent) makes no orphan span
                async with s.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={}):
                    pass
        finally:
            await runner.cleanup()

    asyncio.run(main())
    otel.shutdown()
    chat_span = otlp_receiver.span("chat")
    http = otlp_receiver.span("POST")
    assert http.kind == "CLIENT" and http.parent_span_id == chat_span.span_id
    assert http.attributes[sc.HTTP_RESPONSE_STATUS_CODE] == 200
    assert http.attributes[sc.URL_FULL].endswith("/v1/chat/completions")
    assert received[0].split("-")[2] == http.span_id  # upstream continues from the HTTP span
    assert len(otlp_receiver.spans()) == 3
    assert not [b for b in otlp_receiver.raw_bytes() if SECRET.encode() in b]
