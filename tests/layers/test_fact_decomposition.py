"""The ``fact-decomposition`` layer (seed 000 §2) against a real scripted judge server.

The scripted upstream answers the decompose call (marker
``[verity:fact-decomposition:decompose]``) and the check call
(``[verity:fact-decomposition:check]``) with the JSON their prompts ask for.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
import pytest
from serving import ServedUpstream

from gateway.layers._fact_decomposition_prompts import (
    DECOMPOSE_SCHEMA,
    MARK_CHECK,
    MARK_DECOMPOSE,
    check_schema,
)
from gateway.layers.base import (
    JudgeError,
    LayerResources,
    LayerResult,
    LayerUnavailable,
    VerifyInput,
)
from gateway.layers.fact_decomposition import (
    FactDecompositionConfig,
    FactDecompositionLayer,
    parse_claims,
)
from gateway.layers.registry import resolve
from gateway.settings import JudgeConfig
from gateway.sources.context import ContextSpec, extract_context
from gateway.testing.scripted import Rule
from gateway.upstream.judge import OpenAIJudge

pytestmark = pytest.mark.anyio

CONTEXT = ("The Orion bridge opened in 1998. It is 1,200 meters long. "
           "The bridge carries four lanes of traffic.")
ANSWER = ("The Orion bridge opened in 1998 and is 1,500 meters long. It was designed by "
          "Marta Kell. I think it is the prettiest bridge in the country.")
DECOMPOSE = r"\[verity:fact-decomposition:decompose\]"
CHECK = r"\[verity:fact-decomposition:check\]"
CLAIMS = [("The Orion bridge opened in 1998.", "factual"),
          ("The Orion bridge is 1,500 meters long.", "factual"),
          ("The Orion bridge was designed by Marta Kell.", "factual"),
          ("The Orion bridge is the prettiest bridge in the country.", "opinion")]


def claims_reply(claims: list[tuple[str, str]] = CLAIMS) -> str:
    return orjson.dumps({"claims": [{"claim": c, "type": t} for c, t in claims]}).decode()


def check_reply(verdicts: list[bool], conf: float = 0.9) -> str:
    return orjson.dumps({"results": [{"id": i, "verified": v, "confidence": conf,
                                      "reason": "r"} for i, v in enumerate(verdicts, 1)]}
                        ).decode()


def inp(answer: str = ANSWER, context: str = CONTEXT) -> VerifyInput:
    messages = [{"role": "system", "content": context}] if context else []
    messages.append({"role": "user", "content": "Tell me about the Orion bridge."})
    return VerifyInput(messages=messages, response_text=answer, model="scripted-small",
                       context=extract_context(messages, ContextSpec()))


@pytest.fixture
async def judge(upstream: ServedUpstream) -> AsyncIterator[OpenAIJudge]:
    j = OpenAIJudge(JudgeConfig(cache_size=0), upstream.base_url, None)
    yield j
    await j.aclose()


async def run(judge: Any, vi: VerifyInput | None = None,
              corpus: Mapping[str, str] | None = None, **config: Any) -> LayerResult:
    layer = FactDecompositionLayer(FactDecompositionConfig.model_validate(config),
                                   LayerResources(judge=judge, corpus=corpus or {}))
    return await layer.verify(vi or inp())


def prompts(upstream: ServedUpstream, marker: str) -> list[str]:
    return [r["json"]["messages"][-1]["content"] for r in upstream.requests
            if r["json"]["messages"][-1]["content"].startswith(marker)]


def test_registered() -> None:
    assert resolve("fact-decomposition") is FactDecompositionLayer


async def test_context_supported_claims_skip_the_judge_and_the_rest_are_checked(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(DECOMPOSE, claims_reply()),
                          Rule(CHECK, check_reply([False, True]))]
    r = await run(judge)
    # "opened in 1998" is in the context: verified with no judge call; the length
    # (context says 1,200) and the designer go to the judge, the opinion nowhere.
    (decompose,) = prompts(upstream, MARK_DECOMPOSE)
    assert ANSWER in decompose and "Tell me about the Orion bridge." in decompose
    (check,) = prompts(upstream, MARK_CHECK)
    assert "1. The Orion bridge is 1,500 meters long." in check
    assert "2. The Orion bridge was designed by Marta Kell." in check
    assert "opened in 1998" in check  # the relevant context is shown...
    assert "prettiest" not in check and "3." not in check.split("Claims:")[1]
    assert r.judge_calls == 2
    assert r.score == pytest.approx(2 / 3) and not r.passed and r.label == "partial"
    assert r.failed_claims == ["The Orion bridge is 1,500 meters long."]
    assert r.details["by_source"] == {"context": 1, "corpus": 0, "judge": 2}
    assert r.details["types"] == {"factual": 3, "opinion": 1, "inference": 0, "uncertain": 0}
    first = r.details["claims"][0]
    assert first == {"n": 1, "type": "factual", "verified": True, "source": "context",
                     "source_id": "system-1", "confidence": first["confidence"]}
    assert "claim" not in first and ANSWER[:20] not in orjson.dumps(r.details).decode()
    assert [e.status for e in r.evidence] == ["verified", "unverified", "verified"]
    assert r.evidence[0].source_span == "The Orion bridge opened in 1998."
    assert "Orion" not in r.explanation  # explanations never quote the answer


async def test_everything_supported_needs_only_the_decompose_call(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(DECOMPOSE, claims_reply(
        [("The Orion bridge opened in 1998.", "factual"),
         ("The bridge carries four lanes of traffic.", "factual")]))]
    r = await run(judge, inp("The Orion bridge opened in 1998 and carries four lanes."))
    assert r.judge_calls == 1 and not prompts(upstream, MARK_CHECK)
    assert r.passed and r.score == 1.0 and r.label == "verified"


async def test_a_contradicted_or_loosely_covered_claim_goes_to_the_judge(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    # Every word of "did not open in 1998" is in the context sentence, but the grounding
    # check sees the negation flip; "closed in 1998" is not contradicted, but its best
    # sentence covers too little of it. The judge decides both.
    upstream.app.rules = [Rule(DECOMPOSE, claims_reply(
        [("The Orion bridge opened in 1998.", "factual"),
         ("The Orion bridge did not open in 1998.", "factual"),
         ("The Orion bridge closed in 1998.", "factual")])),
        Rule(CHECK, check_reply([False, False]))]
    r = await run(judge, inp("It opened in 1998, or not, and closed in 1998."))
    (check,) = prompts(upstream, MARK_CHECK)
    assert "1. The Orion bridge did not open in 1998." in check
    assert "2. The Orion bridge closed in 1998." in check
    assert r.details["by_source"] == {"context": 1, "corpus": 0, "judge": 2}
    assert r.score == pytest.approx(1 / 3)


async def test_the_corpus_is_factual_memory_too(upstream: ServedUpstream,
                                                judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(DECOMPOSE, claims_reply(
        [("Marta Kell designed the Orion bridge.", "factual")]))]
    corpus = {"kell-bio": "Marta Kell designed the Orion bridge. She studied in Delft."}
    r = await run(judge, inp("It was designed by Marta Kell."), corpus=corpus)
    assert r.passed and r.judge_calls == 1
    assert r.details["claims"][0]["source"] == "corpus"
    assert r.details["claims"][0]["source_id"] == "kell-bio"
    upstream.app.rules.append(Rule(CHECK, check_reply([True])))
    r = await run(judge, inp("It was designed by Marta Kell."), corpus=corpus,
                  use_corpus=False)
    assert r.judge_calls == 2 and r.details["claims"][0]["source"] == "judge"


async def test_without_context_every_claim_goes_to_the_judge(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(DECOMPOSE, claims_reply(CLAIMS[:1])),
                          Rule(CHECK, check_reply([True]))]
    r = await run(judge, inp(context=""))
    (check,) = prompts(upstream, MARK_CHECK)
    assert "Context:" not in check and "your own knowledge" in check
    assert r.passed and r.details["by_source"]["judge"] == 1


async def test_no_factual_claim_is_skipped_after_the_call(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(DECOMPOSE, claims_reply([CLAIMS[3]]))]
    r = await run(judge)
    assert r.skipped and r.passed and r.label == "no_factual_claims" and r.judge_calls == 1


async def test_nothing_checkable_is_skipped_without_a_judge() -> None:
    r = await run(None, inp("Yes."))
    assert r.skipped and r.judge_calls == 0
    with pytest.raises(LayerUnavailable):
        await run(None)


async def test_unusable_replies_are_judge_errors(upstream: ServedUpstream,
                                                 judge: OpenAIJudge) -> None:
    upstream.app.rules = [Rule(DECOMPOSE, "I cannot do that.")]
    with pytest.raises(JudgeError, match="not JSON"):
        await run(judge)
    upstream.app.rules = [Rule(DECOMPOSE, claims_reply([("x y z.", "rumour")]))]
    with pytest.raises(JudgeError, match="unknown claim type") as info:
        await run(judge)
    assert "rumour" not in str(info.value)  # shapes, never model text
    upstream.app.rules = [Rule(DECOMPOSE, claims_reply()), Rule(CHECK, check_reply([True]))]
    with pytest.raises(JudgeError, match="misses items"):
        await run(judge)  # two claims asked, one answered


def test_parse_claims_is_lenient_about_shape() -> None:
    assert parse_claims('```json\n{"facts": [{"claim": "A b c.", "type": "Fact"}]}\n```') \
        == [("A b c.", "factual")]
    assert parse_claims('[{"text": "  A\\n b. ", "label": "hedged"}, {"claim": ""}, 3]') \
        == [("A b.", "uncertain")]


def test_reply_schemas_match_what_is_parsed() -> None:
    item = DECOMPOSE_SCHEMA.schema["properties"]["claims"]["items"]
    assert item["properties"]["type"]["enum"] == ["factual", "opinion", "inference",
                                                  "uncertain"]
    results = check_schema(2).schema["properties"]["results"]
    assert (results["minItems"], results["maxItems"]) == (2, 2)
    assert results["items"]["required"] == ["id", "verified", "confidence"]
