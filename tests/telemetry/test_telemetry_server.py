"""End to end: the official openai SDK → a real gateway (uvicorn) → the scripted
upstream, with telemetry exporting to the in-process OTLP receiver."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from otlp_receiver import OTLPReceiver

from gateway.telemetry import semconv as sc
from gateway.telemetry import Telemetry, create_telemetry

API_KEY = "sk-caller-DO-NOT-LEAK-5e6f7a8b"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def traced(make_gateway: Callable[..., Any],
           otlp_receiver: OTLPReceiver) -> Iterator[tuple[Any, Telemetry]]:
    """A gateway with real telemetry; the test stops it (lifespan shutdown flushes)."""
    telemetry = create_telemetry(otlp_receiver.environ())
    gw = make_gateway(app_kwargs={"telemetry": telemetry})
    yield gw, telemetry
    gw.stop()


@pytest.fixture
def traced_http_spans(make_gateway: Callable[..., Any],
                      otlp_receiver: OTLPReceiver) -> Iterator[tuple[Any, Telemetry]]:
    """As ``traced``, with the opt-in HTTP CLIENT span under ``chat``."""
    telemetry = create_telemetry(otlp_receiver.environ(VERITY_OTEL_HTTP_SPANS="true"))
    gw = make_gateway(app_kwargs={"telemetry": telemetry})
    yield gw, telemetry
    gw.stop()


def secrets_sent(upstream: Any) -> list[bytes]:
    """Every credential the upstream was handed (the client's key, forwarded)."""
    out = []
    for req in upstream.requests:
        for name, value in req["headers"].items():
            if name.lower() in ("authorization", "api-key", "x-api-key"):
                out.append(value.encode())
                out.append(value.split()[-1].encode())
    return out


def test_request_trace_through_the_sdk(traced_http_spans: tuple[Any, Telemetry], upstream: Any,
                                       otlp_receiver: OTLPReceiver,
                                       make_client: Callable[..., openai.OpenAI]) -> None:
    gw, _ = traced_http_spans
    client = make_client(gw, api_key=API_KEY)
    reply = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}],
        extra_headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
    gw.stop()  # lifespan shutdown flushes every exporter

    server = otlp_receiver.span("POST /v1/chat/completions")
    chat = otlp_receiver.span("chat")
    http = otlp_receiver.span("POST")
    assert (server.kind, chat.kind, http.kind) == ("SERVER", "CLIENT", "CLIENT")
    assert server.trace_id == chat.trace_id == http.trace_id == CALLER_TRACE
    assert server.parent_span_id == CALLER_SPAN
    assert chat.parent_span_id == server.span_id and http.parent_span_id == chat.span_id
    assert chat.attributes[sc.GEN_AI_RESPONSE_ID] == reply.id
    assert chat.attributes[sc.GEN_AI_REQUEST_STREAM] is False
    assert server.attributes[sc.HTTP_RESPONSE_STATUS_CODE] == 200

    sent = {k.lower(): v for k, v in upstream.last("/v1/chat/completions")["headers"].items()}
    assert sent["traceparent"] == f"00-{CALLER_TRACE}-{http.span_id}-01"
    keys = secrets_sent(upstream)
    assert API_KEY.encode() in keys  # the key really travelled through the gateway …
    exported = list(otlp_receiver.raw_bytes())
    assert {signal for signal, _ in otlp_receiver.raw} >= {"traces", "metrics"}
    assert not [b for b in exported for key in keys if key in b]  # … and was never recorded


def test_default_has_no_http_span_and_chat_span_carries_it(
        traced: tuple[Any, Telemetry], upstream: Any, otlp_receiver: OTLPReceiver,
        make_client: Callable[..., openai.OpenAI]) -> None:
    """Without VERITY_OTEL_HTTP_SPANS the upstream continues from ``chat``,
    which carries the HTTP span's address, port and status."""
    gw, _ = traced
    client = make_client(gw, api_key=API_KEY)
    client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}],
        extra_headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
    gw.stop()

    assert sorted(s.name for s in otlp_receiver.spans()) == ["POST /v1/chat/completions",
                                                             "chat"]
    chat = otlp_receiver.span("chat")
    assert chat.attributes[sc.SERVER_ADDRESS] == "127.0.0.1"
    assert isinstance(chat.attributes[sc.SERVER_PORT], int) and chat.attributes[sc.SERVER_PORT]
    assert chat.attributes[sc.HTTP_RESPONSE_STATUS_CODE] == 200
    sent = {k.lower(): v for k, v in upstream.last("/v1/chat/completions")["headers"].items()}
    assert sent["traceparent"] == f"00-{CALLER_TRACE}-{chat.span_id}-01"


def test_streaming_records_time_to_first_chunk(traced: tuple[Any, Telemetry], upstream: Any,
                                               otlp_receiver: OTLPReceiver,
                                               make_client: Callable[..., openai.OpenAI]) -> None:
    gw, _ = traced
    client = make_client(gw, api_key=API_KEY)
    stream = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}], stream=True,
        stream_options={"include_usage": True})
    chunks = list(stream)
    gw.stop()

    assert chunks
    chat = otlp_receiver.span("chat")
    server = otlp_receiver.span("POST /v1/chat/completions")
    assert chat.parent_span_id == server.span_id and server.parent_span_id == ""
    assert chat.attributes[sc.GEN_AI_REQUEST_STREAM] is True
    assert chat.attributes[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0
    assert chat.attributes[sc.GEN_AI_RESPONSE_ID] == chunks[0].id
    ttfc = otlp_receiver.last_metric(sc.METRIC_GEN_AI_TIME_TO_FIRST_CHUNK)
    assert sum(p.count or 0 for p in ttfc.points) == 1
    sent = {k.lower(): v for k, v in upstream.last("/v1/chat/completions")["headers"].items()}
    assert sent["traceparent"].split("-")[1] == server.trace_id


def test_span_names_hold_no_client_chosen_string(traced_http_spans: tuple[Any, Telemetry],
                                                 upstream: Any,
                                                 otlp_receiver: OTLPReceiver) -> None:
    # Span names are what backends index: a path, a model name or a method token the
    # client chose would make one name per request. Route templates, operations and
    # registered methods only; what the client sent stays in attributes.
    import httpx

    gw, _ = traced_http_spans
    unique = "zq7-unique-4411"
    with httpx.Client(base_url=gw.base_url, timeout=10) as http:
        http.post("/chat/completions", json={"model": f"model-{unique}",
                                             "messages": [{"role": "user", "content": "hi"}]})
        http.post("/embeddings", json={"model": f"embed-{unique}", "input": "x"})
        http.get(f"/files/file-{unique}/content")
        http.get(f"/{unique}/x")
        http.request("PROPFIND", f"/files/{unique}")  # WebDAV: the parser takes it
    gw.stop()

    names = sorted({s.name for s in otlp_receiver.spans()})
    assert not [n for n in names if unique in n or "PROPFIND" in n], names
    assert "POST /v1/chat/completions" in names and "chat" in names
    assert {"POST /v1/embeddings", "embeddings", "GET /v1/files/*", "GET /v1/*",
            "HTTP /v1/files/*", "files", "request", "HTTP"} <= set(names), names
    odd = next(s for s in otlp_receiver.spans() if s.name == "HTTP /v1/files/*")
    assert odd.attributes[sc.HTTP_REQUEST_METHOD] == "_OTHER"
    assert odd.attributes[sc.HTTP_ROUTE] == "/v1/files/*"
    chat = next(s for s in otlp_receiver.spans() if s.name == "chat")
    assert chat.attributes[sc.GEN_AI_REQUEST_MODEL] == f"model-{unique}"  # kept, as data
