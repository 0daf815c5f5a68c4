"""``/v1/responses`` in front of a ``kind: anthropic`` upstream (Anthropic has no
Responses API): the gateway translates to chat completions, then to Anthropic's
Messages API, and the answers back — checked with the official ``openai`` SDK
against a real gateway and a fake Anthropic server, verified and not."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from fake_anthropic import FakeAnthropic
from gateway.testing.servers import ServerThread
from serving import GatewayFactory, ServedGateway

MODEL = "claude-sonnet-4-5"
KEY = "sk-ant-upstream-secret-0077"
POLICY = """
name: flagged
mode: inline
default: true
layers: [{name: grounding}]
actions:
  pass: {type: pass}
  marginal: {type: disclaimer, template: "\\n\\n[unverified]"}
  fail: {type: disclaimer, template: "\\n\\n[unverified]"}
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    app = FakeAnthropic(key=KEY)
    with ServerThread(app) as server:
        app.url = server.url
        yield app


@pytest.fixture(scope="module")
def gateways(make_gateway: GatewayFactory, fake: FakeAnthropic,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServedGateway]]:
    policies = tmp_path_factory.mktemp("anthropic-responses-policies")
    (policies / "flagged.yaml").write_text(POLICY, encoding="utf-8")
    upstreams = [{"name": "claude", "kind": "anthropic", "base_url": fake.url + "/v1",
                  "models": ["claude-*"]}]  # no gateway keys: the client's key goes upstream
    yield {"plain": make_gateway(upstreams=upstreams),
           "verified": make_gateway(upstreams=upstreams, policies_dir=str(policies))}


def _client(gw: ServedGateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=KEY, max_retries=0, timeout=30)


@pytest.mark.parametrize("which", ["plain", "verified"])
def test_responses_create_and_stream_through_anthropic(
        which: str, gateways: dict[str, ServedGateway], fake: FakeAnthropic) -> None:
    with _client(gateways[which]) as client:
        fake.requests.clear()
        r = client.responses.create(model=MODEL, instructions="Be brief.", input="hello there")
        assert r.object == "response" and r.status == "completed"
        assert r.output_text.startswith("You said: hello there")
        sent: Any = fake.requests[-1]["body"]
        assert sent["system"] in ("Be brief.", [{"type": "text", "text": "Be brief."}])
        with client.responses.stream(model=MODEL, input="hello again") as stream:
            deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
            final = stream.get_final_response()
        assert final.output_text.startswith("You said: hello again")
        assert "".join(deltas) == final.output_text


def test_a_field_anthropic_cannot_take_is_a_clear_400(
        gateways: dict[str, ServedGateway], fake: FakeAnthropic) -> None:
    fake.requests.clear()
    with _client(gateways["plain"]) as client, pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="hi", previous_response_id="resp_1")
    body = err.value.body
    assert isinstance(body, dict) and body["type"] == "invalid_request_error"
    assert "previous_response_id" in body["message"]
    assert fake.requests == []


def test_anthropic_cannot_be_declared_to_speak_responses(tmp_path: Path) -> None:
    from gateway.settings import ConfigError, load_settings
    with pytest.raises(ConfigError, match="responses_api"):
        load_settings(environ={}, overrides={"upstreams": [
            {"name": "c", "kind": "anthropic", "base_url": "https://api.anthropic.com/v1",
             "responses_api": True}]})
