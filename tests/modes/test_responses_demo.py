"""Every case of the shipped demo sent both ways — ``chat.completions.create`` and
``responses.create`` (streamed and not) — through one gateway with the shipped
policies: the same verdicts, actions, headers and audit records (issue 18's target)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import openai
import pytest

from modes.support import verity_headers
from gateway.commands.demo import SCENARIOS, Scenario
from gateway.settings import default_policies_dir
from gateway.testing.scripted import ScriptedUpstream
from gateway.testing.servers import ServerThread
from serving import ServedGateway

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import GatewayFactory

_VOLATILE = {"audit_id", "started_at", "finished_at", "duration_ms", "response_id",
             "latency_ms", "elapsed_ms", "stream"}


def _stable(value: Any) -> Any:
    """A record without what differs between two requests of the same case."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


@pytest.fixture(scope="module")
def demo(make_gateway: GatewayFactory) -> Iterator[ServedGateway]:
    upstream = ScriptedUpstream(replies={s.key: s.reply for s in SCENARIOS},
                                default_reply="I have no scripted answer for that.")
    with ServerThread(upstream) as up:
        yield make_gateway(upstreams=[{"name": "scripted", "base_url": up.url + "/v1"}],
                           policies_dir=str(default_policies_dir()))


def _records(gw: ServedGateway) -> dict[str, dict[str, Any]]:
    import time
    from pathlib import Path

    import orjson
    proxy = gw.app.proxy
    assert proxy is not None
    deadline = time.monotonic() + 5
    while True:
        sink: Any = proxy.engine.audit  # type: ignore[union-attr]
        if hasattr(sink, "flush"):
            sink.flush()
        path = Path(gw.settings.audit.path or "")
        lines = path.read_bytes().splitlines() if path.exists() else []
        records = [orjson.loads(line) for line in lines if line]
        if len(records) >= 2 or time.monotonic() > deadline:
            return {r["audit_id"]: r for r in records}
        time.sleep(0.02)


def _chat(client: openai.OpenAI, s: Scenario, stream: bool) -> tuple[str, dict[str, str]]:
    kwargs: dict[str, Any] = {"model": "scripted-small", "messages": s.messages(),
                              "extra_headers": {"x-scripted-reply-id": s.key},
                              "metadata": s.metadata}
    if stream:
        raw = client.chat.completions.with_raw_response.create(stream=True, **kwargs)
        text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    else:
        raw = client.chat.completions.with_raw_response.create(**kwargs)
        text = raw.parse().choices[0].message.content or ""
    return text, verity_headers(raw.headers)


def _responses(client: openai.OpenAI, s: Scenario, stream: bool) -> tuple[str, dict[str, str]]:
    kwargs: dict[str, Any] = {"model": "scripted-small", "input": s.messages(),
                              "extra_headers": {"x-scripted-reply-id": s.key},
                              "metadata": s.metadata}
    if stream:
        raw = client.responses.with_raw_response.create(stream=True, **kwargs)
        events = list(raw.parse())
        text = "".join(e.delta for e in events if e.type in (
            "response.output_text.delta", "response.refusal.delta"))
        assert events[-1].type == "response.completed"
        assert _shown(events[-1].response) == text
    else:
        raw = client.responses.with_raw_response.create(**kwargs)
        text = _shown(raw.parse())
    return text, verity_headers(raw.headers)


def _shown(response: Any) -> str:
    """The answer's text, or its refusal (a block is a refusal part, as chat's block is
    the refusal message in the content)."""
    refusals = [p.refusal for item in response.output if item.type == "message"
                for p in item.content if p.type == "refusal"]
    return str(response.output_text or "".join(refusals))


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.key)
def test_a_demo_case_gets_the_same_verdict_both_ways(
        scenario: Scenario, stream: bool, demo: ServedGateway) -> None:
    path = demo.settings.audit.path
    assert path is not None
    with open(path, "wb"):
        pass  # this case's records only
    with openai.OpenAI(base_url=demo.base_url, api_key="sk-demo", max_retries=0,
                       timeout=30) as client:
        chat_text, chat_h = _chat(client, scenario, stream)
        resp_text, resp_h = _responses(client, scenario, stream)
    assert resp_text == chat_text
    chat_id, resp_id = chat_h.pop("x-verity-audit-id"), resp_h.pop("x-verity-audit-id")
    assert resp_h == chat_h
    assert chat_h["x-verity-verdict"]  # the case was verified, not passed through
    records = _records(demo)
    assert _stable(records[resp_id]) == _stable(records[chat_id])


TOOL_RESULT = "The Eiffel Tower is 330 metres tall. It was completed in 1889."
_CHAT_TOOL: Any = [
    {"role": "system", "content": "Answer from the tool results."},
    {"role": "user", "content": "How tall is the Eiffel Tower?"},
    {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "lookup", "arguments": '{"q": "Eiffel Tower"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": TOOL_RESULT}]
_RESPONSES_TOOL: Any = [
    {"role": "user", "content": "How tall is the Eiffel Tower?"},
    {"type": "function_call", "call_id": "call_1", "name": "lookup",
     "arguments": '{"q": "Eiffel Tower"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": TOOL_RESULT}]


@pytest.mark.parametrize("reply", [
    "The Eiffel Tower is 330 metres tall.",
    "The Eiffel Tower is 450 metres tall and was completed in 1925."])
def test_tool_results_ground_the_answer_both_ways(reply: str, demo: ServedGateway) -> None:
    headers = {"x-mock-reply": reply}
    meta = {"verity": "grounding"}
    with openai.OpenAI(base_url=demo.base_url, api_key="sk-demo", max_retries=0,
                       timeout=30) as client:
        chat = client.chat.completions.with_raw_response.create(
            model="scripted-small", messages=_CHAT_TOOL, metadata=meta, extra_headers=headers)
        resp = client.responses.with_raw_response.create(
            model="scripted-small", instructions="Answer from the tool results.",
            input=_RESPONSES_TOOL, metadata=meta, extra_headers=headers)
    chat_h, resp_h = verity_headers(chat.headers), verity_headers(resp.headers)
    for h in (chat_h, resp_h):
        h.pop("x-verity-audit-id")
    assert resp_h == chat_h
    grounded = reply.startswith("The Eiffel Tower is 330")
    assert (chat_h["x-verity-verdict"] == "pass") is grounded
