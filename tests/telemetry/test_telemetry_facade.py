"""The OpenTelemetry façade driven directly, exports decoded by a real OTLP receiver."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from otlp_receiver import OTLPReceiver, RSpan

from gateway.telemetry import semconv as sc
from gateway.redact import redact_secrets
from gateway.telemetry import RequestTrace, Telemetry, create_telemetry

API_KEY = "sk-test-DO-NOT-LEAK-4f2a9c7e1b"
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"


def scope(*extra: tuple[bytes, bytes]) -> dict[str, Any]:
    return {
        "type": "http", "method": "POST", "path": "/v1/chat/completions", "scheme": "http",
        "http_version": "1.1", "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 50000),
        "headers": [(b"authorization", f"Bearer {API_KEY}".encode()),
                    (b"api-key", API_KEY.encode()), (b"user-agent", b"OpenAI/Python 3.54"),
                    *extra],
    }


def completion(**over: Any) -> dict[str, Any]:
    body = {"id": "chatcmpl-123", "model": "gpt-4o-mini-2024", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Paris."}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}
    body.update(over)
    return body


def outcome(name: str, **over: Any) -> dict[str, Any]:
    out = {"name": name, "score": 0.9, "passed": True, "latency_ms": 1.5,
           "label": None, "explanation": f"checked with key {API_KEY}",
           "cache_hit": False, "judge_calls": 0, "cost": 0.0, "error": None}
    out.update(over)
    return out


def run_inline_request(otel: Telemetry) -> RequestTrace:
    traceparent = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01".encode()
    trace = otel.start_request(scope((b"traceparent", traceparent)), "/v1/chat/completions")
    with trace.upstream(model="gpt-4o-mini", provider="openai",
                        server_address="api.example.test", stream=True) as up:
        headers = dict(up.headers())
        up.first_chunk()
        up.first_chunk()  # only the first counts
        up.response(200, completion())
    trace.sent_traceparent = headers[b"traceparent"].decode()  # type: ignore[attr-defined]
    with trace.layer("keyword") as layer:
        layer.result(outcome("keyword"))
    with trace.layer("grounding") as layer:
        layer.result(outcome("grounding", score=0.2, passed=False, cost=0.002, judge_calls=1,
                             label="unsupported", explanation="2 of 3 claims unsupported"))
    with trace.attempt(1):
        with trace.upstream(model="gpt-4o-mini", provider="openai",
                            server_address="api.example.test", stream=False) as up:
            up.response(200, completion(id="chatcmpl-456"))
        with trace.layer("grounding") as layer:
            layer.result(outcome("grounding", score=0.8))
    trace.decision({"policy": "strict", "mode": "inline", "verdict": "pass", "score": 0.8,
                    "action": "regenerate", "attempts": 1})
    trace.end(200)
    return trace


def by_parent(spans: list[RSpan], parent: RSpan) -> list[RSpan]:
    return [s for s in spans if s.parent_span_id == parent.span_id]


def test_no_endpoint_means_noop_and_no_sdk_import() -> None:
    assert type(create_telemetry({})) is Telemetry
    assert not create_telemetry({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                                 "OTEL_SDK_DISABLED": "true"}).enabled
    code = ("import sys; from gateway.telemetry import create_telemetry as c; t = c({}); "
            "t.start_request({}, '/x').end(200); "
            "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_traces_endpoint_alone_enables_traces_only() -> None:
    otel = create_telemetry({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"})
    try:
        assert otel.enabled
        providers = otel.providers  # type: ignore[attr-defined]
        assert providers.meter is None and providers.logger is None
    finally:
        otel.shutdown()


def test_span_tree_kinds_and_parentage(otel: Telemetry, otlp_receiver: OTLPReceiver) -> None:
    trace = run_inline_request(otel)
    otel.shutdown()
    spans = otlp_receiver.spans()
    assert {s.trace_id for s in spans} == {CALLER_TRACE}

    server = otlp_receiver.span("POST /v1/chat/completions")
    assert server.kind == "SERVER" and server.parent_span_id == CALLER_SPAN
    assert server.attributes[sc.HTTP_RESPONSE_STATUS_CODE] == 200
    assert server.attributes[sc.HTTP_ROUTE] == "/v1/chat/completions"
    assert server.resource["service.name"] == "verity-test"

    chats = [s for s in spans if s.name == "chat"]
    first = next(s for s in chats if s.parent_span_id == server.span_id)
    assert first.kind == "CLIENT"
    assert trace.sent_traceparent == f"00-{CALLER_TRACE}-{first.span_id}-01"  # type: ignore
    a = first.attributes
    assert a[sc.GEN_AI_OPERATION_NAME] == "chat" and a[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert a[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert a[sc.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini-2024"
    assert a[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-123"
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ["stop"]
    assert (a[sc.GEN_AI_USAGE_INPUT_TOKENS], a[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (12, 3)
    assert a[sc.GEN_AI_REQUEST_STREAM] is True
    assert a[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0
    assert a[sc.SERVER_ADDRESS] == "api.example.test"
    assert sc.ERROR_TYPE not in a

    layers = [s for s in by_parent(spans, server) if s.name.startswith("verify ")]
    assert sorted(s.name for s in layers) == ["verify grounding", "verify keyword"]
    assert all(s.kind == "INTERNAL" for s in layers)
    grounding = next(s for s in layers if s.name == "verify grounding")
    g = grounding.attributes
    assert g[sc.VERITY_LAYER_SCORE] == 0.2 and g[sc.VERITY_LAYER_PASSED] is False
    assert g[sc.VERITY_LAYER_JUDGE_CALLS] == 1 and g[sc.VERITY_LAYER_COST] == 0.002
    assert g[sc.VERITY_LAYER_LATENCY_MS] == 1.5 and g[sc.VERITY_LAYER_CACHE_HIT] is False
    event = grounding.event(sc.EVENT_GEN_AI_EVALUATION_RESULT).attributes
    assert event == {sc.GEN_AI_EVALUATION_NAME: "grounding",
                     sc.VERITY_LAYER_TYPE: "grounding",
                     sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.2,
                     sc.GEN_AI_EVALUATION_SCORE_LABEL: "unsupported",
                     sc.GEN_AI_EVALUATION_EXPLANATION: "2 of 3 claims unsupported",
                     sc.GEN_AI_RESPONSE_ID: "chatcmpl-123"}
    keyword = next(s for s in layers if s.name == "verify keyword")
    assert keyword.event(sc.EVENT_GEN_AI_EVALUATION_RESULT).attributes[
        sc.GEN_AI_EVALUATION_SCORE_LABEL] == "pass"

    attempt = otlp_receiver.span("regenerate attempt 1")
    assert attempt.parent_span_id == server.span_id and attempt.kind == "INTERNAL"
    assert attempt.attributes[sc.VERITY_ATTEMPT_NUMBER] == 1
    assert sorted(s.name for s in by_parent(spans, attempt)) == ["chat",
                                                                 "verify grounding"]

    decision = server.event(sc.EVENT_VERITY_DECISION).attributes
    assert decision == {sc.VERITY_POLICY: "strict", sc.VERITY_MODE: "inline",
                        sc.VERITY_VERDICT: "pass", sc.VERITY_SCORE: 0.8,
                        sc.VERITY_ACTION: "regenerate", sc.VERITY_ATTEMPTS: 1}
    assert server.attributes[sc.VERITY_ACTION] == "regenerate"


def test_other_upstream_actions_name_their_attempt_spans(otel: Telemetry,
                                                        otlp_receiver: OTLPReceiver) -> None:
    trace = otel.start_request(scope(), "/v1/chat/completions")
    with trace.attempt(1, "request-sources"):
        pass
    with trace.attempt(2, "decompose-and-retry"):
        pass
    trace.end(200)
    otel.shutdown()
    first = otlp_receiver.span("request-sources attempt 1")
    second = otlp_receiver.span("decompose-and-retry attempt 2")
    assert first.attributes[sc.VERITY_ATTEMPT_NUMBER] == 1
    assert second.attributes[sc.VERITY_ATTEMPT_NUMBER] == 2


def test_evaluation_results_are_log_records_too(otel: Telemetry,
                                                otlp_receiver: OTLPReceiver) -> None:
    run_inline_request(otel)
    otel.shutdown()
    layer_spans = {s.span_id: s for s in otlp_receiver.spans() if s.name.startswith("verify ")}
    records = [r for r in otlp_receiver.logs()
               if r.event_name == sc.EVENT_GEN_AI_EVALUATION_RESULT]
    assert len(records) == 3
    for record in records:
        span = layer_spans[record.span_id]  # correlated with the layer span that produced it
        assert record.trace_id == CALLER_TRACE
        assert record.attributes == span.event(sc.EVENT_GEN_AI_EVALUATION_RESULT).attributes


def test_metrics(otel: Telemetry, otlp_receiver: OTLPReceiver) -> None:
    run_inline_request(otel)
    otel.count("fail_open", attributes={sc.VERITY_POLICY: "strict"})
    otel.count("shadow.dropped", 2)
    otel.gauge_shadow_depth(lambda: 7)
    otel.shutdown()

    usage = otlp_receiver.last_metric(sc.METRIC_GEN_AI_TOKEN_USAGE)
    assert usage.unit == "{token}"
    sums = {p.attributes[sc.GEN_AI_TOKEN_TYPE]: p.sum for p in usage.points}
    assert sums == {"input": 24, "output": 6}
    point = usage.points[0].attributes
    assert point[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert point[sc.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini-2024"

    duration = otlp_receiver.last_metric(sc.METRIC_GEN_AI_OPERATION_DURATION)
    assert duration.unit == "s" and sum(p.count or 0 for p in duration.points) == 2
    ttfc = otlp_receiver.last_metric(sc.METRIC_GEN_AI_TIME_TO_FIRST_CHUNK)
    assert sum(p.count or 0 for p in ttfc.points) == 1

    layer = otlp_receiver.last_metric(sc.METRIC_LAYER_DURATION)
    assert {(p.attributes[sc.VERITY_LAYER_NAME], p.attributes[sc.VERITY_VERDICT], p.count)
            for p in layer.points} == {("keyword", "pass", 1), ("grounding", "fail", 1),
                                       ("grounding", "pass", 1)}
    verdicts = otlp_receiver.last_metric(sc.METRIC_LAYER_VERDICTS)
    assert {(p.attributes[sc.VERITY_POLICY], p.attributes[sc.VERITY_MODE],
             p.attributes[sc.VERITY_LAYER_NAME], p.attributes[sc.VERITY_VERDICT], p.value)
            for p in verdicts.points} == {("strict", "inline", "keyword", "pass", 1),
                                          ("strict", "inline", "grounding", "fail", 1),
                                          ("strict", "inline", "grounding", "pass", 1)}
    decisions = otlp_receiver.last_metric(sc.METRIC_DECISIONS)
    assert [(p.attributes, p.value) for p in decisions.points] == [
        ({sc.VERITY_POLICY: "strict", sc.VERITY_MODE: "inline", sc.VERITY_VERDICT: "pass",
          sc.VERITY_ACTION: "regenerate"}, 1)]
    cost = otlp_receiver.last_metric(sc.METRIC_JUDGE_COST)
    assert [p.value for p in cost.points] == [pytest.approx(0.002)]
    fail_open = otlp_receiver.last_metric("verity.fail_open")
    assert [(p.attributes, p.value) for p in fail_open.points] == [
        ({sc.VERITY_POLICY: "strict"}, 1)]
    assert [p.value for p in otlp_receiver.last_metric("verity.shadow.dropped").points] == [2]
    depth = otlp_receiver.last_metric(sc.METRIC_SHADOW_QUEUE_DEPTH)
    assert depth.kind == "gauge" and [p.value for p in depth.points] == [7]


def test_api_key_appears_in_no_export(otel: Telemetry, otlp_receiver: OTLPReceiver) -> None:
    run_inline_request(otel)
    trace = otel.start_request(scope(), "/v1/chat/completions")
    with trace.layer("keyword") as layer:
        layer.result(outcome("keyword", error=f"judge said 401 for key {API_KEY}"))
    trace.content([{"role": "user", "content": f"my key is {API_KEY}"}], f"echo {API_KEY}")
    trace.end(200)
    otel.shutdown()
    raw = list(otlp_receiver.raw_bytes())
    assert {signal for signal, _ in otlp_receiver.raw} == {"traces", "metrics", "logs"}
    assert not [body for body in raw if API_KEY.encode() in body]
    assert not [body for body in raw if b"DO-NOT-LEAK" in body]


def test_traceparent_out_without_incoming_starts_new_trace(
        otel: Telemetry, otlp_receiver: OTLPReceiver) -> None:
    trace = otel.start_request(scope(), "/v1/chat/completions")
    with trace.upstream(model="m", provider="openai", server_address="u", stream=False) as up:
        sent = dict(up.headers())[b"traceparent"].decode()
    trace.end(200)
    otel.shutdown()
    server = otlp_receiver.span("POST /v1/chat/completions")
    chat = otlp_receiver.span("chat")
    assert server.parent_span_id == "" and chat.parent_span_id == server.span_id
    # flags: sampled, plus W3C level-2 "random trace id" for a trace started here
    assert sent == f"00-{server.trace_id}-{chat.span_id}-03"


def test_shadow_work_is_its_own_linked_trace(otel: Telemetry,
                                             otlp_receiver: OTLPReceiver) -> None:
    trace = otel.start_request(scope(), "/v1/chat/completions")
    with trace.upstream(model="m", provider="openai", server_address="u", stream=False) as up:
        up.response(200, completion())
    shadow = otel.start_shadow(trace)
    trace.end(200)  # the client is answered before the audit runs
    with shadow.layer("grounding") as layer:
        layer.result(outcome("grounding"))
    shadow.decision({"policy": "audit", "mode": "shadow", "verdict": "pass",
                     "action": "pass", "attempts": 0})
    shadow.end(200)
    otel.shutdown()

    request = otlp_receiver.span("POST /v1/chat/completions")
    root = otlp_receiver.span("shadow audit")
    layer_span = otlp_receiver.span("verify grounding")
    assert root.trace_id != request.trace_id and root.parent_span_id == ""
    assert root.kind == "INTERNAL"
    assert root.links == [(request.trace_id, request.span_id)]
    assert request.links == [(root.trace_id, root.span_id)]
    assert request.attributes[sc.VERITY_SHADOW_TRACE_ID] == root.trace_id
    assert layer_span.trace_id == root.trace_id and layer_span.parent_span_id == root.span_id
    assert layer_span.event(sc.EVENT_GEN_AI_EVALUATION_RESULT).attributes[
        sc.GEN_AI_RESPONSE_ID] == "chatcmpl-123"
    assert root.event(sc.EVENT_VERITY_DECISION).attributes[sc.VERITY_MODE] == "shadow"
    assert sc.HTTP_RESPONSE_STATUS_CODE not in root.attributes


def test_content_only_when_opted_in_and_redacted(otel: Telemetry,
                                                 otlp_receiver: OTLPReceiver) -> None:
    plain = otel.start_request(scope(), "/plain")
    with plain.upstream(model="m", provider="openai", server_address="u", stream=False) as up:
        up.response(200, completion())
    plain.end(200)
    opted = otel.start_request(scope(), "/opted")
    with opted.upstream(model="m", provider="openai", server_address="u", stream=False) as up:
        up.response(200, completion())
    opted.content([{"role": "system", "content": "be brief"},
                   {"role": "user", "content": [{"type": "text", "text": "mail bob@example.com"},
                                                {"type": "image_url", "image_url": {}}]}],
                  "Paris.", redact=lambda s: redact_secrets(s).upper())
    opted.end(200)
    otel.shutdown()

    everything = b"".join(otlp_receiver.raw_bytes())
    assert b"Paris." not in everything and b"bob@example.com" not in everything
    assert sc.GEN_AI_INPUT_MESSAGES not in otlp_receiver.span("POST /plain").attributes
    span = otlp_receiver.span("POST /opted")
    assert span.attributes[sc.GEN_AI_INPUT_MESSAGES] == (
        '[{"role":"system","parts":[{"type":"text","content":"BE BRIEF"}]},'
        '{"role":"user","parts":[{"type":"text","content":"MAIL [EMAIL]"},'
        '{"type":"image_url"}]}]')
    assert span.attributes[sc.GEN_AI_OUTPUT_MESSAGES] == (
        '[{"role":"assistant","parts":[{"type":"text","content":"PARIS."}]}]')
    details = [r for r in otlp_receiver.logs() if r.event_name == sc.EVENT_GEN_AI_INFERENCE_DETAILS]
    assert len(details) == 1
    chat = next(s for s in otlp_receiver.spans()
                if s.name == "chat" and s.trace_id == span.trace_id)
    assert (details[0].trace_id, details[0].span_id) == (chat.trace_id, chat.span_id)


def test_errors_mark_spans(otel: Telemetry, otlp_receiver: OTLPReceiver) -> None:
    trace = otel.start_request(scope(), "/v1/chat/completions")
    with pytest.raises(ConnectionResetError):
        with trace.upstream(model="a", provider="openai", server_address="u", stream=False):
            raise ConnectionResetError("reset")
    with trace.upstream(model="b", provider="openai", server_address="u", stream=False) as up:
        up.response(503, {"error": {"message": "overloaded"}})
    with pytest.raises(TimeoutError):
        with trace.layer("slow"):
            raise TimeoutError
    with trace.layer("judge") as layer:
        layer.result(outcome("judge", passed=None, score=None, error="timeout"))
    trace.end(502, "UpstreamError")
    otel.shutdown()

    by_model = {s.attributes[sc.GEN_AI_REQUEST_MODEL]: s
                for s in otlp_receiver.spans() if s.name == "chat"}
    a, b = by_model["a"], by_model["b"]
    assert (a.attributes[sc.ERROR_TYPE], a.status_code) == ("ConnectionResetError", 2)
    assert (b.attributes[sc.ERROR_TYPE], b.status_code) == ("503", 2)
    slow = otlp_receiver.span("verify slow")
    assert (slow.attributes[sc.ERROR_TYPE], slow.status_code) == ("TimeoutError", 2)
    judge = otlp_receiver.span("verify judge")
    assert judge.attributes[sc.ERROR_TYPE] == "timeout"
    assert judge.event(sc.EVENT_GEN_AI_EVALUATION_RESULT).attributes[sc.ERROR_TYPE] == "timeout"
    server = otlp_receiver.span("POST /v1/chat/completions")
    assert (server.attributes[sc.ERROR_TYPE], server.status_code) == ("UpstreamError", 2)
    durations = otlp_receiver.last_metric(sc.METRIC_GEN_AI_OPERATION_DURATION)
    assert {p.attributes.get(sc.ERROR_TYPE) for p in durations.points} == {
        "ConnectionResetError", "503"}


def test_standard_environment(otlp_receiver: OTLPReceiver) -> None:
    otel = create_telemetry(otlp_receiver.environ(
        OTEL_SERVICE_NAME="gw-edge", OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test,a=b%20c",
        OTEL_EXPORTER_OTLP_HEADERS="x-collector-token=abc123", OTEL_TRACES_SAMPLER="always_off",
        OTEL_LOGS_EXPORTER="none"))
    trace = otel.start_request(scope(), "/x")
    with trace.upstream(model="m", provider="openai", server_address="u", stream=False) as up:
        sent = dict(up.headers())[b"traceparent"].decode()
    with trace.layer("keyword") as layer:
        layer.result(outcome("keyword"))
    trace.end(200)
    otel.shutdown()
    assert sent[-2:] in ("00", "02")  # not sampled, still propagated
    assert otlp_receiver.spans() == [] and otlp_receiver.logs() == []
    assert otlp_receiver.request_headers
    assert all(h.get("x-collector-token") == "abc123" for h in otlp_receiver.request_headers)
    assert all(h.get("content-type") == "application/x-protobuf"
               for h in otlp_receiver.request_headers)
    metric = otlp_receiver.last_metric(sc.METRIC_LAYER_DURATION)
    assert metric.points  # metrics do not depend on trace sampling
    exported = otlp_receiver.raw[0][1]
    assert b"gw-edge" in exported and b"deployment.environment" in exported


def test_ratio_sampler_respects_sampled_parent(otlp_receiver: OTLPReceiver) -> None:
    otel = create_telemetry(otlp_receiver.environ(OTEL_TRACES_SAMPLER="parentbased_traceidratio",
                                                  OTEL_TRACES_SAMPLER_ARG="0"))
    sampled = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01".encode()
    otel.start_request(scope((b"traceparent", sampled)), "/kept").end(200)
    otel.start_request(scope(), "/dropped").end(200)
    otel.shutdown()
    assert [s.name for s in otlp_receiver.spans()] == ["POST /kept"]


def test_tracestate_is_forwarded_upstream(otel: Telemetry) -> None:
    traceparent = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01".encode()
    trace = otel.start_request(scope((b"traceparent", traceparent),
                                     (b"tracestate", b"vendor=abc,other=1")), "/x")
    with trace.upstream(model="m", provider="openai", server_address="u", stream=False) as up:
        sent = dict(up.headers())
    trace.end(200)
    assert sent[b"traceparent"].startswith(f"00-{CALLER_TRACE}-".encode())
    assert sent[b"traceparent"].endswith(b"-01")
    assert sent[b"tracestate"] == b"vendor=abc,other=1"
