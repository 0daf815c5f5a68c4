"""Structured output, the ``n`` fallback and the repair retry, against real servers.

A scripted judge (``gateway.testing.judge.StructuredJudge``, under uvicorn on
loopback) behaves as the servers measured in docs/design/judge-structured-output.md:
llama-cpp-python refuses ``json_schema`` with a 500 naming ``response_format`` and
constrains ``json_object`` + ``schema``; OpenAI enforces ``json_schema``; some servers
accept the fields and ignore them. The judge walks its chain once per model and
remembers; the layers read replies leniently and repair once, quoting the problem.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gateway.layers._audit_prompts import ITEM_CHARS
from gateway.layers.audit import AuditConfig, AuditLayer
from gateway.layers.base import JudgeError, LayerResources, VerifyInput, metered
from gateway.layers.nli import NliConfig, NliLayer
from gateway.layers.semantic_entropy import SemanticEntropyConfig, SemanticEntropyLayer
from gateway.settings import JudgeConfig
from gateway.sources.context import ContextSpec, extract_context
from gateway.testing.judge import StructuredJudge
from gateway.testing.servers import ServerThread
from gateway.upstream.judge import OpenAIJudge

pytestmark = pytest.mark.anyio

CONTEXT = "The Eiffel Tower in Paris was completed in 1889. It is 330 metres tall."
ANSWER = "The Eiffel Tower was completed in 1889. The tower is 330 metres tall."
SECRET = "THE-JUDGE-REPLY-TEXT must never be quoted"


@pytest.fixture
def served() -> Iterator[tuple[StructuredJudge, str]]:
    app = StructuredJudge()
    with ServerThread(app) as server:
        yield app, server.url + "/v1"


def inp(answer: str = ANSWER) -> VerifyInput:
    messages = [{"role": "system", "content": CONTEXT},
                {"role": "user", "content": "Tell me about the Eiffel Tower."}]
    return VerifyInput(messages=messages, response_text=answer,
                       context=extract_context(messages, ContextSpec()), model="judge-m")


def nli(judge: OpenAIJudge) -> NliLayer:
    return NliLayer(NliConfig(), LayerResources(judge=judge))


def formats(app: StructuredJudge) -> list[str | None]:
    return [(b.get("response_format") or {}).get("type") for b in app.bodies]


async def test_llama_cpp_python_refuses_json_schema_then_json_object_is_remembered(
        served: tuple[StructuredJudge, str]) -> None:
    app, url = served
    app.json_schema = "reject"  # HTTP 500 naming response_format, as llama-cpp-python
    judge = OpenAIJudge(JudgeConfig(cache_size=0), url, None)
    try:
        with metered() as usage:
            first = await nli(judge).verify(inp())
        again = await nli(judge).verify(inp())
    finally:
        await judge.aclose()
    assert first.label == "entailment" and again.label == "entailment"  # parsed, both times
    assert formats(app) == ["json_schema", "json_object", "json_object"]
    assert judge.modes == {"judge-m": "json_object"}
    sent = app.bodies[1]["response_format"]
    assert sent["schema"]["properties"]["results"]["minItems"] == 2  # the call's own schema
    assert first.judge_calls == 1 == usage.calls  # the refused request is the judge's own


async def test_an_openai_like_server_gets_a_strict_named_json_schema(
        served: tuple[StructuredJudge, str]) -> None:
    app, url = served
    judge = OpenAIJudge(JudgeConfig(), url, None)
    try:
        result = await nli(judge).verify(inp())
    finally:
        await judge.aclose()
    assert not result.skipped and result.judge_calls == 1
    (body,) = app.bodies
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == "nli_verdicts"
    item = fmt["json_schema"]["schema"]["properties"]["results"]["items"]
    assert item["additionalProperties"] is False and set(item["required"]) == set(
        item["properties"])
    assert item["properties"]["id"] == {"enum": [1, 2]}


async def test_an_ignored_format_is_dropped_and_the_layer_repairs_then_fails_cleanly(
        served: tuple[StructuredJudge, str]) -> None:
    app, url = served
    app.json_schema = app.json_object = "ignore"
    app.prose = SECRET
    judge = OpenAIJudge(JudgeConfig(cache_size=0, price_per_1k_input=1.0), url, None)
    try:
        with metered() as usage, pytest.raises(JudgeError) as failed:
            await nli(judge).verify(inp())
    finally:
        await judge.aclose()
    message = str(failed.value)
    assert message.startswith("judge reply is not JSON") and "repair" in message
    assert "JUDGE-REPLY" not in message
    # Two calls (the first and its one repair), both counted and billed.
    assert usage.calls == 2 == len(app.bodies) and usage.cost == pytest.approx(0.2)
    # The first not-JSON reply dropped json_schema; the repair went as json_object.
    assert formats(app) == ["json_schema", "json_object"]
    repair = app.bodies[1]["messages"][-1]["content"]
    assert "could not be used: judge reply is not JSON" in repair
    assert "JUDGE-REPLY" not in repair and SECRET not in repair


async def test_a_repair_quoting_the_problem_rescues_a_partial_reply(
        served: tuple[StructuredJudge, str]) -> None:
    app, url = served
    app.json_schema = "ignore"
    app.script = ['Here you go:\n```json\n{"results": [{"id": 1, "label": "entailment",'
                  ' "confidence": "high"},]}\n```\nNote: {see above}',  # item 2 missing
                  '{"results": [{"id": 1, "label": "entailment", "confidence": "high"}, '
                  '{"id": 2, "label": "contradiction", "confidence": "high"}]}']
    judge = OpenAIJudge(JudgeConfig(cache_size=0), url, None)
    try:
        result = await nli(judge).verify(inp())
    finally:
        await judge.aclose()
    assert result.label == "contradiction" and result.failed_claims == [
        "The tower is 330 metres tall."]
    assert result.judge_calls == 2 and result.details["judge_repairs"] == 1
    repair = app.bodies[1]["messages"][-1]["content"]
    assert "judge reply misses items [2] of 1..2" in repair
    assert "entailment" not in repair.split("could not be used")[1]  # not the reply


async def test_a_reply_cut_at_max_tokens_is_its_own_error_and_not_repaired(
        served: tuple[StructuredJudge, str]) -> None:
    app, url = served
    app.json_schema = "ignore"
    app.script = ['{"results": [{"id": 1, "label": "entail']
    app.truncate = {0}
    judge = OpenAIJudge(JudgeConfig(cache_size=0), url, None)
    try:
        with pytest.raises(JudgeError, match="cut at max_tokens"):
            await nli(judge).verify(inp())
    finally:
        await judge.aclose()
    assert len(app.bodies) == 1
    assert judge.modes == {"judge-m": "json_schema"}  # a cut reply says nothing of the mode


async def test_an_error_that_does_not_name_the_format_keeps_the_mode(
        served: tuple[StructuredJudge, str]) -> None:
    app, url = served
    app.json_schema = "error"  # a 503 outage is not a refusal of the format
    judge = OpenAIJudge(JudgeConfig(cache_size=0), url, None)
    try:
        with pytest.raises(JudgeError, match=r"^judge answered HTTP 503$"):
            await nli(judge).verify(inp())
    finally:
        await judge.aclose()
    assert formats(app) == ["json_schema"] and judge.modes == {"judge-m": "json_schema"}


async def test_a_pinned_mode_does_not_walk_the_chain(
        served: tuple[StructuredJudge, str]) -> None:
    app, url = served
    app.json_schema = "reject-400"
    judge = OpenAIJudge(JudgeConfig(cache_size=0, structured_output="json_schema"), url, None)
    try:
        with pytest.raises(JudgeError, match=r"^judge answered HTTP 400$"):
            await nli(judge).verify(inp())
    finally:
        await judge.aclose()
    assert formats(app) == ["json_schema"]


@pytest.mark.parametrize("pinned", ["prompt", "json_object"])
async def test_a_pinned_mode_is_used_from_the_first_call(
        served: tuple[StructuredJudge, str], pinned: str) -> None:
    app, url = served
    app.json_object = "ignore"
    app.script = ['{"results": [{"id": 1, "label": "entailment", "confidence": 0.9}, '
                  '{"id": 2, "label": "entailment", "confidence": 0.8}]}']
    judge = OpenAIJudge(JudgeConfig(structured_output=pinned), url, None)  # type: ignore[arg-type]
    try:
        result = await nli(judge).verify(inp())
    finally:
        await judge.aclose()
    assert result.label == "entailment"
    assert formats(app) == [None if pinned == "prompt" else "json_object"]


async def test_a_server_refusing_n_gets_single_calls_remembered(
        served: tuple[StructuredJudge, str]) -> None:
    app, url = served
    app.n = "reject"  # llama.cpp's server: 500 "Only one completion choice is allowed"
    app.prose = "Paris."
    judge = OpenAIJudge(JudgeConfig(), url, None)
    layer = SemanticEntropyLayer(SemanticEntropyConfig(samples=3),
                                 LayerResources(judge=judge))
    try:
        result = await layer.verify(inp("Paris."))
        again = await layer.verify(inp("Paris."))
    finally:
        await judge.aclose()
    assert result.details["samples"] == 3 == again.details["samples"]
    ns = [b.get("n") for b in app.bodies]
    assert ns[:4] == [3, 1, 1, 1] and ns[4:] == [1, 1, 1]  # refused once, then remembered


async def test_schema_bodies_are_cached_apart(served: tuple[StructuredJudge, str]) -> None:
    app, url = served
    judge = OpenAIJudge(JudgeConfig(), url, None)
    ask: Any = [{"role": "user", "content": "x"}]
    try:
        a = await judge.complete(ask, model="m", schema={"type": "object", "properties": {},
                                                          "required": [],
                                                          "additionalProperties": False})
        b = await judge.complete(ask, model="m")
        c = await judge.complete(ask, model="m")
    finally:
        await judge.aclose()
    assert not a.cached and not b.cached and c.cached and len(app.bodies) == 2


# -- the audit's decomposition: bounded strings, a cut reply's complete items ------------

CUT_FACTS = ('{"facts": ["The Eiffel Tower was completed in 1889.", "The tower is 330 '
             'metres tall.", "' + SECRET + ' and on and on')


def audit(judge: OpenAIJudge) -> AuditLayer:
    return AuditLayer(AuditConfig(), LayerResources(judge=judge))


def keys(node: Any) -> set[str]:
    """Every key of every object in ``node``, at any depth."""
    if isinstance(node, dict):
        return set(node).union(*(keys(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(keys(v) for v in node))
    return set()


async def test_strings_are_bounded_for_a_grammar_but_not_sent_to_openai_strict(
        served: tuple[StructuredJudge, str]) -> None:
    app, url = served
    judge = OpenAIJudge(JudgeConfig(cache_size=0), url, None)
    try:
        await audit(judge).verify(inp())  # json_schema enforced: OpenAI-like
    finally:
        await judge.aclose()
    strict = app.bodies[0]["response_format"]
    assert strict["type"] == "json_schema" and "maxLength" not in keys(strict)
    app.bodies.clear()
    app.json_schema = "reject"  # llama-cpp-python: json_object + schema, a grammar
    judge = OpenAIJudge(JudgeConfig(cache_size=0), url, None)
    try:
        await audit(judge).verify(inp())
    finally:
        await judge.aclose()
    grammar = app.bodies[1]["response_format"]
    assert grammar["type"] == "json_object"
    facts = grammar["schema"]["properties"]["facts"]
    assert facts["items"] == {"type": "string", "maxLength": ITEM_CHARS}


async def test_a_cut_decomposition_keeps_its_complete_facts(
        served: tuple[StructuredJudge, str]) -> None:
    app, url = served
    app.script, app.truncate = [CUT_FACTS], {0}
    judge = OpenAIJudge(JudgeConfig(cache_size=0, price_per_1k_input=1.0), url, None)
    try:
        with metered() as usage:
            result = await audit(judge).verify(inp())
    finally:
        await judge.aclose()
    assert [f["text"] for f in result.details["facts"]] == [
        "The Eiffel Tower was completed in 1889.", "The tower is 330 metres tall."]
    assert result.details["judge_salvaged"] == 1 and "judge_repairs" not in result.details
    # decomposition + fact check (no chains): both counted and billed, no repair.
    assert result.judge_calls == 2 == usage.calls == len(app.bodies)
    assert result.cost == pytest.approx(0.2) == usage.cost
    assert SECRET not in repr(result.details) and SECRET not in result.explanation


async def test_a_cut_decomposition_with_no_complete_item_is_asked_once_for_shorter_items(
        served: tuple[StructuredJudge, str]) -> None:
    app, url = served
    app.script = ['{"facts": ["' + SECRET + ' and on and on',
                  '{"facts": ["The tower is 330 metres tall."], "reasoning": []}']
    app.truncate = {0}
    judge = OpenAIJudge(JudgeConfig(cache_size=0, price_per_1k_input=1.0), url, None)
    try:
        with metered() as usage:
            result = await audit(judge).verify(inp())
    finally:
        await judge.aclose()
    assert [f["text"] for f in result.details["facts"]] == ["The tower is 330 metres tall."]
    assert result.details["judge_repairs"] == 1 and "judge_salvaged" not in result.details
    assert result.judge_calls == 3 == usage.calls and usage.cost == pytest.approx(0.3)
    repair = app.bodies[1]["messages"][-1]["content"]
    assert "could not be used: your reply was cut at the length limit" in repair
    assert SECRET not in repair


async def test_a_decomposition_cut_twice_fails_cleanly_with_both_calls_billed(
        served: tuple[StructuredJudge, str]) -> None:
    app, url = served
    app.script = ['{"facts": ["' + SECRET + ' and on'] * 2
    app.truncate = {0, 1}
    judge = OpenAIJudge(JudgeConfig(cache_size=0, price_per_1k_input=1.0), url, None)
    try:
        with metered() as usage, pytest.raises(JudgeError) as failed:
            await audit(judge).verify(inp())
    finally:
        await judge.aclose()
    message = str(failed.value)
    assert message.startswith("judge reply cut at max_tokens") and "repair" in message
    assert SECRET not in message and "Eiffel" not in message
    assert usage.calls == 2 == len(app.bodies) and usage.cost == pytest.approx(0.2)


async def test_a_cut_check_phase_is_not_salvaged(served: tuple[StructuredJudge, str]) -> None:
    """A cut error list kept as a shorter one would hide errors: it stays an error."""
    app, url = served
    app.script = ['{"facts": ["The tower is 330 metres tall."], "reasoning": []}',
                  '{"errors": [{"fact": "F1", "level": "contradiction", "severity": "high", '
                  '"kind": "numeric_deviation", "answer_value": 330, "context_value": 3']
    app.truncate = {1}
    judge = OpenAIJudge(JudgeConfig(cache_size=0, price_per_1k_input=1.0), url, None)
    try:
        with metered() as usage, pytest.raises(JudgeError, match="cut at max_tokens"):
            await audit(judge).verify(inp())
    finally:
        await judge.aclose()
    assert usage.calls == 2 == len(app.bodies) and usage.cost == pytest.approx(0.2)
