"""The ``audit`` layer (seed 002) against a real scripted judge server.

The scripted upstream answers each phase by a regex on the phase marker that
opens the phase's user message, with the JSON that phase's prompt asks for.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from serving import GatewayFactory, ServedUpstream

from gateway.sources.context import ContextSpec, extract_context
from gateway.upstream.judge import OpenAIJudge
from gateway.layers.audit import AuditConfig, AuditLayer
from gateway.testing.scripted import Rule
from gateway.settings import JudgeConfig
from gateway.layers.base import (
    JudgeError,
    JudgeReply,
    LayerResources,
    LayerResult,
    LayerUnavailable,
    VerifyInput,
)
from gateway.layers.registry import resolve

pytestmark = pytest.mark.anyio

CONTEXT = ("Acme's revenue fell from 120 million dollars in 2022 to 84 million dollars in 2023. "
           "The decline was caused by the loss of the Orion contract. "
           "Headcount stayed flat at 900 employees.")
ANSWER = ("Acme's revenue fell in 2023 because it lost the Orion contract. "
          "Headcount stayed flat, so the company is stable.")
QUESTION = "What happened to Acme in 2023?"
FACTS = {"facts": [{"id": "F1", "text": "Acme's revenue fell in 2023"},
                   {"id": "F2", "text": "Acme lost the Orion contract"},
                   {"id": "F3", "text": "Headcount stayed flat"}],
         "reasoning": [{"id": "R1", "premises": ["it lost the Orion contract"],
                        "conclusion": "revenue fell"},
                       {"id": "R2", "premises": ["headcount stayed flat"],
                        "conclusion": "the company is stable"}]}


def err(item: str, severity: str, level: str = "unsupported", kind: str = "other",
        **extra: Any) -> dict[str, Any]:
    return {"fact" if item.startswith("F") else "chain": item, "level": level,
            "severity": severity, "kind": kind, "explanation": f"{severity} {level}", **extra}


def script(upstream: ServedUpstream, *, facts: Any = FACTS, fact_errors: Sequence[Any] = (),
           logic_errors: Sequence[Any] = (), raw: Mapping[str, str] | None = None) -> None:
    replies = {"decompose": orjson.dumps(facts).decode(),
               "fact-check": orjson.dumps({"errors": list(fact_errors)}).decode(),
               "logic-check": orjson.dumps({"errors": list(logic_errors)}).decode(),
               **(raw or {})}
    upstream.app.rules = [Rule(rf"\[verity:audit:{phase}\]", reply)
                          for phase, reply in replies.items()]


def inp(answer: str = ANSWER, context: str = CONTEXT, model: str = "scripted-small") -> VerifyInput:
    messages = [{"role": "system", "content": context}] if context else []
    messages.append({"role": "user", "content": QUESTION})
    return VerifyInput(messages=messages, response_text=answer,
                       context=extract_context(messages, ContextSpec()), model=model)


@pytest.fixture
async def judge(upstream: ServedUpstream) -> AsyncIterator[OpenAIJudge]:
    j = OpenAIJudge(JudgeConfig(), upstream.base_url, None)
    yield j
    await j.aclose()


async def run(judge: Any, **config: Any) -> LayerResult:
    layer = AuditLayer(AuditConfig.model_validate(config), LayerResources(judge=judge))
    return await layer.verify(inp())


def phases(upstream: ServedUpstream) -> list[tuple[str, str]]:
    """(phase marker, model) of every judge request, in arrival order."""
    out = []
    for req in upstream.requests:
        user = req["json"]["messages"][-1]["content"]
        out.append((user.split("\n", 1)[0], req["json"]["model"]))
    return out


def test_registered_as_audit() -> None:
    assert resolve("audit") is AuditLayer


# -- seed 002's scoring table, end to end ------------------------------------------------

@pytest.mark.parametrize(("fact_errors", "logic_errors", "credit", "zone"), [
    ([], [], 5, "GOOD"),
    ([err("F3", "low", kind="overgeneralization")], [], 4, "GOOD"),
    ([err("F3", "low")], [err("R2", "low", kind="overgeneralization")], 3, "MID"),
    ([err("F2", "high", "contradiction", "fabricated_fact")], [], 2, "BAD"),
    ([err("F1", "high", "contradiction"), err("F2", "high")],
     [err("R1", "high", "contradiction")], 1, "BAD"),
], ids=["clean-5", "one-low-4", "two-low-3", "one-high-2", "three-high-1"])
async def test_seed_002_table(upstream: ServedUpstream, judge: OpenAIJudge,
                              fact_errors: list[Any], logic_errors: list[Any],
                              credit: int, zone: str) -> None:
    script(upstream, fact_errors=fact_errors, logic_errors=logic_errors)
    r = await run(judge)
    assert (r.credit_score, r.details["zone"]) == (credit, zone)
    assert r.score == pytest.approx((credit - 1) / 4)
    assert r.passed is (zone == "GOOD") and r.label == zone.lower()
    assert r.judge_calls == 3 and not r.skipped
    errored = {e["item"] for e in r.details["errors"]}
    texts = {f["id"]: f["text"] for f in r.details["facts"]}
    texts |= {c["id"]: c["conclusion"] for c in r.details["reasoning"]}
    assert r.failed_claims == [texts[i] for i in ("F1", "F2", "F3", "R1", "R2") if i in errored]
    statuses = {e.source_id: e.status for e in r.evidence}
    assert statuses == {i: ("ok" if i not in errored else
                            next(e["level"] for e in r.details["errors"] if e["item"] == i))
                        for i in texts}


async def test_both_check_phases_are_called_with_the_decomposition(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    script(upstream)
    await run(judge)
    seen = phases(upstream)
    assert seen[0] == ("[verity:audit:decompose]", "scripted-small")
    assert sorted(p for p, _ in seen[1:]) == ["[verity:audit:fact-check]",
                                              "[verity:audit:logic-check]"]
    by_phase = {req["json"]["messages"][-1]["content"].split("\n", 1)[0]: req["json"]
                for req in upstream.requests}
    facts_prompt = by_phase["[verity:audit:fact-check]"]["messages"][-1]["content"]
    assert "F2: Acme lost the Orion contract" in facts_prompt and CONTEXT in facts_prompt
    logic_prompt = by_phase["[verity:audit:logic-check]"]["messages"][-1]["content"]
    assert "R2: premises: headcount stayed flat => conclusion: the company is stable" \
        in logic_prompt and QUESTION in logic_prompt
    system = by_phase["[verity:audit:fact-check]"]["messages"][0]["content"]
    assert "10%" in system and "ALWAYS \"high\"" in system and "cumulative" in system
    assert all(body["temperature"] == 0.0 for body in by_phase.values())


class _Rendezvous:
    """A judge wrapper whose check-phase calls wait until both have started."""

    def __init__(self, inner: OpenAIJudge) -> None:
        self.inner = inner
        self.started: list[str] = []
        self.both = asyncio.Event()

    async def complete(self, messages: Sequence[Mapping[str, Any]], **kw: Any) -> JudgeReply:
        marker = str(messages[-1]["content"]).split("\n", 1)[0]
        if marker != "[verity:audit:decompose]":
            self.started.append(marker)
            if len(self.started) == 2:
                self.both.set()
            # Sequential phases would never get here twice: bounded wait, then fail.
            await asyncio.wait_for(self.both.wait(), 10)
        return await self.inner.complete(messages, **kw)


async def test_fact_and_logic_checks_run_concurrently(upstream: ServedUpstream,
                                                      judge: OpenAIJudge) -> None:
    script(upstream, logic_errors=[err("R2", "low")])
    wrapper = _Rendezvous(judge)
    r = await run(wrapper)
    assert sorted(wrapper.started) == ["[verity:audit:fact-check]", "[verity:audit:logic-check]"]
    assert r.credit_score == 4


async def test_verify_model_is_used_for_phases_2_and_3(upstream: ServedUpstream,
                                                       judge: OpenAIJudge) -> None:
    script(upstream)
    r = await run(judge, verify_model="verifier-large")
    assert sorted(phases(upstream)) == [("[verity:audit:decompose]", "scripted-small"),
                                        ("[verity:audit:fact-check]", "verifier-large"),
                                        ("[verity:audit:logic-check]", "verifier-large")]
    assert r.details["verify_model"] == "verifier-large"


# -- the deterministic severity rules (seed 002 "known issues") ---------------------------

async def test_fabricated_specific_number_is_raised_to_high(upstream: ServedUpstream,
                                                            judge: OpenAIJudge) -> None:
    facts = {"facts": [{"text": "Acme's revenue fell 45% in 2023"},
                       {"text": "Headcount stayed flat at 900 employees"}], "reasoning": []}
    # The judge calls the invented 45% a low-severity unsupported detail: not allowed.
    script(upstream, facts=facts, fact_errors=[err("F1", "low"), err("F2", "low")])
    r = await run(judge)
    by_item = {e["item"]: e for e in r.details["errors"]}
    assert by_item["F1"]["severity"] == "high" and by_item["F1"]["judged_severity"] == "low"
    assert "fabricated specific number" in by_item["F1"]["raised_by"]
    assert by_item["F2"]["severity"] == "low"  # 900 is in the context: left as judged
    assert (r.credit_score, r.details["raised"]) == (2, 1)
    assert r.judge_calls == 2  # no reasoning chains: the logic check is not called


async def test_numeric_deviation_and_kind_rules(upstream: ServedUpstream,
                                                judge: OpenAIJudge) -> None:
    script(upstream, fact_errors=[
        err("F1", "low", "contradiction", "numeric_deviation", answer_value=80,
            context_value=84),                       # 4.8% <= 10%: stays low
        err("F2", "low", "contradiction", "numeric_deviation", answer_value="100",
            context_value="84"),                     # 19% > 10%: high
        err("F3", "low", "contradiction", "opposite_direction"),
    ], logic_errors=[err("R1", "low", kind="sycophancy"),
                     {"chain": "R2", "level": "reasonable inference", "severity": "low"}])
    r = await run(judge, max_errors_per_phase=5)
    sev = {e["item"]: (e["severity"], e.get("raised_by")) for e in r.details["errors"]}
    assert sev["F1"] == ("low", None)
    assert sev["F2"][0] == "high" and "19%" in sev["F2"][1]
    assert sev["F3"] == ("high", "kind opposite_direction is high")
    assert sev["R1"] == ("high", "kind sycophancy is high")
    assert "R2" not in sev  # a reasonable inference is not an error
    assert (r.details["high"], r.details["low"], r.credit_score) == (3, 1, 1)


async def test_threshold_is_configurable(upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    script(upstream, fact_errors=[err("F1", "low", "contradiction", "numeric_deviation",
                                      answer_value=100, context_value=84)])
    assert (await run(judge, numeric_deviation_threshold=0.25)).credit_score == 4
    system = upstream.requests[1]["json"]["messages"][0]["content"]
    assert "25%" in system


async def test_errors_per_phase_and_facts_are_capped(upstream: ServedUpstream,
                                                     judge: OpenAIJudge) -> None:
    many = {"facts": [f"fact {c}" for c in "abcdefghi"], "reasoning": []}
    script(upstream, facts=many, fact_errors=[err(f"F{i}", "low") for i in (1, 2, 3)]
           + [err("F4", "high")])
    r = await run(judge, max_facts=4, max_errors_per_phase=2)
    assert [f["id"] for f in r.details["facts"]] == ["F1", "F2", "F3", "F4"]
    assert [(e["item"], e["severity"]) for e in r.details["errors"]] == [("F4", "high"),
                                                                         ("F1", "low")]
    prompt = upstream.requests[1]["json"]["messages"][-1]["content"]
    assert "F4: fact d" in prompt and "fact e" not in prompt
    assert "at most 2 errors" in upstream.requests[1]["json"]["messages"][0]["content"]


async def test_empty_decomposition_scores_5_with_one_call(upstream: ServedUpstream,
                                                          judge: OpenAIJudge) -> None:
    script(upstream, facts={"facts": [], "reasoning": []})
    r = await run(judge)
    assert (r.credit_score, r.judge_calls, r.passed) == (5, 1, True)


# -- accounting --------------------------------------------------------------------------

async def test_cost_calls_and_cache(upstream: ServedUpstream) -> None:
    script(upstream, fact_errors=[err("F3", "low")])
    judge = OpenAIJudge(JudgeConfig(price_per_1k_input=1.0, price_per_1k_output=2.0),
                        upstream.base_url, None)
    try:
        first = await run(judge)
        second = await run(judge)
    finally:
        await judge.aclose()
    assert len(upstream.requests) == 3  # the second run was served from the judge's cache
    assert first.judge_calls == 3 and not first.cache_hit and first.cost > 0
    assert second.judge_calls == 3 and second.cache_hit and second.cost == 0.0
    assert second.credit_score == first.credit_score == 4


async def test_cost_is_the_sum_of_the_calls(upstream: ServedUpstream) -> None:
    script(upstream)
    judge = OpenAIJudge(JudgeConfig(price_per_1k_input=1.0, cache_size=0),
                        upstream.base_url, None)
    try:
        r = await run(judge)
    finally:
        await judge.aclose()
    prompt_tokens = sum(len(str(m["content"]).split()) for req in upstream.requests
                        for m in req["json"]["messages"])
    assert r.cost == pytest.approx(prompt_tokens / 1000)


# -- failures ----------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    {"decompose": "I cannot help with that."},
    {"decompose": '{"claims": ["x"]}'},
    {"fact-check": "no errors found"},
    {"logic-check": '{"errors": [{"chain": "R1", "level": "unsupported", "severity": "bad"}]}'},
], ids=["prose", "wrong-shape", "check-prose", "bad-severity"])
async def test_unusable_replies_are_judge_errors(upstream: ServedUpstream, judge: OpenAIJudge,
                                                 raw: dict[str, str]) -> None:
    script(upstream, raw=raw)
    with pytest.raises(JudgeError):
        await run(judge)


async def test_no_judge_is_unavailable_and_no_context_is_skipped() -> None:
    # No upstream fixture: with judge=None there is no client to call anything, and the
    # module's shared upstream may still receive a request the previous test cancelled
    # after sending it (a sibling judge call stopped on a JudgeError) - that made this
    # test flaky when it asserted the upstream saw nothing.
    layer = AuditLayer(AuditConfig(), LayerResources(judge=None))
    with pytest.raises(LayerUnavailable, match="judge"):
        await layer.verify(inp())
    skipped = await layer.verify(inp(context=""))
    assert skipped.skipped and skipped.passed and skipped.credit_score is None
    assert skipped.judge_calls == 0


def test_config_is_strict() -> None:
    with pytest.raises(ValueError, match="extra"):
        AuditConfig.model_validate({"max_fact": 3})
    with pytest.raises(ValueError):
        AuditConfig.model_validate({"max_facts": 0})


# -- through a real gateway --------------------------------------------------------------

SHIPPED = Path(__file__).resolve().parents[2] / "policies" / "audit.yaml"


def test_bad_zone_blocks_through_the_gateway(upstream: ServedUpstream,
                                             make_gateway: GatewayFactory,
                                             tmp_path: Path, make_client: Any) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "audit.yaml").write_text(SHIPPED.read_text())  # the shipped example, as is
    script(upstream, fact_errors=[err("F1", "high", "contradiction", "opposite_direction")])
    upstream.app.rules += [
        Rule(r"\[verity:fact-check:label\]", '{"pairs": []}'),
        Rule(r"^What happened to Acme", ANSWER),
    ]
    gw = make_gateway(policies_dir=str(policies))
    client = make_client(gw)
    raw = client.chat.completions.with_raw_response.create(
        model="scripted-small", extra_headers={"x-verity-profile": "audit"},
        messages=[{"role": "system", "content": CONTEXT},
                  {"role": "user", "content": QUESTION}])
    completion = raw.parse()
    assert raw.headers["x-verity-policy"] == "audit"
    assert raw.headers["x-verity-verdict"] == "fail"
    assert raw.headers["x-verity-action"] == "block"
    assert completion.choices[0].finish_reason == "content_filter"
    assert "withheld" in (completion.choices[0].message.content or "")
    assert "credit score 2 (BAD)" in (completion.choices[0].message.content or "")
    assert "audit=0.2500:fail" in raw.headers["x-verity-layers"]
    judged = [p for p, _ in phases(upstream) if p.startswith("[verity:audit:")]
    assert sorted(judged) == ["[verity:audit:decompose]", "[verity:audit:fact-check]",
                              "[verity:audit:logic-check]"]


async def test_the_explanation_names_the_worst_finding_without_the_judges_note(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    """Explanations are recorded without record_content: the judge's note may quote or
    paraphrase the answer ("Acme lost the Orion contract"), so it stays out."""
    script(upstream, fact_errors=[err("F2", "high", "contradiction", "fabricated_fact",
                                      explanation="the answer says Acme lost the Orion deal")])
    r = await run(judge)
    assert r.explanation.endswith("; e.g. F2: high fabricated_fact"), r.explanation
    assert "Orion" not in r.explanation


async def test_an_id_or_kind_the_judge_made_up_is_not_echoed(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    """The judge may write answer text where an id or a kind belongs."""
    script(upstream, fact_errors=[err("Acme lost the Orion deal", "high", "contradiction",
                                      "Orion deal invented")])
    r = await run(judge)
    assert r.explanation.endswith("; e.g. an unlisted item: high other"), r.explanation
    assert "Orion" not in r.explanation


def test_the_known_kinds_are_the_prompts_kinds() -> None:
    from gateway.layers import _audit_prompts
    from gateway.layers.audit import _KNOWN_KINDS

    offered = set()
    for value in vars(_audit_prompts).values():
        text = getattr(value, "template", value)  # string.Template prompts
        if isinstance(text, str) and '"kind", one of:' in text:
            listed = text.split('"kind", one of:', 1)[1].split(".", 1)[0]
            offered |= {k.strip() for k in listed.replace("\n", " ").split(",")}
    assert offered and offered == set(_KNOWN_KINDS)


# -- the judge's spelling of a level -----------------------------------------------------

@pytest.mark.parametrize(("written", "level"), [
    ("contradicted", "contradiction"), ("Contradicts", "contradiction"),
    ("contradictory", "contradiction"), ("conflicting", "contradiction"),
    ("unsupported", "unsupported"), ("not supported", "unsupported"),
    ("Not-Supported", "unsupported"), ("unverified", "unsupported"),
    ("unsubstantiated", "unsupported"),
])
async def test_natural_level_variants_are_read(upstream: ServedUpstream, judge: OpenAIJudge,
                                               written: str, level: str) -> None:
    script(upstream, fact_errors=[err("F3", "low", written, "overgeneralization")])
    r = await run(judge)
    assert [(e["item"], e["level"], e["severity"]) for e in r.details["errors"]] == \
        [("F3", level, "low")]
    assert "judged_level" not in r.details["errors"][0] and "level_notes" not in r.details
    assert (r.credit_score, r.details["zone"]) == (4, "GOOD")


async def test_unknown_level_counts_as_the_weakest_error_with_a_note(
        upstream: ServedUpstream, judge: OpenAIJudge) -> None:
    """An unreadable level no longer turns the whole audit into an error (which then
    failed open): the entry counts as ``unsupported``, at the judge's severity."""
    script(upstream,
           fact_errors=[err("F1", "high", "contradicted", "opposite_direction"),
                        err("F3", "low", "wrong", "overgeneralization")],
           logic_errors=[{"chain": "R2", "severity": "low", "kind": "overgeneralization"}])
    r = await run(judge)
    assert not r.skipped
    got = {(e["item"], e["level"], e["severity"], e.get("judged_level"))
           for e in r.details["errors"]}
    assert got == {("F1", "contradiction", "high", None), ("F3", "unsupported", "low", "wrong"),
                   ("R2", "unsupported", "low", "(missing)")}
    assert r.details["level_notes"] == [
        "fact F3: unknown level 'wrong', counted as unsupported",
        "logic R2: unknown level '(missing)', counted as unsupported"]
    assert (r.details["high"], r.details["low"], r.credit_score) == (1, 2, 2)


@pytest.mark.parametrize("written", ["reasonable inference", "Reasonable", "not an error"])
async def test_non_error_level_variants_are_dropped(upstream: ServedUpstream,
                                                    judge: OpenAIJudge, written: str) -> None:
    script(upstream, fact_errors=[err("F3", "low", written)])
    r = await run(judge)
    assert r.details["errors"] == [] and r.credit_score == 5
