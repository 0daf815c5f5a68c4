"""The ``nli`` layer against a real scripted OpenAI-compatible server used as the judge.

The scripted server answers each judge prompt by regex on its text, so entailment,
contradiction and neutral cases differ by what the prompt contains.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai
import pytest
from serving import ServedUpstream

from gateway.sources.context import ContextSpec, extract_context
from gateway.upstream.judge import OpenAIJudge
from gateway.layers.nli import NliConfig, NliLayer
from gateway.testing.scripted import Rule
from gateway.settings import JudgeConfig
from gateway.layers.base import (
    JudgeError,
    LayerResources,
    LayerResult,
    LayerUnavailable,
    VerifyInput,
)
from gateway.layers.registry import resolve

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import GatewayFactory

pytestmark = pytest.mark.anyio

CONTEXT = ("Paris is the capital of France. The city has about 2.1 million inhabitants. "
           "The Eiffel Tower was completed in 1889.")
GOOD = "Paris is the capital of France."
BAD = "Paris has 9 million inhabitants."
MODEL = "scripted-small"


def verdicts(*items: tuple[str, Any]) -> str:
    return json.dumps({"results": [{"id": i, "label": label, "confidence": conf,
                                    "reason": f"because {i}"}
                                   for i, (label, conf) in enumerate(items, 1)]})


def exchange(answer: str, context: str | None = CONTEXT, docs: str = "") -> VerifyInput:
    messages: list[dict[str, Any]] = []
    if context:
        messages.append({"role": "system", "content": context})
    if docs:
        messages.append({"role": "system", "content": docs})
    messages.append({"role": "user", "content": "Tell me about Paris."})
    ctx = extract_context(messages, ContextSpec())
    return VerifyInput(messages=messages, response_text=answer, context=ctx, model=MODEL)


@pytest.fixture
async def judge(upstream: ServedUpstream, anyio_backend: str) -> AsyncIterator[OpenAIJudge]:
    j = OpenAIJudge(JudgeConfig(price_per_1k_input=1.0, price_per_1k_output=2.0),
                    upstream.base_url, None)
    yield j
    await j.aclose()


def layer(judge: OpenAIJudge | None, **config: Any) -> NliLayer:
    return NliLayer(NliConfig.model_validate(config), LayerResources(judge=judge))


def judge_calls(upstream: ServedUpstream) -> list[dict[str, Any]]:
    return [r["json"] for r in upstream.requests if r["path"] == "/v1/chat/completions"]


def expected_cost(upstream: ServedUpstream, reply: str) -> float:
    """What the judge prices the scripted server's usage at (1.0 / 2.0 per 1k tokens)."""
    total = 0.0
    for body in judge_calls(upstream):
        prompt = sum(len(str(m["content"]).split()) for m in body["messages"])
        total += (prompt * 1.0 + len(reply.split()) * 2.0) / 1000
    return total


def test_registered_as_nli() -> None:
    assert resolve("nli") is NliLayer


async def test_contradiction_fails_with_seed_scores_failed_claims_and_accounting(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    reply = verdicts(("entailment", 0.9), ("contradiction", 0.8))
    upstream.app.rules = [Rule(r"Hypotheses:.*9 million", reply)]
    result = await layer(judge).verify(exchange(f"{GOOD} {BAD}"))

    assert not result.passed and result.label == "contradiction"
    assert result.score == pytest.approx((0.9 + (1 - 0.8)) / 2)  # entail c, contra 1 - c
    assert result.failed_claims == [BAD]
    assert [(e.text, e.status, e.score) for e in result.evidence] == [
        (GOOD, "entailment", 0.9), (BAD, "contradiction", pytest.approx(0.2))]
    assert result.evidence[1].reason == "because 2"
    assert (result.judge_calls, result.cache_hit) == (1, False)
    assert result.cost == pytest.approx(expected_cost(upstream, reply)) and result.cost > 0
    assert result.details["counts"] == {"entailment": 1, "neutral": 0, "contradiction": 1}

    (sent,) = judge_calls(upstream)  # one batched call: premise + numbered hypotheses
    assert sent["model"] == MODEL and sent["temperature"] == 0.0
    prompt = sent["messages"][-1]["content"]
    assert CONTEXT in prompt and f"1. {GOOD}\n2. {BAD}" in prompt and '"results"' in prompt


async def test_same_exchange_again_is_a_cache_hit_at_no_cost(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(r"Hypotheses:", verdicts(("entailment", 0.95)))]
    nli = layer(judge)
    first = await nli.verify(exchange(GOOD))
    again = await nli.verify(exchange(GOOD))
    assert first.passed and first.score == pytest.approx(0.95) and not first.cache_hit
    assert again.score == first.score and again.cache_hit and again.cost == 0.0
    assert again.judge_calls == 1 and len(judge_calls(upstream)) == 1


async def test_min_aggregate_and_the_contradiction_threshold(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(r"Hypotheses:", verdicts(("entailment", 1.0),
                                                         ("contradiction", 0.4)))]
    weak = await layer(judge).verify(exchange(f"{GOOD} {BAD}"))
    assert weak.passed and weak.failed_claims == []  # 0.4 < contradiction_threshold 0.5
    assert weak.score == pytest.approx((1.0 + 0.6) / 2)
    strict_bar = await layer(judge, contradiction_threshold=0.3, aggregate="min").verify(
        exchange(f"{GOOD} {BAD}"))
    assert not strict_bar.passed and strict_bar.score == pytest.approx(0.6)


async def test_neutral_scores_half_confidence_and_fails_only_when_strict(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(r"Hypotheses:", verdicts(("entailment", 1.0), ("neutral", 0.8)))]
    answer = f"{GOOD} The mayor rides a green bicycle to work."
    lenient = await layer(judge).verify(exchange(answer))
    assert lenient.passed and lenient.score == pytest.approx((1.0 + 0.4) / 2)
    assert lenient.label == "consistent"
    strict = await layer(judge, strict=True).verify(exchange(answer))
    assert not strict.passed and strict.label == "neutral"
    assert strict.failed_claims == ["The mayor rides a green bicycle to work."]


async def test_batches_and_the_hypothesis_bound(upstream: ServedUpstream,
                                                judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(r"Hypotheses:\n1\. Paris has 9", verdicts(("contradiction", 0.9))),
                          Rule(r"Hypotheses:\n1\. ", verdicts(("entailment", 0.9)))]
    one_each = await layer(judge, batch_size=1).verify(exchange(f"{GOOD} {BAD}"))
    assert one_each.judge_calls == 2 and one_each.failed_claims == [BAD]
    upstream.requests.clear()
    bounded = await layer(judge, max_hypotheses=1).verify(exchange(f"{GOOD} {BAD}"))
    assert bounded.passed and [e.text for e in bounded.evidence] == [GOOD]
    assert bounded.cache_hit  # the same single-hypothesis prompt as above
    assert judge_calls(upstream) == []


async def test_long_context_is_cut_to_the_sentences_that_matter(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(r"Hypotheses:", verdicts(("entailment", 0.9)))]
    filler = " ".join(f"Unrelated sentence number {i} mentions gardening tools." for i in range(60))
    result = await layer(judge, max_premise_chars=300).verify(
        exchange(GOOD, context=f"{filler} {CONTEXT}"))
    prompt = judge_calls(upstream)[0]["messages"][-1]["content"]
    assert "Paris is the capital of France." in prompt and "number 7 " not in prompt
    assert result.details["truncated"] is True


DOCS = ('<document id="tower">The Eiffel Tower is 330 metres tall.</document>'
        '<document id="history">The tower was completed in 1889 for the World Fair.</document>')


async def test_cited_claims_are_checked_against_the_source_they_cite(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    """Seed 003: premise = the cited source's text, one judge call per cited source."""
    upstream.app.rules = [
        Rule(r"Hypotheses:\n1\..*\n2\..*\n3\. ", verdicts(*[("entailment", 0.9)] * 3)),
        Rule(r'"""\nThe Eiffel Tower is 330.*Hypotheses:', verdicts(("entailment", 0.9))),
        Rule(r'"""\nThe tower was completed.*Hypotheses:', verdicts(("contradiction", 0.9)))]
    answer = ("The Eiffel Tower is 330 metres tall [tower]. It was completed in 1925 [2]. "
              "It is painted gold every year [9].")
    result = await layer(judge).verify(exchange(answer, context=None, docs=DOCS))
    assert result.details["premise"] == "citations" and result.details["unresolved"] == 1
    assert [(e.source_id, e.status) for e in result.evidence] == [
        ("tower", "entailment"), ("history", "contradiction")]
    assert result.failed_claims == ["It was completed in 1925"]
    assert result.judge_calls == 2
    prompts = [b["messages"][-1]["content"] for b in judge_calls(upstream)]
    assert all("330 metres" not in p or "1889" not in p for p in prompts)  # one source each

    forced = await layer(judge, premise="context").verify(
        exchange(answer, context=None, docs=DOCS))
    assert forced.details["premise"] == "context"  # both documents, every sentence
    assert forced.passed and len(forced.evidence) == 3


async def test_citations_premise_without_resolvable_citations_is_skipped(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    result = await layer(judge, premise="citations").verify(exchange(f"{GOOD} [7]"))
    assert result.skipped and result.passed and result.score == 0.5
    assert judge_calls(upstream) == []


@pytest.mark.parametrize("reply, match", [
    ("Looks fine to me!", "not JSON"),
    (verdicts(("entailment", 0.9)), r"misses items \[2\]"),
    (verdicts(("probably", 0.9), ("entailment", 0.9)), "unknown NLI label"),
    (verdicts(("entailment", "very"), ("entailment", 0.9)), "unusable confidence"),
])
async def test_unusable_judge_replies_raise_judge_error(
        upstream: ServedUpstream, judge: OpenAIJudge, reply: str, match: str) -> None:
    upstream.app.rules = [Rule(r"Hypotheses:", reply)]
    with pytest.raises(JudgeError, match=match):
        await layer(judge).verify(exchange(f"{GOOD} {BAD}"))


async def test_lenient_reply_shapes_are_accepted(upstream: ServedUpstream,
                                                 judge: OpenAIJudge) -> None:
    """A bare list in a code fence, ids as strings, percentages, synonyms."""
    upstream.app.rules = [Rule(r"Hypotheses:", '```json\n[{"id": "2", "label": "Contradicts", '
                               '"confidence": "90%"}, {"id": "1", "label": "entailed"}]\n```')]
    result = await layer(judge).verify(exchange(f"{GOOD} {BAD}"))
    assert [(e.status, e.score) for e in result.evidence] == [
        ("entailment", 1.0), ("contradiction", pytest.approx(0.1))]


async def test_without_a_judge_the_layer_is_unavailable() -> None:
    with pytest.raises(LayerUnavailable, match="needs a judge: configure `judge`"):
        await layer(None).verify(exchange(GOOD))


@pytest.mark.parametrize("answer, context, premise, why", [
    (GOOD, None, "auto", "no grounding context"),
    ("", CONTEXT, "auto", "no checkable answer sentence"),
    ("Hi there!", CONTEXT, "context", "no checkable answer sentence"),
    (f"{GOOD} [7]", CONTEXT, "citations", "no cited source resolves"),
], ids=["no-context", "empty-answer", "nothing-checkable", "no-resolvable-citation"])
async def test_nothing_to_check_is_skipped_even_without_a_judge(
        answer: str, context: str | None, premise: str, why: str) -> None:
    """Skipping comes before needing the judge (as in ``audit`` and ``fact-check``), so
    ``on_error: fail_closed`` without a judge does not fail an answer with nothing to check."""
    result = await layer(None, premise=premise).verify(exchange(answer, context=context))
    assert result.skipped and result.passed and result.score == 0.5
    assert result.label == "skipped" and result.judge_calls == 0
    assert result.explanation == f"nothing to check: {why}"


async def test_without_context_it_is_skipped_and_calls_nothing(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    result: LayerResult = await layer(judge).verify(exchange(GOOD, context=None))
    assert result.skipped and result.passed and result.score == 0.5
    assert result.judge_calls == 0 and "no grounding context" in result.explanation
    assert judge_calls(upstream) == []


async def test_grounding_prefilter_sends_only_unsupported_sentences(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    reply = verdicts(("contradiction", 0.9))
    upstream.app.rules = [Rule(r"Hypotheses:.*9 million", reply)]
    result = await layer(judge, premise="context", prefilter="grounding").verify(
        exchange(f"{GOOD} {BAD}"))
    (sent,) = judge_calls(upstream)
    prompt = sent["messages"][-1]["content"]
    assert f"1. {BAD}" in prompt and GOOD not in prompt.split("Hypotheses:")[1]
    assert not result.passed and result.failed_claims == [BAD]
    assert result.details["prefiltered"] == 1  # GOOD: supported by the context, not sent
    # without the prefilter both sentences go to the judge
    upstream.reset()
    upstream.app.rules = [Rule(r"Hypotheses:.*9 million",
                               verdicts(("entailment", 0.9), ("contradiction", 0.9)))]
    full = await layer(judge, premise="context").verify(exchange(f"{GOOD} {BAD}"))
    assert f"1. {GOOD}\n2. {BAD}" in judge_calls(upstream)[0]["messages"][-1]["content"]
    assert "prefiltered" not in full.details


async def test_grounding_prefilter_skips_a_fully_supported_answer_without_a_judge() -> None:
    result = await layer(None, premise="context", prefilter="grounding").verify(
        exchange(f"{GOOD} The Eiffel Tower was completed in 1889."))
    assert result.skipped and result.passed and result.judge_calls == 0
    assert result.explanation == "nothing to check: grounding supports every checkable sentence"
    assert result.details["prefiltered"] == 2


# -- end to end through a real gateway -----------------------------------------------------

POLICY = """
name: nli-inline
mode: inline
default: true
layers:
  - name: nli
    timeout_ms: 10000
decision: {min_confidence: 0.5}
actions:
  marginal: {type: block}
  fail: {type: block}
"""


def test_gateway_runs_nli_with_the_configured_judge_and_blocks_a_contradiction(
        make_gateway: GatewayFactory, upstream: ServedUpstream, tmp_path: Path,
        make_client: Callable[..., openai.OpenAI]) -> None:
    (tmp_path / "nli.yaml").write_text(POLICY, encoding="utf-8")
    upstream.app.rules = [
        Rule(r"^Where is the Eiffel Tower", "The Eiffel Tower is in Rome."),
        Rule(r"^How tall is the Eiffel Tower", "The Eiffel Tower is 330 metres tall."),
        Rule(r"Hypotheses:.*Rome", verdicts(("contradiction", 0.95))),
        Rule(r"Hypotheses:", verdicts(("entailment", 0.95)))]
    gw = make_gateway(policies_dir=str(tmp_path), reload_policies=False,
                      judge={"model": "scripted-large", "cache_size": 0})
    client = make_client(gw.base_url)
    system: Any = {"role": "system", "content": "The Eiffel Tower is a 330 metres tall tower in Paris."}

    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[system, {"role": "user", "content": "Where is the Eiffel Tower?"}])
    blocked = raw.parse()
    assert raw.headers["x-verity-layers"].startswith("nli=")
    assert raw.headers["x-verity-layers"].endswith(":fail")
    assert raw.headers["x-verity-action"] == "block"
    assert blocked.choices[0].finish_reason == "content_filter"
    assert "Rome" not in (blocked.choices[0].message.content or "")
    judged = [r["json"] for r in upstream.requests
              if "Hypotheses:" in str(r["json"]["messages"][-1]["content"])]
    assert len(judged) == 1 and judged[0]["model"] == "scripted-large"  # judge.model wins

    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[system, {"role": "user", "content": "How tall is the Eiffel Tower?"}])
    assert raw.parse().choices[0].message.content == "The Eiffel Tower is 330 metres tall."
    assert raw.headers["x-verity-layers"].endswith(":pass")
    assert raw.headers["x-verity-action"] == "pass"
    gw.stop()
