"""docs/policies.md's "Block secrets" example, end to end: the official openai SDK →
a real gateway (uvicorn) → the scripted upstream (which echoes the secret back),
with the audit file and real OTLP exports (spans, events, logs, metrics) checked
byte for byte.

What a block rule matches must reach no one: not the client (``{reasons}`` in the
error body, a ``style: completion`` block, a disclaimer), not the audit record,
not telemetry — unless the policy records content, and then only redacted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from otlp_receiver import OTLPReceiver

from gateway.telemetry import semconv as sc
from gateway.telemetry import create_telemetry

DOCS = Path(__file__).resolve().parents[2] / "docs" / "policies.md"
GATEWAY_KEY = "gw-acme-test-key-0123456789"
AWS_KEY = "AKIAQWERTYUIOPASDFGH"
PASSWORD = "Hunter2xyz"
SECRETS = (AWS_KEY.encode(), PASSWORD.encode())
QUESTION = f"Use key {AWS_KEY} with password: {PASSWORD}"
ANSWER = f"You said: {QUESTION}"  # the scripted upstream echoes the user


def docs_policy() -> dict[str, Any]:
    """The "Block secrets" example from docs/policies.md, as written there."""
    text = DOCS.read_text(encoding="utf-8")
    heading = text.index("**Block secrets")
    block = re.search(r"```yaml\n(.*?)```", text[heading:], re.S)
    assert block is not None
    policy = yaml.safe_load(block.group(1))
    assert policy["layers"][0]["name"] == "keyword"
    return dict(policy)


def variant(fail: dict[str, Any] | None = None, *, secret_rule: bool = True,
            telemetry: dict[str, Any] | None = None) -> str:
    policy = docs_policy()
    if secret_rule:  # QA's variant: the rule matches the password itself, not the word
        policy["layers"][0]["config"]["block"].append(r"/password: \S+/")
    if fail is not None:
        policy["actions"] = {"fail": fail}
    if telemetry is not None:
        policy["telemetry"] = telemetry
    return yaml.safe_dump(policy)


def leaks(data: bytes | str) -> list[bytes]:
    raw = data.encode() if isinstance(data, str) else data
    return [s for s in SECRETS if s in raw]


class Run:
    """One gateway with one policy, real telemetry and its own audit file."""

    def __init__(self, make_gateway: Callable[..., Any], receiver: OTLPReceiver,
                 make_client: Callable[..., openai.OpenAI], tmp_path: Path, policy: str) -> None:
        policies = tmp_path / "policies"
        policies.mkdir()
        (policies / "no-secrets.yaml").write_text(policy, encoding="utf-8")
        self.audit_path = tmp_path / "audit.jsonl"
        self.receiver = receiver
        self.gw = make_gateway(
            policies_dir=str(policies), reload_policies=False,
            audit={"path": str(self.audit_path)},
            auth={"keys": [{"name": "acme-app", "tenant": "acme", "key": GATEWAY_KEY}]},
            app_kwargs={"telemetry": create_telemetry(receiver.environ())})
        self.client = make_client(self.gw, api_key=GATEWAY_KEY)

    def ask(self, **kwargs: Any) -> Any:
        return self.client.chat.completions.with_raw_response.create(
            model="scripted-small", messages=[{"role": "user", "content": QUESTION}], **kwargs)

    def recorded(self) -> tuple[bytes, list[bytes]]:
        """(audit file bytes, every exported OTLP body) once the gateway has stopped."""
        self.gw.stop()  # lifespan shutdown: flushes the audit writer and every exporter
        return self.audit_path.read_bytes(), list(self.receiver.raw_bytes())


@pytest.fixture
def start(make_gateway: Callable[..., Any], otlp_receiver: OTLPReceiver,
          make_client: Callable[..., openai.OpenAI], tmp_path: Path
          ) -> Iterator[Callable[[str], Run]]:
    runs: list[Run] = []

    def go(policy: str) -> Run:
        runs.append(Run(make_gateway, otlp_receiver, make_client, tmp_path, policy))
        return runs[-1]

    yield go
    for run in runs:
        run.gw.stop()


def assert_not_recorded(run: Run) -> None:
    audit, exported = run.recorded()
    assert audit, "no audit record written"
    assert not leaks(audit)
    assert {signal for signal, _ in run.receiver.raw} >= {"traces", "logs"}
    assert not [body for body in exported if leaks(body)]
    layers = [s for s in run.receiver.spans() if s.name.startswith("verify ")]
    assert layers  # one per request
    for layer in layers:
        event = layer.event(sc.EVENT_GEN_AI_EVALUATION_RESULT).attributes
        # the explanation still says which rule fired, as the policy wrote it
        assert r"block[1]" in event[sc.GEN_AI_EVALUATION_EXPLANATION]
    evaluations = [r for r in run.receiver.logs()
                   if sc.GEN_AI_EVALUATION_EXPLANATION in r.attributes]
    assert len(evaluations) == len(layers)


def test_docs_example_as_written_error_body_names_the_rule_not_the_key(
        start: Callable[[str], Run]) -> None:
    run = start(variant(secret_rule=False))
    with pytest.raises(openai.UnprocessableEntityError) as info:
        run.ask()
    assert_not_recorded(run)
    assert info.value.status_code == 422 and not leaks(info.value.response.text)
    assert info.value.response.json()["error"]["message"] == (
        "I can't provide that answer: it failed verification (keyword: blocked by "
        r'block[0] (1 match), block[1] (1 match)).')


def test_error_block_reaches_no_one(start: Callable[[str], Run]) -> None:
    run = start(variant())
    with pytest.raises(openai.UnprocessableEntityError) as info:
        run.ask()
    with pytest.raises(openai.UnprocessableEntityError) as streamed:  # buffered stream
        run.ask(stream=True)
    assert_not_recorded(run)
    assert not leaks(info.value.response.text) and not leaks(streamed.value.response.text)
    assert r"block[2] (1 match)" in info.value.response.json()["error"]["message"]


def test_completion_block_reaches_no_one(start: Callable[[str], Run]) -> None:
    run = start(variant({"type": "block"}))  # style: completion, the default message
    raw = run.ask()
    assert_not_recorded(run)
    reply = raw.parse()
    content = reply.choices[0].message.content or ""
    assert reply.choices[0].finish_reason == "content_filter"
    assert content.startswith("I can't provide that answer") and not leaks(raw.http_response.text)


def test_disclaimer_does_not_repeat_the_match(start: Callable[[str], Run]) -> None:
    run = start(variant({"type": "disclaimer"}))  # the default template, {reasons}
    content = run.ask().parse().choices[0].message.content or ""
    assert_not_recorded(run)
    assert content.startswith(ANSWER)  # a disclaimer delivers the answer itself …
    appended = content[len(ANSWER):]
    assert "keyword" in appended and not leaks(appended)  # … but never quotes it again


def test_recorded_content_is_redacted(start: Callable[[str], Run]) -> None:
    run = start(variant(telemetry={"record_content": True,
                                   "redact": [r"AKIA[0-9A-Z]{16}", r"password: \S+"]}))
    with pytest.raises(openai.UnprocessableEntityError) as info:
        run.ask()
    audit, exported = run.recorded()
    assert b'"content"' in audit and b"[REDACTED]" in audit and not leaks(audit)
    assert not [body for body in exported if leaks(body)]
    chat = run.receiver.span("POST /v1/chat/completions")
    assert "[REDACTED]" in chat.attributes[sc.GEN_AI_OUTPUT_MESSAGES]
    assert "[REDACTED]" in chat.attributes[sc.GEN_AI_INPUT_MESSAGES]
    assert not leaks(info.value.response.text)
