"""Seed 000 risk levels, profiles and the model-free assessor."""

from __future__ import annotations

import pytest

from gateway.layers.registry import known
from gateway.policy.profiles import (
    MODEL_FREE_LAYERS,
    RISK_LEVELS,
    RISK_PROFILES,
    ProfileLayerError,
)
from gateway.verify.risk import assess_heuristic, assess_risk, claim_types

SEED_LAYERS = {
    "low": ["semantic-entropy"],
    "medium": ["semantic-entropy", "fact-decomposition"],
    "high": ["semantic-entropy", "fact-decomposition", "multi-source", "self-consistency"],
    "critical": ["semantic-entropy", "fact-decomposition", "multi-source", "self-consistency",
                 "nli"],
}
SEED_LIMITS = {"low": (0.7, 2000, 0.001), "medium": (0.8, 5000, 0.01),
               "high": (0.9, 10000, 0.05), "critical": (0.95, 30000, 0.1)}


def test_profiles_keep_seed_layers_and_limits_behind_model_free_layers() -> None:
    assert tuple(RISK_PROFILES) == RISK_LEVELS
    for level, profile in RISK_PROFILES.items():
        assert profile.layers[:3] == MODEL_FREE_LAYERS
        assert list(profile.layers[3:]) == SEED_LAYERS[level]
        assert (profile.min_confidence, profile.max_latency_ms, profile.max_cost) \
            == SEED_LIMITS[level]


def test_runnable_never_drops_a_layer_silently() -> None:
    # Product rule (issue 17): a profile whose layer the registry lacks is an error
    # naming the profile and the layer, never a shorter profile.
    assert set(MODEL_FREE_LAYERS) <= set(known())
    critical = RISK_PROFILES["critical"]
    with pytest.raises(ProfileLayerError, match=r"risk profile 'critical' names layers "
                                                r"that are not registered: semantic-entropy"):
        critical.runnable(MODEL_FREE_LAYERS)
    assert critical.missing(MODEL_FREE_LAYERS) == critical.layers[3:]
    assert RISK_PROFILES["low"].runnable([*MODEL_FREE_LAYERS, "semantic-entropy"]) \
        == RISK_PROFILES["low"].layers


def test_every_seed_profile_layer_is_registered() -> None:
    for level, profile in RISK_PROFILES.items():
        assert profile.level == level
        assert profile.missing(known()) == ()
        assert profile.runnable(known()) == profile.layers


@pytest.mark.parametrize(("text", "level"), [
    ("Hello, how are you?", "low"),
    ("What dosage of aspirin should I take?", "critical"),          # seed test case
    ("Take 500mg of ibuprofen every 2 hours for chest pain as a treatment.", "critical"),
    ("The medication interacts with alcohol.", "critical"),         # stem the seed missed
    ("Is this a diagnosis I should worry about?", "critical"),
    ("Can I file a lawsuit against my landlord?", "critical"),
    ("Should I invest in index funds?", "critical"),
    ("Run sudo rm -rf / to clean up.", "high"),
    ("Store the API key in an env var.", "high"),
    ("Never log a password.", "high"),
    ("The meeting is at 3.", None),                                  # digit -> undecided
    ("x" * 120, None),                                               # long -> undecided
])
def test_heuristic(text: str, level: str | None) -> None:
    assert assess_heuristic(text) == level


def test_heuristic_does_not_fire_on_lookalikes() -> None:
    assert assess_heuristic("We will investigate the outage and evaluate options.") == "low"


def test_undecided_defaults_to_medium_without_llm() -> None:
    assert assess_risk("The meeting is at 3.", detector=lambda _t: None) == "medium"
    assert assess_risk("The meeting is at 3.", detector=lambda _t: []) == "medium"


def test_claims_detector_raises_to_high() -> None:
    text = "DFARS 252.204-7012 requires NIST SP 800-171 controls for contractors."
    assert assess_risk(text, detector=lambda _t: ["regulatory"]) == "high"
    many = lambda _t: ["quantitative"] * 3  # noqa: E731
    assert assess_risk("Sales rose 12% to 4.1M units in 2023.", detector=many) == "high"
    two = lambda _t: ["quantitative", "quantitative", "temporal"]  # noqa: E731
    assert assess_risk("Sales rose 12% to 4.1M units in 2023.", detector=two) == "medium"


def test_detector_not_called_when_domain_words_decide() -> None:
    def boom(_t: str) -> list[str]:
        raise AssertionError("detector should not run")
    assert assess_risk("What dosage of aspirin should I take?", detector=boom) == "critical"
    assert assess_risk("Never log a password.", detector=boom) == "high"


SHORT_ITAR = "Under ITAR, exporting defense articles requires a State Department license."


def test_regulatory_reference_wins_over_short_answer_shortcut() -> None:
    # QA: 75 chars, no digit -> the seed's shortcut says low, but a regulatory
    # reference must make it high (compliance.yaml then requires a citation).
    assert len(SHORT_ITAR) < 100 and assess_heuristic(SHORT_ITAR) == "low"
    assert assess_risk(SHORT_ITAR, detector=lambda _t: ["regulatory"]) == "high"
    assert assess_risk(SHORT_ITAR) == "high"  # the real claims detector
    # Short and digit-free without a regulatory reference: still low.
    assert assess_risk("Hi there", detector=lambda _t: []) == "low"
    assert assess_risk("Hi there", detector=lambda _t: None) == "low"
    assert assess_risk("Hi there", detector=lambda _t: ["named_entity"]) == "low"
    assert assess_risk("Hello, how are you?") == "low"
    # The quantitative count still does not override the shortcut (unchanged).
    assert assess_risk("Hi there", detector=lambda _t: ["quantitative"] * 5) == "low"
    # Critical words still win over a regulatory reference.
    assert assess_risk("ITAR lawsuits are rare.", detector=lambda _t: ["regulatory"]) \
        == "critical"


def test_real_claims_detector_finds_regulatory_reference() -> None:
    text = "DFARS 252.204-7012 requires contractors to implement NIST SP 800-171 controls."
    assert assess_heuristic(text) is None
    assert "regulatory" in (claim_types(text) or [])
    assert assess_risk(text) == "high"
    assert assess_risk("The meeting moved to room 12 on the third floor, as agreed.") == "medium"


def test_no_claims_detector_degrades_to_medium() -> None:
    # The claims detector is part of the text library now (gateway.text.claims), not
    # an optional import: "no detector" is a detector that reports none (None).
    text = "DFARS 252.204-7012 requires contractors to implement NIST SP 800-171 controls."
    assert assess_risk(text, detector=lambda _t: None) == "medium"
