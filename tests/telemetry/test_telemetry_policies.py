"""Policy attributes in real OTLP exports (openai SDK → uvicorn gateway → scripted
upstream): a shadow trace tells the live policy's verify spans from a candidate's,
two layers of one type give distinguishable evaluation events, unverified records
and the gateway's counters carry explicit, documented attributes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
from otlp_receiver import OTLPReceiver

from gateway.telemetry import semconv as sc
from gateway.testing.scripted import serve_lifespan
from gateway.testing.servers import ServerThread
from gateway.telemetry import create_telemetry

LIVE = """
mode: shadow
default: true
candidates: [cand]
layers:
  - {name: keyword, id: k1, config: {block: [zzz]}}
  - {name: keyword, id: k2, config: {block: [hello]}}
"""
CAND = """
mode: inline
match: {models: ["never-*"]}
layers: [{name: keyword, id: k1, config: {block: [said]}}]
actions: {fail: {type: block}}
"""


def serve(make_gateway: Callable[..., Any], receiver: OTLPReceiver, policies: Path,
          **overrides: Any) -> Any:
    telemetry = create_telemetry(receiver.environ())
    return make_gateway(policies_dir=str(policies), reload_policies=False,
                        app_kwargs={"telemetry": telemetry}, **overrides)


def points(receiver: OTLPReceiver, name: str) -> list[tuple[dict[str, Any], Any]]:
    return [(p.attributes, p.value) for p in receiver.last_metric(name).points]


def test_shadow_trace_tells_live_and_candidate_layers_apart(
        make_gateway: Callable[..., Any], otlp_receiver: OTLPReceiver, tmp_path: Path,
        upstream: Any, make_client: Callable[..., openai.OpenAI]) -> None:
    (tmp_path / "live.yaml").write_text(LIVE, encoding="utf-8")
    (tmp_path / "cand.yaml").write_text(CAND, encoding="utf-8")
    gw = serve(make_gateway, otlp_receiver, tmp_path)
    reply = make_client(gw).chat.completions.create(
        model="scripted-small", messages=[{"role": "user", "content": "hello"}])
    assert reply.choices[0].message.content == "You said: hello"
    gw.stop()  # drains the shadow queue, then flushes

    spans = otlp_receiver.spans()
    root = otlp_receiver.span("shadow audit")
    candidate = otlp_receiver.span("candidate cand")
    assert candidate.parent_span_id == root.span_id and candidate.kind == "INTERNAL"
    verify = [s for s in spans if s.name.startswith("verify ")]
    tagged = sorted((s.name, s.attributes[sc.VERITY_POLICY],
                     s.attributes[sc.VERITY_POLICY_CANDIDATE], s.parent_span_id)
                    for s in verify)
    assert tagged == [("verify k1", "cand", True, candidate.span_id),
                      ("verify k1", "live", False, root.span_id),
                      ("verify k2", "live", False, root.span_id)]
    decision = candidate.event(sc.EVENT_VERITY_DECISION).attributes
    assert decision == {sc.VERITY_POLICY: "cand", sc.VERITY_POLICY_CANDIDATE: True,
                        sc.VERITY_MODE: "candidate", sc.VERITY_VERDICT: "fail",
                        sc.VERITY_SCORE: 0.0, sc.VERITY_ACTION: "block"}
    live = root.event(sc.EVENT_VERITY_DECISION).attributes
    assert live[sc.VERITY_POLICY] == "live" and sc.VERITY_POLICY_CANDIDATE not in live

    # Two keyword layers: distinct evaluation names (the ids), the type beside them.
    live_layers = {s.span_id: s for s in verify if s.attributes[sc.VERITY_POLICY] == "live"}
    events = sorted((e := s.event(sc.EVENT_GEN_AI_EVALUATION_RESULT).attributes)[
        sc.GEN_AI_EVALUATION_NAME] + ":" + e[sc.VERITY_LAYER_TYPE] + ":"
        + str(s.attributes[sc.VERITY_LAYER_PASSED]) for s in live_layers.values())
    assert events == ["k1:keyword:True", "k2:keyword:False"]
    assert all(s.attributes[sc.VERITY_LAYER_TYPE] == "keyword" for s in verify)
    records = sorted(r.attributes[sc.GEN_AI_EVALUATION_NAME] for r in otlp_receiver.logs()
                     if r.event_name == sc.EVENT_GEN_AI_EVALUATION_RESULT
                     and r.span_id in live_layers)
    assert records == ["k1", "k2"]

    # Metrics: candidates are not counted as decisions or as the live policy's layers.
    (decided,) = points(otlp_receiver, sc.METRIC_DECISIONS)
    assert decided == ({sc.VERITY_POLICY: "live", sc.VERITY_MODE: "shadow",
                        sc.VERITY_VERDICT: live[sc.VERITY_VERDICT],
                        sc.VERITY_ACTION: live[sc.VERITY_ACTION]}, 1)
    assert points(otlp_receiver, "verity.verifications") == [decided]
    assert otlp_receiver.last_metric("verity.verifications").unit == "1"
    layer_points = points(otlp_receiver, sc.METRIC_LAYER_VERDICTS)
    assert sorted((a[sc.VERITY_POLICY], a[sc.VERITY_LAYER_NAME], a[sc.VERITY_VERDICT])
                  for a, _ in layer_points) == [("live", "k1", "pass"), ("live", "k2", "fail")]
    assert points(otlp_receiver, "verity.shadow.enqueued") == [
        ({sc.VERITY_SHADOW_KIND: "shadow"}, 1)]


class NotACompletion:
    """An upstream whose 200 answer is JSON but not a chat completion."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
            return
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"object": "list", "data": []}'})


def test_unverified_shadow_record_has_an_explicit_none_verdict(
        make_gateway: Callable[..., Any], otlp_receiver: OTLPReceiver, tmp_path: Path,
        make_client: Callable[..., openai.OpenAI]) -> None:
    (tmp_path / "live.yaml").write_text(LIVE.replace("candidates: [cand]\n", ""),
                                        encoding="utf-8")
    with ServerThread(NotACompletion()) as odd:
        gw = serve(make_gateway, otlp_receiver, tmp_path,
                   upstreams=[{"name": "odd", "base_url": odd.url + "/v1"}])
        raw = make_client(gw).chat.completions.with_raw_response.create(
            model="scripted-small", messages=[{"role": "user", "content": "hello"}])
        assert raw.http_response.status_code == 200
        gw.stop()

    unverified = {sc.VERITY_POLICY: "live", sc.VERITY_MODE: "shadow",
                  sc.VERITY_VERDICT: sc.NO_VERDICT, sc.VERITY_ACTION: sc.NO_ACTION}
    assert points(otlp_receiver, sc.METRIC_DECISIONS) == [(unverified, 1)]
    assert points(otlp_receiver, "verity.verifications") == [(unverified, 1)]
    decision = otlp_receiver.span("POST /v1/chat/completions").event(
        sc.EVENT_VERITY_DECISION).attributes
    assert sc.VERITY_VERDICT not in decision  # the event just has none


def test_inline_and_shadow_requests_server_spans_name_their_policy_and_mode(
        make_gateway: Callable[..., Any], otlp_receiver: OTLPReceiver, tmp_path: Path,
        upstream: Any, make_client: Callable[..., openai.OpenAI]) -> None:
    """Jaeger's search by policy finds shadow requests as it finds inline ones."""
    (tmp_path / "live.yaml").write_text(LIVE, encoding="utf-8")
    (tmp_path / "cand.yaml").write_text(CAND, encoding="utf-8")
    gw = serve(make_gateway, otlp_receiver, tmp_path)
    client = make_client(gw)
    client.chat.completions.create(model="scripted-small",
                                   messages=[{"role": "user", "content": "hello"}])
    client.chat.completions.create(model="never-seen",
                                   messages=[{"role": "user", "content": "hello"}])
    gw.stop()

    servers = [s for s in otlp_receiver.spans() if s.name == "POST /v1/chat/completions"]
    assert sorted((s.attributes[sc.VERITY_POLICY], s.attributes[sc.VERITY_MODE])
                  for s in servers) == [("cand", "inline"), ("live", "shadow")]


def test_the_audit_record_names_its_trace(
        make_gateway: Callable[..., Any], otlp_receiver: OTLPReceiver, tmp_path: Path,
        make_client: Callable[..., openai.OpenAI]) -> None:
    """The dashboard links a record to its trace in Jaeger: the shadow audit's trace."""
    import orjson

    (tmp_path / "live.yaml").write_text(LIVE, encoding="utf-8")
    (tmp_path / "cand.yaml").write_text(CAND, encoding="utf-8")
    gw = serve(make_gateway, otlp_receiver, tmp_path)
    make_client(gw).chat.completions.create(
        model="scripted-small", messages=[{"role": "user", "content": "hi"}])
    gw.stop()
    (record,) = [orjson.loads(line) for line in
                 Path(gw.settings.audit.path).read_bytes().splitlines()]
    assert record["trace_id"] == otlp_receiver.span("shadow audit").trace_id
