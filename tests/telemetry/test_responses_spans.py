"""A ``/v1/responses`` request's trace has the shape of a chat completion's: the same
spans (server, upstream call, verification, layers), the same attribute names and
evaluation events, in a real OTLP export (openai SDK → gateway → scripted upstream)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
from otlp_receiver import OTLPReceiver, RSpan

from gateway.telemetry import create_telemetry

POLICY = """
mode: inline
default: true
layers: [{name: keyword, config: {block: [atlantis]}}]
actions: {fail: {type: disclaimer}}
"""


def _shape(spans: list[RSpan]) -> list[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
    """Per span: name (the server span's route made generic), kind, attribute names,
    event names — sorted."""
    out = []
    for s in spans:
        name = "SERVER" if s.kind.endswith("SERVER") else s.name
        keys = tuple(sorted(k for k in s.attributes if k not in ("http.route", "url.path")))
        out.append((name, s.kind, keys, tuple(sorted(e.name for e in s.events))))
    return sorted(out)


def test_a_responses_trace_has_the_shape_of_a_chat_trace(
        make_gateway: Callable[..., Any], otlp_receiver: OTLPReceiver, tmp_path: Path,
        upstream: Any, make_client: Callable[..., openai.OpenAI]) -> None:
    (tmp_path / "p.yaml").write_text(POLICY, encoding="utf-8")
    upstream.app.default_reply = "Atlantis is a myth."
    gw = make_gateway(policies_dir=str(tmp_path), reload_policies=False,
                      app_kwargs={"telemetry": create_telemetry(otlp_receiver.environ())})
    client = make_client(gw)
    client.chat.completions.create(model="scripted-small",
                                   messages=[{"role": "user", "content": "hello"}])
    client.responses.create(model="scripted-small", input="hello")
    gw.stop()

    spans = otlp_receiver.spans()
    servers = {s.name: s for s in spans if s.kind.endswith("SERVER")}
    assert set(servers) == {"POST /v1/chat/completions", "POST /v1/responses"}
    chat = [s for s in spans if s.trace_id == servers["POST /v1/chat/completions"].trace_id]
    resp = [s for s in spans if s.trace_id == servers["POST /v1/responses"].trace_id]
    assert len(chat) > 2  # server, upstream, verification at least
    assert _shape(resp) == _shape(chat)
