"""Actions on a completion dict: pass, flag, disclaimer, block, regenerate."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from gateway.errors import UpstreamTimeout, VerificationBlocked
from gateway.policy.models import (
    ActionSet, BlockAction, DisclaimerAction, FlagAction, PassAction, RegenerateAction,
)
from gateway.verify.actions import (
    RegenContext, apply_action, apply_static, feedback_message, fill_template,
)
from gateway.wire.chat import block_completion
from gateway.verify.outcome import Verification

MESSAGES = [{"role": "user", "content": "Tell me about Atlantis."}]


def completion(text: str, cid: str = "chatcmpl-1") -> dict[str, Any]:
    return {"id": cid, "object": "chat.completion", "created": 7, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
            "system_fingerprint": "fp"}


def verdict(band: str = "fail", score: float | None = 0.25,
            claims: tuple[str, ...] = ("Atlantis is real.",)) -> Verification:
    return Verification(risk_level="medium", layers=[], verdict=band,  # type: ignore[arg-type]
                        score=score, min_confidence=0.8,
                        reasons=["grounding: 1 unsupported"] if band != "pass" else [],
                        failed_claims=list(claims) if band != "pass" else [])


def test_fill_template_fills_known_placeholders_only() -> None:
    out = fill_template("{verdict} {score} {policy} [{failed_claims}] ({reasons}) {other} {}",
                        verdict(), "pol")
    assert out == "fail 0.2500 pol [Atlantis is real.] (grounding: 1 unsupported) {other} {}"
    assert fill_template("{score}", verdict(score=None), "p") == "n/a"


@pytest.mark.parametrize("action", [PassAction(), FlagAction()])
def test_pass_and_flag_leave_the_completion_alone(action: Any) -> None:
    c = completion("hi")
    applied = apply_static(action, c, verdict(), "p")
    assert applied.completion is c and not applied.modified and applied.action == action.type


def test_disclaimer_appends_to_choice_zero_only() -> None:
    c = completion("Answer.")
    c["choices"].append({"index": 1, "message": {"role": "assistant", "content": "Other."},
                         "finish_reason": "stop"})
    applied = apply_static(DisclaimerAction(template=" [{verdict}]"), c, verdict(), "p")
    out = applied.completion
    assert out is not None
    assert out["choices"][0]["message"]["content"] == "Answer. [fail]"
    assert out["choices"][1]["message"]["content"] == "Other."
    assert c["choices"][0]["message"]["content"] == "Answer."  # input not mutated
    assert applied.appended == " [fail]" and applied.modified


def test_disclaimer_on_tool_call_answer_without_content() -> None:
    c = completion("x")
    c["choices"][0]["message"]["content"] = None
    out = apply_static(DisclaimerAction(template="note"), c, verdict(), "p").completion
    assert out is not None and out["choices"][0]["message"]["content"] == "note"


def test_block_completion_keeps_id_model_usage() -> None:
    applied = apply_static(BlockAction(message="No: {reasons}"), completion("bad"), verdict(), "p")
    out = applied.completion
    assert out == block_completion(completion("bad"), "No: grounding: 1 unsupported")
    assert out is not None
    assert (out["id"], out["model"], out["created"], out["system_fingerprint"]) == \
        ("chatcmpl-1", "m", 7, "fp")
    assert out["usage"] == completion("bad")["usage"]
    assert out["choices"] == [{"index": 0, "message": {
        "role": "assistant", "content": "No: grounding: 1 unsupported", "refusal": None},
        "logprobs": None, "finish_reason": "content_filter"}]


def test_block_error_style() -> None:
    applied = apply_static(BlockAction(style="error", status=451, message="no ({verdict})"),
                           completion("bad"), verdict(), "p")
    assert applied.completion is None and isinstance(applied.error, VerificationBlocked)
    assert applied.error.status == 451
    assert applied.error.body()["error"] == {"message": "no (fail)", "type": "content_filter",
                                             "param": None, "code": "content_filter"}


def test_feedback_is_seed_001_repair_prompt_or_template() -> None:
    text = feedback_message(RegenerateAction(), verdict(), "p")
    assert '1. "Atlantis is real."' in text and "Rewrite the answer" in text
    custom = RegenerateAction(feedback_template="Fix: {failed_claims}")
    assert feedback_message(custom, verdict(), "p") == "Fix: Atlantis is real."
    no_claims = feedback_message(RegenerateAction(), verdict(claims=()), "p")
    assert "grounding: 1 unsupported" in no_claims


class FakeUpstream:
    """Answers regenerate calls from a script of (status, completion | exception)."""

    def __init__(self, script: list[Any], verdicts: dict[str, Verification]) -> None:
        self.script = script
        self.verdicts = verdicts
        self.payloads: list[dict[str, Any]] = []
        self.attempts: list[int] = []

    async def complete(self, payload: dict[str, Any]) -> tuple[int, Any, bytes]:
        self.payloads.append(payload)
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        status, parsed = item
        return status, parsed, b""

    async def verify(self, c: dict[str, Any]) -> Verification:
        return self.verdicts[c["choices"][0]["message"]["content"]]

    @contextmanager
    def attempt(self, n: int) -> Iterator[None]:
        self.attempts.append(n)
        yield

    def ctx(self, actions: ActionSet | None = None) -> RegenContext:
        return RegenContext(policy="p", messages=MESSAGES,
                            payload={"model": "m", "messages": MESSAGES, "stream": True,
                                     "stream_options": {"include_usage": True}, "seed": 3},
                            actions=actions or ActionSet.model_validate(
                                {"fail": {"type": "regenerate"}}),
                            complete=self.complete, verify=self.verify, attempt=self.attempt)


def test_regenerate_accepts_the_first_good_attempt() -> None:
    up = FakeUpstream([(200, completion("bad again", "c2")), (200, completion("good", "c3"))],
                      {"bad again": verdict(claims=("bad again",)), "good": verdict("pass")})
    action = RegenerateAction(max_attempts=3)
    applied = asyncio.run(apply_action(action, completion("bad"), verdict(), up.ctx()))
    assert applied.action == "regenerate" and applied.attempts == 2 and up.attempts == [1, 2]
    assert applied.completion is not None and applied.completion["id"] == "c3"
    assert applied.verification.verdict == "pass"
    first, second = up.payloads
    assert "stream" not in first and "stream_options" not in first and first["seed"] == 3
    assert first["messages"][:1] == MESSAGES
    assert first["messages"][1] == {"role": "assistant", "content": "bad"}
    assert '"Atlantis is real."' in first["messages"][2]["content"]
    assert second["messages"][1] == {"role": "assistant", "content": "bad again"}
    assert '"bad again"' in second["messages"][2]["content"]
    assert [h.get("verdict") for h in applied.history] == ["fail", "fail", "pass"]


def test_regenerate_applies_the_new_bands_action() -> None:
    actions = ActionSet.model_validate({"marginal": {"type": "disclaimer", "template": " (?)"},
                                        "fail": {"type": "regenerate"}})
    up = FakeUpstream([(200, completion("meh"))], {"meh": verdict("marginal")})
    applied = asyncio.run(apply_action(RegenerateAction(), completion("bad"), verdict(),
                                       up.ctx(actions)))
    assert applied.completion is not None
    assert applied.completion["choices"][0]["message"]["content"] == "meh (?)"
    assert applied.action == "regenerate" and applied.history[-1]["action"] == "disclaimer"


def test_regenerate_fallback_model_then_fallback_action() -> None:
    up = FakeUpstream([(200, completion("bad 1")), UpstreamTimeout("slow"),
                       (500, {"error": {}}), (200, completion("bad 2"))],
                      {"bad 1": verdict(), "bad 2": verdict(claims=("c2",))})
    action = RegenerateAction(max_attempts=3, fallback_model="big",
                              fallback=BlockAction(message="gave up: {failed_claims}"))
    applied = asyncio.run(apply_action(action, completion("bad"), verdict(), up.ctx()))
    assert [p["model"] for p in up.payloads] == ["m", "m", "m", "big"]
    assert applied.action == "block" and applied.attempts == 4
    assert applied.completion is not None
    assert applied.completion["choices"][0]["message"]["content"] == "gave up: c2"
    assert [h.get("error", "")[:15] for h in applied.history[1:]] == \
        ["", "UpstreamTimeout", "upstream answer", ""]
    assert applied.note == "regenerate failed after 4 attempt(s); fallback block"


def test_regenerate_fallback_pass_keeps_last_answer() -> None:
    up = FakeUpstream([(200, completion("still bad"))], {"still bad": verdict()})
    action = RegenerateAction(fallback=PassAction())
    applied = asyncio.run(apply_action(action, completion("bad"), verdict(), up.ctx()))
    assert applied.action == "pass" and applied.modified
    assert applied.completion is not None
    assert applied.completion["choices"][0]["message"]["content"] == "still bad"
