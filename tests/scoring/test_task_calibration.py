"""Per-task calibration of evidence into a score (``gateway.scoring.task_calibration``)."""

from __future__ import annotations

from math import exp

import pytest

from gateway.scoring.task_calibration import calibrated_score

T = 0.925
SCALE = {"passage": 1.3, "conversation": 0.4, "document": 0.8}
POWER = {"passage": 0.5, "conversation": 1.0, "document": 3.0}


@pytest.mark.parametrize("evidence", [0.0, 0.01, 0.05, 0.2, 1.0, 3.0])
@pytest.mark.parametrize("shape", ["passage", "conversation", "document", "other"])
def test_power_one_is_the_plain_exponential(evidence: float, shape: str) -> None:
    assert calibrated_score(evidence, shape, T, SCALE, {}) == exp(-evidence * SCALE.get(shape, 1.0))


@pytest.mark.parametrize("shape", ["passage", "document"])
def test_the_powers_change_no_verdict(shape: str) -> None:
    for i in range(400):
        e = i / 100
        plain = calibrated_score(e, shape, T, SCALE, {})
        shaped = calibrated_score(e, shape, T, SCALE, POWER)
        assert (plain >= T) == (shaped >= T)
        if plain < T:                          # the flagged band is untouched
            assert shaped == plain


def test_the_pass_band_is_reshaped_monotonically() -> None:
    es = [i / 1000 for i in range(1, 80)]
    doc = [calibrated_score(e, "document", T, SCALE, POWER) for e in es]
    assert doc == sorted(doc, reverse=True)
    e = 0.02  # the same weak evidence, well below both flag points
    plain_doc = calibrated_score(e, "document", T, SCALE, {})
    plain_pass = calibrated_score(e, "passage", T, SCALE, {})
    # a document's weak evidence counts for less, a passage's for more
    assert calibrated_score(e, "document", T, SCALE, POWER) > plain_doc
    assert calibrated_score(e, "passage", T, SCALE, POWER) < plain_pass


def test_no_flag_point_falls_back_to_the_plain_form() -> None:
    assert calibrated_score(0.5, "document", 1.0, SCALE, POWER) == exp(-0.5 * 0.8)
