"""The inline prepare step (``VerityEngine.prepare``) is a ``prepare context`` span:
the official openai SDK → a real gateway (uvicorn) with an inline grounding policy →
the scripted upstream, spans decoded from the OTLP export."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from otlp_receiver import OTLPReceiver, RSpan

from gateway.telemetry import semconv as sc
from gateway.sources.context import GroundingContext
from gateway.layers.grounding import GroundingLayer
from gateway.testing.scripted import Rule
from gateway.telemetry import create_telemetry

CONTEXT = ("Andre Johnson was born on July 11, 1981. He played for the Houston Texans "
           "for twelve seasons and caught 1,062 passes.")
GOOD = "Andre Johnson was born in 1981 and played for the Houston Texans."
SECRET = "sk-prepare-DO-NOT-LEAK-0c9d8e7f"
POLICY = """
mode: inline
default: true
layers: [{layers}]
actions: {{fail: {{type: block}}}}
"""
GROUNDING = "{name: grounding}"
CITATIONS = "{name: citations, config: {require_citations: false}}"
PREPARE = "prepare context"
SERVER = "POST /v1/chat/completions"

StartTraced = Callable[[str], Any]


@pytest.fixture
def start_traced(make_gateway: Callable[..., Any], otlp_receiver: OTLPReceiver,
                 tmp_path: Path) -> Iterator[StartTraced]:
    """``start_traced(layers)`` -> a gateway with real telemetry and one inline policy;
    the test stops it (lifespan shutdown flushes every exporter)."""
    started: list[Any] = []

    def start(layers: str) -> Any:
        policies = tmp_path / f"policies-{len(started)}"
        policies.mkdir()
        (policies / "p.yaml").write_text(POLICY.format(layers=layers), encoding="utf-8")
        telemetry = create_telemetry(otlp_receiver.environ())
        gw = make_gateway(policies_dir=str(policies), reload_policies=False,
                          app_kwargs={"telemetry": telemetry})
        started.append(gw)
        return gw

    yield start
    for gw in started:
        gw.stop()


def ask(client: openai.OpenAI) -> Any:
    return client.chat.completions.with_raw_response.create(
        model="scripted-small",
        messages=[{"role": "system", "content": CONTEXT},
                  {"role": "user", "content": "Tell me about Andre Johnson."}])


def spans_of_request(otlp_receiver: OTLPReceiver) -> tuple[RSpan, RSpan]:
    server = otlp_receiver.span(SERVER)
    prepare = otlp_receiver.span(PREPARE)
    assert prepare.kind == "INTERNAL"
    assert prepare.trace_id == server.trace_id
    assert prepare.parent_span_id == server.span_id  # beside the upstream call, not under it
    return server, prepare


def test_prepare_is_a_child_span_of_the_request(
        start_traced: StartTraced, upstream: Any, otlp_receiver: OTLPReceiver,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.rules = [Rule("Andre Johnson", GOOD)]
    gw = start_traced(f"{GROUNDING}, {CITATIONS}")
    raw = ask(make_client(gw))
    assert raw.headers["x-verity-verdict"] == "pass"
    gw.stop()

    server, prepare = spans_of_request(otlp_receiver)
    a = prepare.attributes
    assert a[sc.VERITY_PREPARE_LAYERS] == ["grounding", "citations"]
    assert a[sc.VERITY_PREPARE_CONTEXT_CHARS] == len(CONTEXT)  # the system message
    assert a[sc.VERITY_PREPARE_USED] is True
    assert sc.ERROR_TYPE not in a and sc.VERITY_PREPARE_FAILED_LAYER not in a
    assert prepare.status_code == 0 and prepare.events == []
    layers = {s.name for s in otlp_receiver.spans() if s.parent_span_id == server.span_id}
    assert {"verify grounding", "verify citations", PREPARE} <= layers


def test_a_failing_prepare_is_recorded_and_the_answer_is_unchanged(
        start_traced: StartTraced, upstream: Any, otlp_receiver: OTLPReceiver,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        make_client: Callable[..., openai.OpenAI]) -> None:
    def broken(self: GroundingLayer, context: GroundingContext) -> None:
        raise RuntimeError(f"prepare broke (key {SECRET})")

    monkeypatch.setattr(GroundingLayer, "prepare", broken)
    upstream.app.rules = [Rule("Andre Johnson", GOOD)]
    gw = start_traced(f"{CITATIONS}, {GROUNDING}")  # citations prepares, then grounding fails
    with caplog.at_level(logging.ERROR, logger="gateway.engine"):
        raw = ask(make_client(gw))
    assert raw.parse().choices[0].message.content == GOOD
    assert raw.headers["x-verity-verdict"] == "pass"
    gw.stop()
    assert "preparing the context failed" in caplog.text  # the fallback is unchanged

    server, prepare = spans_of_request(otlp_receiver)
    a = prepare.attributes
    assert prepare.status_code == 2 and a[sc.ERROR_TYPE] == "RuntimeError"
    assert a[sc.VERITY_PREPARE_LAYERS] == ["citations"]
    assert a[sc.VERITY_PREPARE_FAILED_LAYER] == "grounding"
    assert a[sc.VERITY_PREPARE_CONTEXT_CHARS] == len(CONTEXT)
    assert a[sc.VERITY_PREPARE_USED] is False  # verification extracted the context itself
    event = prepare.event(sc.EVENT_EXCEPTION).attributes
    assert event[sc.EXCEPTION_TYPE] == "RuntimeError"
    assert event[sc.EXCEPTION_MESSAGE] == "prepare broke (key [REDACTED])"
    # The request itself, and its verification, are fine.
    assert server.status_code != 2 and sc.ERROR_TYPE not in server.attributes
    assert server.attributes[sc.HTTP_RESPONSE_STATUS_CODE] == 200
    grounding = otlp_receiver.span("verify grounding")
    assert grounding.attributes[sc.VERITY_LAYER_PASSED] is True
    assert not [b for b in otlp_receiver.raw_bytes() if SECRET.encode() in b]
