"""The seed 000 claim-level mitigations on a completion dict: ``request-sources`` and
``decompose-and-retry`` (through a real gateway: ``tests/modes/test_mitigations.py``)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from verify.test_actions import FakeUpstream, completion, verdict

from gateway.errors import UpstreamTimeout
from gateway.policy.models import (
    ActionSet,
    DecomposeAndRetryAction,
    FlagAction,
    RequestSourcesAction,
)
from gateway.verify.actions import apply_action, needs_upstream, without_disclaimer
from gateway.verify.mitigations import assemble, locate, sources_feedback
from gateway.verify.outcome import Verification

PARIS = "Paris is the capital of France."
CLAIM = "Atlantis was founded in 1200."
ROME = "Rome is in Italy."
ANSWER = f"{PARIS} {CLAIM} {ROME}"


def sourced(v: Verification, *ids: str) -> Verification:
    return dataclasses.replace(v, sources=list(ids))


def test_both_are_upstream_actions_with_a_fallback() -> None:
    assert needs_upstream(RequestSourcesAction()) and needs_upstream(DecomposeAndRetryAction())
    actions = ActionSet.model_validate({"fail": {"type": "decompose-and-retry",
                                                 "fallback": {"type": "disclaimer"}}})
    assert without_disclaimer(actions).fail.fallback == FlagAction()  # type: ignore[union-attr]


def test_sources_feedback_names_claims_and_source_ids() -> None:
    text = sources_feedback([CLAIM], ["doc-a", "almanac"])
    assert f'1. "{CLAIM}"' in text and "([doc-a], [almanac])" in text and "e.g. [doc-a]" in text


def test_request_sources_reasks_with_the_sources_and_accepts_a_pass() -> None:
    up = FakeUpstream([(200, completion("cited [doc-a]", "c2"))],
                      {"cited [doc-a]": verdict("pass")})
    ctx = up.ctx(ActionSet.model_validate({"fail": {"type": "request-sources"}}))
    applied = asyncio.run(apply_action(RequestSourcesAction(), completion(ANSWER),
                                       sourced(verdict(), "doc-a"), ctx))
    assert applied.action == "request-sources" and applied.attempts == 1
    assert applied.completion is not None and applied.completion["id"] == "c2"
    (payload,) = up.payloads
    assert payload["messages"][-2] == {"role": "assistant", "content": ANSWER}
    assert "[doc-a]" in payload["messages"][-1]["content"]
    assert '"Atlantis is real."' in payload["messages"][-1]["content"]
    assert [h.get("verdict") for h in applied.history] == ["fail", "pass"]


def test_request_sources_without_sources_falls_back_at_once() -> None:
    up = FakeUpstream([], {})
    applied = asyncio.run(apply_action(RequestSourcesAction(fallback=FlagAction()),
                                       completion(ANSWER), verdict(), up.ctx()))
    assert applied.action == "flag" and not up.payloads and applied.attempts == 0
    assert applied.note == ("request-sources: the request offers no source to cite; "
                            "fallback flag")


def test_request_sources_gives_up_after_max_attempts() -> None:
    up = FakeUpstream([UpstreamTimeout("slow"), (200, completion("still bad"))],
                      {"still bad": verdict()})
    applied = asyncio.run(apply_action(RequestSourcesAction(max_attempts=2),
                                       completion(ANSWER), sourced(verdict(), "a"),
                                       up.ctx()))
    assert applied.action == "block" and applied.attempts == 2
    assert applied.note == "request-sources failed after 2 attempt(s); fallback block"


def test_locate_finds_verbatim_and_rephrased_claims() -> None:
    spans, where = locate(ANSWER, [CLAIM, "Rome lies in Italy.", "Tokyo is big."])
    assert [s.text for s in spans] == [PARIS, CLAIM, ROME]
    assert where == {0: 1, 1: 2}  # "Rome lies in Italy." shares rome, italy: 2 of 3 words
    assert assemble(ANSWER, spans, {1: None}) == f"{PARIS} {ROME}"
    assert assemble(ANSWER, spans, {0: None, 1: "X."}) == f"X. {ROME}"
    assert assemble(ANSWER, spans, {0: None, 1: None, 2: None}) == ""


def _decompose(script: list[Any], verdicts: dict[str, Verification],
               action: DecomposeAndRetryAction, v: Verification | None = None,
               actions: dict[str, Any] | None = None) -> tuple[Any, FakeUpstream]:
    up = FakeUpstream(script, verdicts)
    ctx = up.ctx(ActionSet.model_validate(actions or {"fail": {"type": "decompose-and-retry"}}))
    applied = asyncio.run(apply_action(action, completion(ANSWER),
                                       v or verdict(claims=(CLAIM,)), ctx))
    return applied, up


def test_decompose_retries_the_claim_and_keeps_what_verifies() -> None:
    fixed = "Atlantis is a legend from Plato."
    assembled = f"{PARIS} {fixed} {ROME}"
    applied, up = _decompose([(200, completion(fixed, "c2"))],
                             {fixed: verdict("pass"), assembled: verdict("pass")},
                             DecomposeAndRetryAction())
    assert applied.action == "decompose-and-retry" and applied.attempts == 1
    assert applied.completion is not None
    assert applied.completion["choices"][0]["message"]["content"] == assembled
    assert applied.completion["id"] == "chatcmpl-1"  # the answer's own, rewritten
    (payload,) = up.payloads
    assert f'"{CLAIM}"' in payload["messages"][-1]["content"]
    assert "UNSUPPORTED" in payload["messages"][-1]["content"]
    assert up.attempts == [1, 2]  # one retry, then the assembled answer's verification
    assert [h.get("result") for h in applied.history[1:2]] == ["replaced"]
    assert applied.history[-1]["assembled"] is True and applied.history[-1]["verdict"] == "pass"
    assert applied.note == "decompose-and-retry: 1 claim(s) replaced, 0 dropped"


def test_decompose_drops_what_does_not_verify_with_a_note() -> None:
    kept = f"{PARIS} {ROME}"
    note = "\n\n*Verity: statements that could not be verified were removed from this answer.*"
    applied, up = _decompose([(200, completion("UNSUPPORTED"))],
                             {kept + note: verdict("pass")}, DecomposeAndRetryAction())
    assert applied.completion is not None
    assert applied.completion["choices"][0]["message"]["content"] == kept + note
    assert applied.history[1]["result"] == "unsupported"
    assert applied.note == "decompose-and-retry: 0 claim(s) replaced, 1 dropped"
    # mode: drop makes no upstream call at all
    applied, up = _decompose([], {kept: verdict("pass")},
                             DecomposeAndRetryAction(mode="drop", note=""))
    assert not up.payloads and applied.attempts == 0
    assert applied.completion is not None
    assert applied.completion["choices"][0]["message"]["content"] == kept


def test_decompose_falls_back_when_nothing_is_left_or_the_result_fails() -> None:
    everything = verdict(claims=(PARIS, CLAIM, ROME))
    applied, up = _decompose([], {}, DecomposeAndRetryAction(mode="drop"), everything)
    assert applied.action == "block" and not up.payloads
    assert applied.note == ("decompose-and-retry: nothing of the answer verified; "
                            "fallback block")
    kept = f"{PARIS} {ROME}"
    applied, _ = _decompose([], {kept: verdict()}, DecomposeAndRetryAction(mode="drop", note=""))
    assert applied.action == "block"  # its band (fail) is decompose-and-retry again
    assert applied.note == "decompose-and-retry: the assembled answer is fail; fallback block"
    applied, _ = _decompose([], {}, DecomposeAndRetryAction(),
                            verdict(claims=("Tokyo is large.",)))
    assert applied.action == "block" and "no failed claim found" in (applied.note or "")


def test_decompose_bounds_calls_and_respects_the_time_budget() -> None:
    two = verdict(claims=(PARIS, CLAIM))
    applied, up = _decompose([(200, completion("UNSUPPORTED"))], {ROME: verdict("pass")},
                             DecomposeAndRetryAction(max_claims=1, note=""), two)
    assert len(up.payloads) == 1 and applied.action == "decompose-and-retry"
    up = FakeUpstream([], {})
    ctx = dataclasses.replace(up.ctx(), time_left=lambda: 0.0)
    applied = asyncio.run(apply_action(DecomposeAndRetryAction(), completion(ANSWER),
                                       verdict(claims=(CLAIM,)), ctx))
    assert not up.payloads and applied.action == "block"
    assert "time budget is spent" in (applied.note or "")


def test_decompose_never_cuts_structured_output() -> None:
    up = FakeUpstream([], {})
    ctx = up.ctx()
    ctx.payload = {**ctx.payload, "response_format": {"type": "json_object"}}
    applied = asyncio.run(apply_action(DecomposeAndRetryAction(), completion('{"a": 1}'),
                                       verdict(claims=('{"a": 1}',)), ctx))
    assert applied.action == "block" and "structured" in (applied.note or "")


def test_with_text_rewrites_the_verified_text_of_each_format() -> None:
    from gateway.wire.chat import CHAT_COMPLETIONS
    from gateway.wire.responses_format import RESPONSES

    chat = CHAT_COMPLETIONS.with_text(completion(ANSWER), PARIS)
    assert CHAT_COMPLETIONS.answer_text(chat) == PARIS and chat["usage"]["total_tokens"] == 5
    part = {"type": "output_text", "text": "", "annotations": [{"x": 1}], "logprobs": []}
    response = {"id": "resp_1", "object": "response", "status": "completed", "output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{**part, "text": PARIS + " "}]},
        {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
         "content": [{**part, "text": CLAIM}]}]}
    out = RESPONSES.with_text(response, ROME)
    assert RESPONSES.answer_text(out) == ROME
    assert [i["id"] for i in out["output"]] == ["rs_1", "msg_2"]
    assert out["output"][1]["content"][0]["annotations"] == []
    assert response["output"][2]["content"][0]["text"] == CLAIM  # not changed in place
