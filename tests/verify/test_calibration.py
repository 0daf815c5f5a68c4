"""Seed 000 Platt scaling: formula, seed defaults, identity fallback, fitting."""

from __future__ import annotations

import math
import random

import pytest

from gateway.verify.calibration import SEED_DEFAULTS, Calibrator, PlattParams, fit_platt, platt


def test_formula_matches_seed() -> None:
    p = PlattParams(-2.5, 0.5)
    assert platt(0.8, p) == pytest.approx(1 / (1 + math.exp(-2.5 * 0.8 + 0.5)))
    assert platt(0.0, p) == pytest.approx(1 / (1 + math.exp(0.5)))


def test_extreme_inputs_do_not_overflow_and_stay_in_range() -> None:
    assert platt(1e6, PlattParams(-3.0, 0.0)) == 1.0
    assert platt(1e6, PlattParams(3.0, 0.0)) == 0.0


def test_seed_defaults_apply_by_layer_name() -> None:
    c = Calibrator()
    assert c.params_for("nli") == PlattParams(-2.2, 0.45)
    assert c.calibrate("fact-decomposition", 0.9) == pytest.approx(
        1 / (1 + math.exp(-3.0 * 0.9 + 0.3)))
    assert set(SEED_DEFAULTS) == {"semantic-entropy", "fact-decomposition", "multi-source",
                                  "self-consistency", "nli"}


def test_unknown_layer_is_identity_clipped() -> None:
    c = Calibrator()
    assert c.params_for("grounding") is None
    assert c.calibrate("grounding", 0.37) == 0.37
    assert c.calibrate("grounding", 1.2) == 1.0


def test_overrides_and_no_defaults() -> None:
    c = Calibrator({"citations": PlattParams(-4.0, 2.0), "nli": PlattParams(-1.0, 0.0)})
    assert c.calibrate("citations", 0.5) == pytest.approx(0.5)
    assert c.params_for("nli") == PlattParams(-1.0, 0.0)
    assert Calibrator(seed_defaults=False).calibrate("nli", 0.3) == 0.3


def test_default_calibration_is_increasing() -> None:
    c = Calibrator()
    values = [c.calibrate("multi-source", x / 10) for x in range(11)]
    assert values == sorted(values) and values[0] < values[-1]


def test_fit_recovers_known_parameters() -> None:
    rng = random.Random(7)
    true = PlattParams(-6.0, 3.0)
    scores = [rng.random() for _ in range(4000)]
    labels = [rng.random() < platt(f, true) for f in scores]
    fitted = fit_platt(scores, labels)
    assert fitted.a == pytest.approx(true.a, abs=0.6)
    assert fitted.b == pytest.approx(true.b, abs=0.35)


def test_fit_separable_data_is_finite_and_ordered() -> None:
    fitted = fit_platt([0.1, 0.2, 0.3, 0.7, 0.8, 0.9], [0, 0, 0, 1, 1, 1])
    assert math.isfinite(fitted.a) and math.isfinite(fitted.b) and fitted.a < 0
    assert platt(0.9, fitted) > 0.5 > platt(0.1, fitted)


def test_fit_single_class_is_well_defined() -> None:
    fitted = fit_platt([0.2, 0.5, 0.9], [1, 1, 1])
    assert all(platt(f, fitted) > 0.5 for f in (0.2, 0.5, 0.9))


def test_fit_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="labels"):
        fit_platt([0.1, 0.2], [1])
    with pytest.raises(ValueError, match="at least one"):
        fit_platt([], [])
