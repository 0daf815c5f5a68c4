"""Seed 002: the credit-score table, zones, and the baseline confusion numbers."""

from __future__ import annotations

import pytest

from gateway.scoring.credit import ZoneConfusion, credit_score, zone


@pytest.mark.parametrize(("high", "low", "score"), [
    (3, 0, 1), (7, 4, 1),          # High >= 3
    (1, 0, 2), (2, 5, 2),          # High 1-2, whatever Low
    (0, 2, 3), (0, 9, 3),          # Low >= 2, High 0
    (0, 1, 4),                     # Low 1, High 0
    (0, 0, 5),                     # no errors
])
def test_credit_score_table(high: int, low: int, score: int) -> None:
    assert credit_score(high, low) == score


def test_negative_counts_rejected() -> None:
    with pytest.raises(ValueError):
        credit_score(-1, 0)


def test_zones() -> None:
    assert [zone(s) for s in range(1, 6)] == ["BAD", "BAD", "MID", "GOOD", "GOOD"]
    with pytest.raises(ValueError):
        zone(0)


# Twenty (expected, actual) cases consistent with seed 002's baseline matrix
# (v3, kimi-full): BAD row 8/0/1, MID row 0/0/4, GOOD row 0/1/6. #13 is the
# cross-band case (expected 2, got 4); multi_minor cases scored 1-2 points high.
BASELINE = [
    # BAD -> BAD: 8 cases, 6 exact, 2 within-band off by one
    (1, 1), (1, 1), (1, 1), (2, 2), (2, 2), (2, 2), (1, 2), (2, 1),
    # BAD -> GOOD: case #13
    (2, 4),
    # MID -> GOOD: four multi_minor cases, three +1 and one +2
    (3, 4), (3, 4), (3, 4), (3, 5),
    # GOOD -> MID: one boundary deviation
    (4, 3),
    # GOOD -> GOOD: 6 cases, 4 exact, 2 within-band off by one
    (5, 5), (5, 5), (4, 4), (4, 4), (5, 4), (4, 5),
]


def test_baseline_table_reproduced() -> None:
    c = ZoneConfusion.from_pairs(BASELINE)
    assert c.total == 20
    assert c.matrix == {
        "BAD": {"BAD": 8, "MID": 0, "GOOD": 1},
        "MID": {"BAD": 0, "MID": 0, "GOOD": 4},
        "GOOD": {"BAD": 0, "MID": 1, "GOOD": 6},
    }
    assert c.zone_accuracy == pytest.approx(0.70)
    assert c.cross_band == 1 and c.cross_band_rate == pytest.approx(0.05)
    assert c.exact_rate == pytest.approx(0.50)
    assert c.within_one_rate == pytest.approx(0.90)


def test_cross_band_counts_both_directions() -> None:
    c = ZoneConfusion.from_pairs([(1, 5), (5, 2), (3, 5), (5, 3)])
    assert c.cross_band == 2 and c.zone_correct == 0
    assert c.to_dict()["cross_band_rate"] == pytest.approx(0.5)


def test_empty_confusion_rates_are_zero() -> None:
    c = ZoneConfusion()
    assert c.zone_accuracy == 0.0 and c.cross_band_rate == 0.0
