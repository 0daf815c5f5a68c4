"""Seed 001: authority weights, recency decay, aggregated confidence, repair prompt."""

from __future__ import annotations

import math
from datetime import date, datetime

import pytest

from gateway.scoring.binding import (
    AUTHORITY_WEIGHTS,
    BoundSource,
    aggregated_confidence,
    authority_weight,
    parse_date,
    recency_weight,
    repair_feedback,
    verification_status,
)

TODAY = date(2025, 1, 1)


def test_authority_weights_match_seed_and_ranking() -> None:
    assert dict(AUTHORITY_WEIGHTS) == {
        "government": 1.0, "regulatory": 1.0, "academic": 0.95, "news_major": 0.8,
        "corporate": 0.75, "news_trade": 0.7, "wiki": 0.6, "blog": 0.3, "unknown": 0.2}
    w = AUTHORITY_WEIGHTS
    assert w["government"] > w["academic"] > w["news_major"] > w["blog"] > w["unknown"]
    with pytest.raises(TypeError):
        AUTHORITY_WEIGHTS["blog"] = 1.0  # type: ignore[index]


def test_authority_weight_lookup() -> None:
    assert authority_weight("Academic ") == 0.95
    assert authority_weight("made-up") == 0.2
    assert authority_weight(None) == 0.2
    assert authority_weight(0.42) == 0.42
    assert authority_weight(3) == 1.0
    assert authority_weight("0.8") == 0.8


def test_recency_half_life() -> None:
    assert recency_weight(TODAY, now=TODAY) == 1.0
    assert recency_weight(date(2024, 1, 2), now=TODAY) == pytest.approx(0.5, abs=1e-9)
    two_years = recency_weight("2023-01-02", now=TODAY)
    assert two_years == pytest.approx(0.25, abs=1e-3)
    # The seed's constant is 0.693 ≈ ln 2.
    assert two_years == pytest.approx(math.exp(-0.693 * 730 / 365), rel=1e-3)


def test_recency_unknown_and_future() -> None:
    assert recency_weight(None, now=TODAY) == 0.5
    assert recency_weight("not a date", now=TODAY) == 0.5
    assert recency_weight("2030-01-01", now=TODAY) == 1.0


def test_parse_date_forms() -> None:
    assert parse_date("2024") == date(2024, 1, 1)
    assert parse_date("2024-05") == date(2024, 5, 1)
    assert parse_date("2024-05-03T10:00:00Z") == date(2024, 5, 3)
    assert parse_date(datetime(2024, 5, 3, 9)) == date(2024, 5, 3)
    assert parse_date("") is None and parse_date("2024-13") is None


def test_confidence_formula_and_diminishing_returns() -> None:
    one = BoundSource("a", relevance=0.8, authority=1.0, recency=0.5)
    assert aggregated_confidence([one]) == pytest.approx(0.4)
    two = [one, BoundSource("b", relevance=0.6, authority=0.95, recency=1.0)]
    assert aggregated_confidence(two) == pytest.approx((0.4 + 0.57) / math.sqrt(2))
    # Adding a supporting source raises confidence (CA-22) but by less than its score.
    assert aggregated_confidence([one]) < aggregated_confidence(two) < 0.4 + 0.57
    assert aggregated_confidence([]) == 0.0
    strong = [BoundSource(str(i), 1.0, 1.0, 1.0) for i in range(4)]
    assert aggregated_confidence(strong) == 1.0  # capped


def test_verification_status_cutoffs() -> None:
    assert verification_status(0.7) == "verified"
    assert verification_status(0.69) == "partially_verified"
    assert verification_status(0.3) == "partially_verified"
    assert verification_status(0.29) == "unverified"


def test_repair_feedback_names_claims_and_options() -> None:
    msg = repair_feedback(["The tower was built in 1823.", "  It is  2 km tall. "])
    assert '1. "The tower was built in 1823."' in msg
    assert '2. "It is 2 km tall."' in msg
    for phrase in ("cite", "correct", "opinion"):
        assert phrase in msg


def test_repair_feedback_empty_and_truncation() -> None:
    assert repair_feedback([]) == "" and repair_feedback(["  "]) == ""
    msg = repair_feedback([f"claim {i}" for i in range(12)], max_claims=10)
    assert '10. "claim 9"' in msg and "claim 10" not in msg and "(and 2 more)" in msg
    long = repair_feedback(["x" * 500], max_chars=50)
    assert "x" * 49 + "…" in long and "x" * 50 not in long
