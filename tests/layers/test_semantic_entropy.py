"""The ``semantic-entropy`` layer against a real scripted server used as the judge.

Sampling needs different answers to the same question, which a rule-based server
cannot give; this module's server (a :class:`ScriptedUpstream` under uvicorn) hands
out ``samples`` in turn to the question and answers everything else by its rules
(the clustering prompt, by regex).
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from serving import ServedUpstream

from gateway.sources.context import GroundingContext
from gateway.upstream.judge import OpenAIJudge
from gateway.layers.semantic_entropy import (
    SemanticEntropyConfig,
    SemanticEntropyLayer,
    cluster,
    normalised_entropy,
)
from gateway.testing.scripted import Rule, ScriptedUpstream
from gateway.testing.servers import ServerThread
from gateway.settings import JudgeConfig
from gateway.layers.base import JudgeError, LayerResources, LayerUnavailable, VerifyInput
from gateway.layers.registry import resolve

pytestmark = pytest.mark.anyio

MODEL = "scripted-small"
QUESTION = "What is the capital of France?"


@dataclass
class SamplingUpstream(ScriptedUpstream):
    samples: list[str] = field(default_factory=list)
    """Answers to QUESTION, one per request, in order."""

    def answer(self, headers: Mapping[str, str], user_text: str) -> str:
        if user_text.startswith(QUESTION) and self.samples:
            return self.samples.pop(0)
        return super().answer(headers, user_text)


@pytest.fixture(scope="module")
def sampler_server() -> Iterator[ServedUpstream]:
    app = SamplingUpstream()
    with ServerThread(app) as server:
        yield ServedUpstream(app, server)


@pytest.fixture
def sampler(sampler_server: ServedUpstream) -> ServedUpstream:
    sampler_server.reset()
    sampler_server.app.samples.clear()
    return sampler_server


@pytest.fixture
async def judge(sampler: ServedUpstream, anyio_backend: str) -> AsyncIterator[OpenAIJudge]:
    j = OpenAIJudge(JudgeConfig(price_per_1k_input=1.0, price_per_1k_output=2.0),
                    sampler.base_url, None)
    yield j
    await j.aclose()


def exchange(answer: str, messages: list[dict[str, Any]] | None = None) -> VerifyInput:
    return VerifyInput(messages=messages or [{"role": "user", "content": QUESTION}],
                       response_text=answer, context=GroundingContext(), model=MODEL)


def layer(judge: OpenAIJudge | None, **config: Any) -> SemanticEntropyLayer:
    return SemanticEntropyLayer(SemanticEntropyConfig.model_validate(config),
                                LayerResources(judge=judge))


def sample(upstream: ServedUpstream, *texts: str) -> None:
    upstream.app.samples[:] = list(texts)


def bodies(upstream: ServedUpstream) -> list[dict[str, Any]]:
    return [r["json"] for r in upstream.requests if r["path"] == "/v1/chat/completions"]


def test_registered_as_semantic_entropy() -> None:
    assert resolve("semantic-entropy") is SemanticEntropyLayer


def test_entropy_scale_and_greedy_clustering() -> None:
    assert normalised_entropy([5]) == 0.0
    assert normalised_entropy([1, 1, 1, 1, 1]) == pytest.approx(1.0)
    four_one = -(0.8 * math.log(0.8) + 0.2 * math.log(0.2)) / math.log(5)
    assert normalised_entropy([4, 1]) == pytest.approx(four_one) == pytest.approx(0.3109, abs=1e-4)
    assert cluster(4, lambda a, b: a % 2 == b % 2) == [[0, 2], [1, 3]]


async def test_agreeing_samples_pass_and_sampling_is_accounted(
        sampler: ServedUpstream, judge: OpenAIJudge) -> None:
    sample(sampler, "Paris.", "It is Paris.", "The capital is Paris.", "Paris", "paris!")
    result = await layer(judge, clustering="lexical").verify(
        exchange("The capital of France is Paris."))
    assert result.passed and result.label == "consistent" and result.score == 1.0
    assert result.details["clusters"] == [5] and result.details["entropy"] == 0.0
    assert result.details["answer_in_largest"] is True and result.failed_claims == []
    assert (result.judge_calls, result.cache_hit) == (1, False)  # one complete(n=5) call
    sent = bodies(sampler)
    assert len(sent) == 5 and sent[0]["n"] == 5  # the server ignores n: the judge re-asks
    assert sent[0]["temperature"] == 1.0 and sent[0]["model"] == MODEL
    assert sent[0]["messages"] == [{"role": "user", "content": QUESTION}]
    expected = sum(len(QUESTION.split()) * 1.0 + 2.0 * n
                   for n in (1, 3, 4, 1, 1)) / 1000  # each sample's words cost output price
    assert result.cost == pytest.approx(expected)


async def test_confident_samples_that_disagree_with_the_answer_fail_it(
        sampler: ServedUpstream, judge: OpenAIJudge) -> None:
    sample(sampler, *["Paris."] * 5)
    result = await layer(judge, clustering="lexical").verify(
        exchange("The capital of France is Lyon."))
    assert not result.passed and result.label == "minority" and result.score == 0.0
    assert result.details["entropy"] == 0.0 and result.details["agreement"] == 0.0
    assert result.failed_claims == ["The capital of France is Lyon."]
    assert [(e.status, e.score) for e in result.evidence] == [("minority", 0.0),
                                                              ("majority", 1.0)]
    sample(sampler, *["Paris."] * 5)
    lenient = await layer(judge, clustering="lexical", require_majority=False).verify(
        exchange("The capital of France is Lyon."))
    assert lenient.passed and lenient.score == 0.0


async def test_scattered_samples_are_uncertain(sampler: ServedUpstream,
                                               judge: OpenAIJudge) -> None:
    sample(sampler, "Paris", "Lyon", "Marseille", "Nice", "Paris")
    result = await layer(judge, clustering="lexical").verify(exchange("Paris."))
    assert not result.passed and result.label == "uncertain"
    assert sorted(result.details["clusters"]) == [1, 1, 1, 2]
    h = normalised_entropy([2, 1, 1, 1])
    assert result.details["entropy"] == pytest.approx(h)
    assert result.score == pytest.approx(1 - h)  # the answer is in the largest cluster


async def test_one_dissent_in_five_is_above_the_seed_threshold(
        sampler: ServedUpstream, judge: OpenAIJudge) -> None:
    sample(sampler, "Paris", "Paris", "Lyon", "Paris", "Paris")
    strict = await layer(judge, clustering="lexical").verify(exchange("Paris."))
    assert not strict.passed and strict.details["entropy"] == pytest.approx(0.3109, abs=1e-4)
    sample(sampler, "Paris", "Paris", "Lyon", "Paris", "Paris")
    relaxed = await layer(judge, clustering="lexical", threshold=0.35).verify(exchange("Paris."))
    assert relaxed.passed and relaxed.score == pytest.approx(1 - 0.3109, abs=1e-4)


ENTAIL_SAMPLES = ("Paris.", "The capital is Paris.", "Lyon.", "Paris.", "It's Paris, of course.")
ANSWER = "Paris is the capital."
# distinct texts in order: ANSWER, Paris., The capital is Paris., Lyon., It's Paris… (5)
PAIRS = [(a, b) for a in range(5) for b in range(a + 1, 5)]


def equivalences(same: Any) -> str:
    return json.dumps({"results": [{"id": n, "equivalent": same(a, b)}
                                   for n, (a, b) in enumerate(PAIRS, 1)]})


async def test_entailment_clustering_asks_the_judge_once_for_every_distinct_pair(
        sampler: ServedUpstream, judge: OpenAIJudge) -> None:
    sample(sampler, *ENTAIL_SAMPLES)
    sampler.app.rules = [Rule(r"^Question: .*Pairs:", equivalences(lambda a, b: 3 not in (a, b)))]
    result = await layer(judge, threshold=0.35).verify(exchange(ANSWER))
    assert result.passed and result.details["clusters"] == [4, 1]
    assert result.details["answer_in_largest"] is True
    assert result.judge_calls == 2 and not result.cache_hit  # sampling + one clustering call
    prompt = bodies(sampler)[-1]["messages"][-1]["content"]
    assert f"A1. {ANSWER}\nA2. Paris.\nA3. The capital is Paris.\nA4. Lyon.\n" in prompt
    assert "10. A4 and A5" in prompt and "11. " not in prompt  # duplicates are not asked
    assert bodies(sampler)[-1]["temperature"] == 0.0


async def test_entailment_clustering_keeps_apart_what_the_judge_calls_different(
        sampler: ServedUpstream, judge: OpenAIJudge) -> None:
    sample(sampler, *ENTAIL_SAMPLES)  # the judge says only identical texts match
    sampler.app.rules = [Rule(r"^Question: .*Pairs:", equivalences(lambda a, b: False))]
    split = await layer(judge).verify(exchange(ANSWER))
    assert not split.passed and sorted(split.details["clusters"]) == [0, 1, 1, 1, 2]
    assert split.details["answer_in_largest"] is False and split.score == 0.0


async def test_identical_samples_need_no_clustering_call(sampler: ServedUpstream,
                                                         judge: OpenAIJudge) -> None:
    sample(sampler, *["Paris."] * 3)
    result = await layer(judge, samples=3).verify(exchange("Paris."))
    assert result.passed and result.judge_calls == 1 and len(bodies(sampler)) == 3


@pytest.mark.parametrize("reply, match", [
    ("They all mean Paris.", "not JSON"),
    (json.dumps({"results": [{"id": 1, "equivalent": True}]}), "misses items"),
    (json.dumps({"results": [{"id": n, "equivalent": "perhaps"} for n in range(1, 11)]}),
     "no usable 'equivalent'"),
])
async def test_unusable_clustering_replies_raise_judge_error(
        sampler: ServedUpstream, judge: OpenAIJudge, reply: str, match: str) -> None:
    sample(sampler, *ENTAIL_SAMPLES)
    sampler.app.rules = [Rule(r"^Question: .*Pairs:", reply)]
    with pytest.raises(JudgeError, match=match):
        await layer(judge).verify(exchange(ANSWER))


async def test_the_request_conversation_is_resampled_as_plain_turns(
        sampler: ServedUpstream, judge: OpenAIJudge) -> None:
    sample(sampler, *["Paris."] * 2)
    messages: list[dict[str, Any]] = [{"role": "developer", "content": "Answer briefly."},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "t"}]},
                {"role": "tool", "tool_call_id": "t", "content": "France: capital Paris"},
                {"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    await layer(judge, samples=2, clustering="lexical").verify(exchange("Paris.", messages))
    assert bodies(sampler)[0]["messages"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Tool result:\nFrance: capital Paris"},
        {"role": "user", "content": QUESTION}]


async def test_without_a_judge_the_layer_is_unavailable() -> None:
    with pytest.raises(LayerUnavailable, match="needs a judge"):
        await layer(None).verify(exchange("Paris."))


async def test_no_question_is_skipped_even_without_a_judge() -> None:
    """Skipping comes before needing the judge (as in ``audit`` and ``fact-check``)."""
    result = await layer(None).verify(
        exchange("Paris.", [{"role": "system", "content": "Be brief."}]))
    assert result.skipped and result.passed and result.score == 0.5
    assert result.judge_calls == 0
    assert result.explanation == "nothing to check: the request has no question"


async def test_no_question_is_skipped(sampler: ServedUpstream, judge: OpenAIJudge) -> None:
    result = await layer(judge).verify(
        exchange("Paris.", [{"role": "system", "content": "Be brief."}]))
    assert result.skipped and result.passed and result.judge_calls == 0
    assert bodies(sampler) == []
