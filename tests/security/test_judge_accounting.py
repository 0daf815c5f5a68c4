"""Judge calls of a layer that then fails are counted, billed and budgeted (issue 10, item 8).

A layer whose judge reply it cannot use fails — but the calls were made and the judge
bills them. A real gateway in front of a recording judge server (it counts every call
it receives and reports fixed usage per call) must account for exactly those calls in
the audit record: ``judge_calls``, ``cost`` and tokens per layer, per regenerate
attempt, and the cost budget must see them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
import yaml

from gateway.sources.context import ContextSpec, extract_context
from gateway.policy.loader import ResolvedLayer, load_policy_text
from gateway.telemetry import RequestTrace, Telemetry
from gateway.layers.base import JudgeReply, Layer, LayerResources, VerifyInput
from gateway.verify.pipeline import Budget, run_pipeline
from security.fake_judge import FakeJudge, serve_judge

CONTEXT = ("The Eiffel Tower in Paris was completed in 1889. The tower is 330 metres tall. "
           "Gustave Eiffel's company designed and built the tower.")
ANSWER = "The Eiffel Tower was completed in 1889 and is 330 metres tall."
MESSAGES = [{"role": "system", "content": CONTEXT},
            {"role": "user", "content": "Tell me about the Eiffel Tower."}]
LAYERS = ("nli", "self-consistency", "semantic-entropy", "audit", "fact-check")
PRICE_IN, PRICE_OUT = 1.0, 2.0  # USD per 1k tokens
TOKENS_IN, TOKENS_OUT = 100, 20  # what the fake judge reports per call
PER_CALL = (TOKENS_IN * PRICE_IN + TOKENS_OUT * PRICE_OUT) / 1000


@pytest.fixture
def judge() -> Iterator[tuple[FakeJudge, str]]:
    fake = FakeJudge(reply="I cannot answer in JSON, sorry.")  # every layer fails on it
    with serve_judge(fake) as url:
        yield fake, url


def start(make_gateway: Callable[..., Any], tmp_path: Path, judge_url: str,
          policy: dict[str, Any]) -> tuple[Any, Path]:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "p.yaml").write_text(yaml.safe_dump({"name": "p", "default": True, **policy}))
    audit = tmp_path / "audit.jsonl"
    gw = make_gateway(policies_dir=str(policies), reload_policies=False,
                      audit={"path": str(audit)},
                      judge={"base_url": judge_url, "model": "judge-model", "cache_size": 0,
                             "price_per_1k_input": PRICE_IN, "price_per_1k_output": PRICE_OUT})
    return gw, audit


def records(gw: Any, audit: Path) -> list[dict[str, Any]]:
    gw.stop()  # flushes the audit writer
    return [orjson.loads(line) for line in audit.read_bytes().splitlines()]


def test_failed_layers_account_for_every_call_the_judge_received(
        judge: tuple[FakeJudge, str], make_gateway: Callable[..., Any], upstream: Any,
        tmp_path: Path, make_client: Callable[..., openai.OpenAI]) -> None:
    fake, url = judge
    upstream.app.default_reply = ANSWER
    gw, audit = start(make_gateway, tmp_path, url, {
        "mode": "inline", "budget": {"total_ms": 120000},
        "layers": [{"name": layer, "timeout_ms": 60000} for layer in LAYERS]})
    answer = make_client(gw).chat.completions.create(model="scripted-small", messages=MESSAGES)
    assert answer.choices[0].message.content == ANSWER  # fail_open: delivered

    (rec,) = records(gw, audit)
    layers = {layer["key"]: layer for layer in rec["layers"]}
    assert set(layers) == set(LAYERS)
    for key, layer in layers.items():
        assert layer["error"].startswith("JudgeError: "), key
        assert layer["judge_calls"] >= 1, key  # it asked before it failed
        assert layer["cost"] == pytest.approx(layer["judge_calls"] * PER_CALL), key
        assert layer["judge_input_tokens"] == layer["judge_calls"] * TOKENS_IN, key
        assert layer["judge_output_tokens"] == layer["judge_calls"] * TOKENS_OUT, key
    assert sum(layer["judge_calls"] for layer in layers.values()) == fake.calls > len(LAYERS)


def test_the_cost_budget_sees_the_calls_of_failed_layers(
        judge: tuple[FakeJudge, str], make_gateway: Callable[..., Any], upstream: Any,
        tmp_path: Path, make_client: Callable[..., openai.OpenAI]) -> None:
    """One judge call costs more than the budget: the regenerate attempt must not call
    the judge again (it did, seeing a spend of 0), and it is not verified, so the
    fail_closed policy's fallback blocks the answer."""
    fake, url = judge
    upstream.app.default_reply = ANSWER
    gw, audit = start(make_gateway, tmp_path, url, {
        "mode": "inline", "on_error": "fail_closed",
        "budget": {"total_ms": 120000, "max_cost": PER_CALL / 2},
        "layers": [{"name": "nli", "timeout_ms": 60000}],
        "actions": {"fail": {"type": "regenerate", "max_attempts": 1,
                             "fallback": {"type": "block", "message": "blocked"}}}})
    answer = make_client(gw).chat.completions.create(model="scripted-small", messages=MESSAGES)
    assert answer.choices[0].message.content == "blocked"

    assert fake.calls == 1  # the attempt saw the first call's cost: the judge got no second
    (rec,) = records(gw, audit)
    first, second = rec["attempt_history"]
    assert (first["judge_calls"], first["cost"]) == (1, pytest.approx(PER_CALL))
    assert (first["judge_input_tokens"], first["judge_output_tokens"]) == (TOKENS_IN, TOKENS_OUT)
    assert (second["judge_calls"], second["cost"], second["verdict"]) == (0, 0.0, "fail")
    assert rec["layers"][0]["error"] == "cost budget exhausted"
    assert fake.calls == 1 == sum(a["judge_calls"] for a in rec["attempt_history"])


class _StuckJudge:
    """A judge whose calls never come back (until the layer's timeout cancels them)."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages: Sequence[Mapping[str, Any]], *,
                       temperature: float = 0.0, max_tokens: int = 512, n: int = 1,
                       model: str | None = None, override: str | None = None) -> JudgeReply:
        self.calls += 1
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@pytest.mark.anyio
async def test_a_call_cut_by_the_layer_timeout_is_still_counted() -> None:
    stuck = _StuckJudge()
    policy = load_policy_text("layers: [{name: nli, timeout_ms: 50}]\n", name="p")

    def layer_for(rl: ResolvedLayer) -> Layer:
        return rl.cls(rl.config, LayerResources(judge=stuck))  # type: ignore[call-arg]

    inp = VerifyInput(messages=MESSAGES, response_text=ANSWER,
                      context=extract_context(MESSAGES, ContextSpec()), model="m")
    v = await run_pipeline(policy, inp, layer_for=layer_for, trace=RequestTrace(),
                           telemetry=Telemetry(), budget=Budget(total_ms=10000))
    (outcome,) = v.layers
    assert outcome.error == "timeout after 50 ms"
    assert outcome.judge_calls == stuck.calls == 1 and outcome.cost == 0.0
