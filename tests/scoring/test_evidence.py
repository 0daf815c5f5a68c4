"""Seed 004: quality weights, evidence weights, verdict rules, OUTDATED, finalize."""

from __future__ import annotations

from datetime import date

import pytest

from gateway.scoring.evidence import (
    EvidenceItem,
    Verdict,
    assess,
    finalize,
    initial_verdict,
    quality_score,
    weights,
)


def test_quality_weights_match_seed_table() -> None:
    assert quality_score(1, 0, 0, 0) == pytest.approx(0.30)
    assert quality_score(0, 1, 0, 0) == pytest.approx(0.25)
    assert quality_score(0, 0, 1, 0) == pytest.approx(0.25)
    assert quality_score(0, 0, 0, 1) == pytest.approx(0.20)
    assert quality_score(1, 1, 1, 1) == pytest.approx(1.0)
    assert quality_score(0.8, 0.4, 0.5, 1.0) == pytest.approx(0.24 + 0.10 + 0.125 + 0.2)


def test_quality_factor_out_of_range_rejected() -> None:
    with pytest.raises(ValueError, match="authority"):
        quality_score(1.5, 0, 0, 0)


def test_weights_are_quality_times_relevance_and_ignore_contextual() -> None:
    s = EvidenceItem("supporting", relevance=0.8, authority=1, recency=1, specificity=1)
    c = EvidenceItem("contradicting", relevance=0.5, authority=0, recency=0, specificity=0)
    x = EvidenceItem("contextual", relevance=1.0)
    support, contra = weights([s, c, x])
    assert support == pytest.approx((0.3 + 0.25 + 0.2 + 0.25 * 0.8) * 0.8)
    assert contra == pytest.approx(0.25 * 0.5 * 0.5)


@pytest.mark.parametrize(("support", "contra", "verdict", "confidence"), [
    (0.0, 0.0, Verdict.UNVERIFIABLE, 0.0),
    (1.0, 0.0, Verdict.VERIFIED, 1.0),
    (0.0, 1.0, Verdict.CONTRADICTED, 1.0),
    (1.6, 1.0, Verdict.VERIFIED, 1.6 / 2.6),     # just above 1.5x
    (1.5, 1.0, Verdict.PARTIAL, 0.5 / 2.5),      # exactly 1.5x is not "more than"
    (1.0, 1.6, Verdict.CONTRADICTED, 1.6 / 2.6),
    (1.0, 1.0, Verdict.PARTIAL, 0.0),
])
def test_initial_verdict_rules(support: float, contra: float, verdict: Verdict,
                               confidence: float) -> None:
    v, conf = initial_verdict(support, contra)
    assert v is verdict and conf == pytest.approx(confidence)


@pytest.mark.parametrize(("verdict", "confidence", "expected"), [
    (Verdict.VERIFIED, 0.85, Verdict.VERIFIED),
    (Verdict.VERIFIED, 0.84, Verdict.PARTIAL),
    (Verdict.CONTRADICTED, 0.6, Verdict.PARTIAL),
    (Verdict.UNVERIFIABLE, 0.0, Verdict.UNVERIFIABLE),
    (Verdict.OUTDATED, 0.5, Verdict.OUTDATED),
    (Verdict.PARTIAL, 0.1, Verdict.PARTIAL),
])
def test_finalize_threshold(verdict: Verdict, confidence: float, expected: Verdict) -> None:
    assert finalize(verdict, confidence) is expected


def test_finalize_custom_threshold() -> None:
    assert finalize(Verdict.VERIFIED, 0.6, threshold=0.5) is Verdict.VERIFIED


def test_outdated_needs_old_support_and_new_contradiction() -> None:
    claim_date = date(2023, 6, 1)
    old = EvidenceItem("supporting", relevance=0.3, dated=date(2022, 1, 1))
    new = EvidenceItem("contradicting", relevance=1.0, authority=1, recency=1,
                       specificity=1, dated=date(2024, 1, 1))
    r = assess([old, new], claim_date=claim_date)
    assert r.initial is Verdict.OUTDATED and r.verdict is Verdict.OUTDATED
    # Without a claim date, or with the dates on the wrong side, it stays CONTRADICTED.
    assert assess([old, new]).initial is Verdict.CONTRADICTED
    assert assess([old, new], claim_date=date(2025, 1, 1)).initial is Verdict.CONTRADICTED


def test_assess_end_to_end_downgrades_weak_verification() -> None:
    strong = EvidenceItem("supporting", relevance=1.0, authority=1, recency=1, specificity=1)
    weak_contra = EvidenceItem("contradicting", relevance=0.5)
    r = assess([strong, weak_contra])
    assert r.initial is Verdict.VERIFIED
    assert r.confidence == pytest.approx(1.0 / (1.0 + 0.25))  # 0.8 < 0.85
    assert r.verdict is Verdict.PARTIAL
    assert assess([strong]).verdict is Verdict.VERIFIED
    assert assess([]).verdict is Verdict.UNVERIFIABLE
