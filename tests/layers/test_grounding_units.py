"""A summary's figure that the context states otherwise in the same unit (``_grounding_units``)."""

from __future__ import annotations

import pytest

from gateway.layers._grounding_bind import FactCheck
from gateway.layers._grounding_units import same_unit_conflict


def contradicted(answer: str, context: str, binding: bool = False) -> FactCheck:
    where = " there" if binding else ""
    return FactCheck(answer, "value", "contradicted",
                     f"{answer}: the context states {context}{where}", binding=binding)


@pytest.mark.parametrize(("answer", "context"), [
    ("20 seconds", "11 seconds"), ("three days", "five days"), ("£10 million", "£6 million"),
    ("500g", "300g"), ("30 per cent", "70 per cent"), ("ten years", "four years"),
])
def test_the_same_unit_stated_otherwise_is_read(answer: str, context: str) -> None:
    assert same_unit_conflict([contradicted(answer, context)]) is not None


@pytest.mark.parametrize(("answer", "context"), [
    ("two months", "six years"),          # another unit
    ("three million", "3.5 million"),     # a rounding
    ("500g", "388g"),                     # within a quarter
    ("$3,000", "$300million"),            # two different sums
    ("£10", "$6"),                        # another currency
    ("30s", "60s"),                       # no unit word
])
def test_another_unit_a_rounding_or_a_far_value_is_not(answer: str, context: str) -> None:
    assert same_unit_conflict([contradicted(answer, context)]) is None


def test_only_a_value_contradicted_in_place() -> None:
    assert same_unit_conflict([contradicted("20 seconds", "11 seconds", binding=True)]) is None
    assert same_unit_conflict([FactCheck("20 seconds", "value", "unsupported")]) is None
    assert same_unit_conflict(None) is None
