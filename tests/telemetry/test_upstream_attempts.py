"""Each upstream attempt is a span; metrics count attempts by outcome and export each
upstream's health: a real gateway with telemetry, two scripted upstreams in a pool, the
openai SDK, the in-process OTLP receiver."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from otlp_receiver import OTLPReceiver

from gateway.telemetry import create_telemetry
from gateway.telemetry import semconv as sc
from gateway.testing.scripted import ScriptedUpstream
from gateway.testing.servers import ServerThread
from serving import ServedUpstream


@pytest.fixture(scope="module")
def b_server() -> Iterator[ServedUpstream]:
    app = ScriptedUpstream(default_reply="from b")
    with ServerThread(app) as server:
        yield ServedUpstream(app, server)


def test_every_attempt_is_a_span_and_is_counted(
        make_gateway: Callable[..., Any], upstream: ServedUpstream, b_server: ServedUpstream,
        otlp_receiver: OTLPReceiver, make_client: Callable[..., openai.OpenAI]) -> None:
    b_server.reset()
    upstream.app.failures = [503, 503]  # a fails twice; the fallback b answers
    telemetry = create_telemetry(otlp_receiver.environ())
    gw = make_gateway(app_kwargs={"telemetry": telemetry}, upstreams=[
        {"name": "a", "base_url": upstream.base_url},
        {"name": "b", "base_url": b_server.base_url, "models": []}],
        routing={"retries": {"max_attempts": 3, "base_backoff": 0.001, "max_backoff": 0.002},
                 "fallbacks": [{"model": "*", "targets": [{"upstream": "b"}]}]})
    reply = make_client(gw).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "from b"
    gw.stop()  # flushes

    server = otlp_receiver.span("POST /v1/chat/completions")
    attempts = sorted((s for s in otlp_receiver.spans() if s.name == "chat"),
                      key=lambda s: s.attributes[sc.VERITY_UPSTREAM_ATTEMPT])
    assert [s.attributes[sc.VERITY_UPSTREAM_NAME] for s in attempts] == ["a", "b"]
    assert [s.attributes[sc.VERITY_UPSTREAM_OUTCOME] for s in attempts] == ["retry", "ok"]
    assert all(s.parent_span_id == server.span_id for s in attempts)
    assert sc.HTTP_REQUEST_RESEND_COUNT not in attempts[0].attributes
    assert attempts[1].attributes[sc.HTTP_REQUEST_RESEND_COUNT] == 1
    assert attempts[0].attributes[sc.HTTP_RESPONSE_STATUS_CODE] == 503
    assert server.attributes[sc.VERITY_UPSTREAM_ATTEMPTS] == 2
    assert server.attributes[sc.VERITY_UPSTREAM_NAME] == "b"
    assert server.attributes[sc.HTTP_RESPONSE_STATUS_CODE] == 200

    counted = {(p.attributes.get(sc.VERITY_UPSTREAM_NAME),
                p.attributes[sc.VERITY_UPSTREAM_OUTCOME]): p.value
               for p in otlp_receiver.last_metric(sc.METRIC_UPSTREAM_ATTEMPTS).points}
    assert counted == {("a", "retry"): 1, ("b", "ok"): 1}
    served = otlp_receiver.last_metric(sc.METRIC_UPSTREAM_SERVED).points
    assert [(p.attributes[sc.VERITY_UPSTREAM_NAME], p.attributes[sc.VERITY_UPSTREAM_ATTEMPTS],
             p.value) for p in served] == [("b", 2, 1)]
    states = {p.attributes[sc.VERITY_UPSTREAM_NAME]: p.value
              for p in otlp_receiver.last_metric(sc.METRIC_UPSTREAM_STATE).points}
    assert states == {"a": 0, "b": 0}  # one failure does not open a (threshold 3)
    in_flight = otlp_receiver.last_metric(sc.METRIC_UPSTREAM_IN_FLIGHT).points
    assert {p.attributes[sc.VERITY_UPSTREAM_NAME]: p.value for p in in_flight} == {"a": 0, "b": 0}
