"""A judge whose replies the layers cannot use must not leak them (issue 10, item 7).

A real gateway (uvicorn) with every judge-backed layer, a real judge server (an
OpenAI-compatible fake) answering with a sentinel in prose, in JSON of the wrong
shape, in JSON with unusable values and in a broken chat-completion envelope, and
real OTLP exports. The judge quotes the answer, as real judges do. With content
recording off, neither the judge's sentinel nor the answer's may reach the audit
file, any exported span, event or log record, the gateway's log lines, or the
client (the block message's ``{reasons}``, the ``x-verity-detail`` body, headers).
Each layer must still record *that* and *what* failed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
import yaml
from otlp_receiver import OTLPReceiver

from gateway.telemetry import semconv as sc
from gateway.telemetry import create_telemetry
from security.fake_judge import FakeJudge, serve_judge

JUDGE_SECRET = "JUDGE-SENTINEL-7f3a9c"
ANSWER_SECRET = "ANSWER-SENTINEL-51e2d8"
SECRETS = (JUDGE_SECRET.lower().encode(), ANSWER_SECRET.lower().encode())
CONTEXT = ("The Eiffel Tower in Paris was completed in 1889. The tower is 330 metres tall. "
           "Gustave Eiffel's company designed and built the tower.")
ANSWER = (f"The Eiffel Tower was completed in 1889 and is 330 metres tall. "
          f"Its maintenance vault code is {ANSWER_SECRET}.")
LAYERS = ("nli", "self-consistency", "semantic-entropy", "audit", "fact-check")

_ITEM = {"id": 1, "label": JUDGE_SECRET, "confidence": JUDGE_SECRET, "agrees": JUDGE_SECRET,
         "equivalent": JUDGE_SECRET, "reason": ANSWER}
REPLIES: dict[str, dict[str, Any]] = {
    "prose": {"reply": f"{JUDGE_SECRET}: looks right to me: {ANSWER}"},
    "wrong-shape": {"reply": json.dumps({"verdict": JUDGE_SECRET, "answer": ANSWER})},
    "bad-values": {"reply": json.dumps({
        "results": [{**_ITEM, "id": i} for i in range(1, 9)],
        "pairs": [{"id": f"P{i}", "label": JUDGE_SECRET, "relevance": JUDGE_SECRET}
                  for i in range(1, 9)],
        "facts": [{"text": ANSWER}], "reasoning": [{"conclusion": ANSWER,
                                                    "premises": [JUDGE_SECRET]}],
        "errors": [{"fact": "F1", "chain": "R1", "level": JUDGE_SECRET,
                    "severity": JUDGE_SECRET, "kind": JUDGE_SECRET, "explanation": ANSWER}]})},
    # A 200 whose body is not a usable chat completion: token counts that are not numbers.
    "bad-envelope": {"raw_body": orjson.dumps({
        "choices": [{"message": {"content": f"{JUDGE_SECRET} {ANSWER}"}}],
        "usage": {"prompt_tokens": JUDGE_SECRET, "completion_tokens": ANSWER}})},
}


def policy(name: str, model: str, on_error: str) -> str:
    return yaml.safe_dump({
        "name": name, "mode": "inline", "match": {"models": [model]}, "on_error": on_error,
        "expose_detail": True, "budget": {"total_ms": 120000},
        "layers": [{"name": layer, "timeout_ms": 60000} for layer in LAYERS],
        "actions": {"fail": {"type": "block", "style": "error", "status": 422,
                             "message": "blocked: {reasons}"}},
    })


def leaks(data: bytes | str) -> list[bytes]:
    """The sentinels in ``data``, in any case (a layer may lower-case what it parsed)."""
    raw = (data.encode() if isinstance(data, str) else data).lower()
    return [s for s in SECRETS if s in raw]


@pytest.fixture
def otlp_receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as receiver:
        yield receiver


@pytest.fixture
def judge() -> Iterator[tuple[FakeJudge, str]]:
    fake = FakeJudge()
    with serve_judge(fake) as url:
        yield fake, url


@pytest.mark.parametrize("shape", sorted(REPLIES))
def test_a_failing_judge_leaks_nothing(
        shape: str, judge: tuple[FakeJudge, str], make_gateway: Callable[..., Any],
        upstream: Any, otlp_receiver: OTLPReceiver, tmp_path: Path,
        make_client: Callable[..., openai.OpenAI], caplog: pytest.LogCaptureFixture) -> None:
    fake, judge_url = judge
    for key, value in REPLIES[shape].items():
        setattr(fake, key, value)
    upstream.app.default_reply = ANSWER
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "closed.yaml").write_text(policy("closed", "closed-*", "fail_closed"))
    (policies / "open.yaml").write_text(policy("open", "open-*", "fail_open"))
    audit_path = tmp_path / "audit.jsonl"
    caplog.set_level(logging.DEBUG)
    gw = make_gateway(
        policies_dir=str(policies), reload_policies=False, audit={"path": str(audit_path)},
        judge={"base_url": judge_url, "model": "judge-model", "cache_size": 0},
        app_kwargs={"telemetry": create_telemetry(otlp_receiver.environ())})
    client = make_client(gw)
    messages = [{"role": "system", "content": CONTEXT},
                {"role": "user", "content": "Tell me about the Eiffel Tower."}]
    seen: list[bytes] = []  # everything the client received: status line, headers, body

    # fail_closed: the block message carries {reasons}, i.e. every layer's error.
    for stream in (False, True):
        with pytest.raises(openai.UnprocessableEntityError) as info:
            client.chat.completions.create(model="closed-small", messages=messages,
                                           stream=stream)
        resp = info.value.response
        body = resp.json()
        assert set(body["error"]) == {"message", "type", "param", "code"}
        assert body["error"]["message"].count("JudgeError") >= 1
        seen += [resp.content, repr(dict(resp.headers)).encode()]
    # fail_open: the answer is delivered; the per-layer detail (errors) rides along.
    raw = client.chat.completions.with_raw_response.create(
        model="open-small", messages=messages, extra_headers={"x-verity-detail": "true"})
    completion = raw.parse()
    assert completion.choices[0].message.content == ANSWER  # the answer itself, as sent
    detail = completion.model_extra["verity"]
    assert [layer["error"] is not None for layer in detail["layers"]] == [True] * len(LAYERS)
    seen += [orjson.dumps(detail), repr(dict(raw.headers)).encode()]
    assert fake.calls > 0

    gw.stop()  # flushes the audit writer and every exporter
    assert not [s for s in seen if leaks(s)]
    audit = audit_path.read_bytes()
    assert not leaks(audit)
    records = [orjson.loads(line) for line in audit.splitlines()]
    assert len(records) == 3
    for rec in records:
        errors = {layer["key"]: layer["error"] for layer in rec["layers"]}
        assert set(errors) == set(LAYERS)
        for key, error in errors.items():  # named failures: what failed, not what was said
            assert error and error.startswith("JudgeError: "), (key, error)
    exported = list(otlp_receiver.raw_bytes())
    assert {signal for signal, _ in otlp_receiver.raw} >= {"traces", "logs"}
    assert not [body for body in exported if leaks(body)]
    layer_spans = [s for s in otlp_receiver.spans() if s.name.startswith("verify ")]
    assert len(layer_spans) == 3 * len(LAYERS)
    for span in layer_spans:
        assert span.attributes[sc.VERITY_LAYER_ERROR].startswith("JudgeError: ")
    logged = [r.getMessage() + (r.exc_text or "") for r in caplog.records
              if r.name.startswith(("gateway", "uvicorn"))]
    assert not [line for line in logged if leaks(line)]
