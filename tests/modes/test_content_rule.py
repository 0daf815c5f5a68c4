"""The content rule of the outcome record: failed claims (answer sentences) are
recorded only when the policy records content, and then through its redaction;
explanations and reasons pass the default hook; regenerate feedback to the
upstream keeps the claims as they are."""

from __future__ import annotations

import re

import orjson

from gateway.policy.models import RegenerateAction
from gateway.redact import redact_secrets
from gateway.verify.actions import feedback_message, fill_template
from gateway.verify.outcome import CandidateOutcome, LayerOutcome, Outcome, Verification

CLAIM = "Bob's card is 4111-1111-1111-1111, reach him at bob@example.com."


def _verification() -> Verification:
    layer = LayerOutcome(key="g", name="grounding", score=0.1, passed=False,
                         explanation="1 sentence(s): 0 supported, 1 unsupported",
                         failed_claims=[CLAIM])
    return Verification(risk_level="low", layers=[layer], verdict="fail", score=0.1,
                        min_confidence=0.5, reasons=["g: 1 unsupported (key sk-live-abcdef123456)"],
                        failed_claims=[CLAIM])


def _outcome() -> Outcome:
    o = Outcome(policy="p", policy_version="v", mode="inline")
    v = _verification()
    o.record(v)
    o.attempt_history = [{"attempt": 0, "verdict": "fail", "score": 0.1,
                          "failed_claims": [CLAIM]}]
    o.candidates = [CandidateOutcome("c", layers=list(v.layers))]
    o.finish()
    return o


def _policy_redact(text: str) -> str:
    return re.sub(r"\d{4}-\d{4}-\d{4}-\d{4}", "[REDACTED]", redact_secrets(text))


def test_without_record_content_failed_claims_are_withheld_and_counted() -> None:
    rec = _outcome().to_dict()
    raw = orjson.dumps(rec)
    assert b"4111" not in raw and b"bob@example.com" not in raw and b"sk-live" not in raw
    assert rec["failed_claims"] == [] and rec["failed_claim_count"] == 1
    layer = rec["layers"][0]
    assert layer["failed_claims"] == [] and layer["failed_claim_count"] == 1
    assert layer["explanation"] == "1 sentence(s): 0 supported, 1 unsupported"
    assert rec["attempt_history"][0]["failed_claims"] == []
    assert rec["attempt_history"][0]["failed_claim_count"] == 1
    assert rec["candidates"][0]["layers"][0]["failed_claims"] == []
    assert rec["reasons"] == ["g: 1 unsupported (key [REDACTED])"]


def test_with_record_content_failed_claims_pass_the_policy_redaction() -> None:
    o = _outcome()
    o.redact = _policy_redact
    rec = o.to_dict()
    shown = "Bob's card is [REDACTED], reach him at [EMAIL]."
    assert rec["failed_claims"] == [shown] and rec["failed_claim_count"] == 1
    assert rec["layers"][0]["failed_claims"] == [shown]
    assert rec["attempt_history"][0]["failed_claims"] == [shown]
    assert rec["candidates"][0]["layers"][0]["failed_claims"] == [shown]
    assert b"4111" not in orjson.dumps(rec)


def test_client_templates_pass_the_default_hook_feedback_to_upstream_does_not() -> None:
    v = _verification()
    text = fill_template("({reasons}) {failed_claims}", v, "p")
    assert "sk-live" not in text and "bob@example.com" not in text
    regen = RegenerateAction.model_validate({"type": "regenerate"})
    assert CLAIM in feedback_message(regen, v, "p")  # the model's own answer, back to it
    custom = RegenerateAction.model_validate(
        {"type": "regenerate", "feedback_template": "Fix: {failed_claims}"})
    assert feedback_message(custom, v, "p") == f"Fix: {CLAIM}"
