"""The length layer: bounds on the stripped answer, graded score outside."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from gateway.sources.context import GroundingContext
from gateway.layers.length import LengthConfig, LengthLayer
from gateway.layers.base import LayerResources, LayerResult, VerifyInput
from gateway.layers.registry import resolve


def run(answer: str, **config: object) -> LayerResult:
    layer = LengthLayer(LengthConfig.model_validate(config), LayerResources())
    inp = VerifyInput(messages=[], response_text=answer, context=GroundingContext())
    return asyncio.run(layer.verify(inp))


def test_registry_resolves_length() -> None:
    assert resolve("length") is LengthLayer


def test_within_bounds_inclusive() -> None:
    for answer in ("x" * 10, "x" * 20):
        r = run(answer, min_chars=10, max_chars=20)
        assert r.passed and r.score == 1.0 and r.label == "ok"


def test_too_short_graded() -> None:
    r = run("  " + "x" * 9 + "\n", min_chars=10)
    assert not r.passed and r.label == "too_short"
    assert r.score == pytest.approx(0.9)
    assert r.details["chars"] == 9


def test_empty_answer_scores_zero() -> None:
    assert run("", min_chars=1).score == 0.0


def test_too_long_graded() -> None:
    r = run("x" * 40, max_chars=10)
    assert not r.passed and r.label == "too_long" and r.score == pytest.approx(0.25)


def test_defaults_accept_anything() -> None:
    assert run("").passed


def test_invalid_bounds_rejected() -> None:
    with pytest.raises(ValidationError, match="max_chars"):
        LengthConfig(min_chars=10, max_chars=5)
    with pytest.raises(ValidationError):
        LengthConfig(min_chars=-1)
