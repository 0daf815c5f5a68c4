"""Seed 002: deterministic 1–5 credit score, BAD/MID/GOOD zones, cross-band confusion.

The score is computed from error *counts*, never asked of a model (seed 002,
"Deterministic Scoring Formula")::

    High >= 3            -> 1   completely untrustworthy
    High 1-2             -> 2   basically untrustworthy
    Low >= 2, High == 0  -> 3   boundary
    Low == 1, High == 0  -> 4   basically no problem
    no errors            -> 5   definitely no problem

Zones: BAD = 1–2, MID = 3, GOOD = 4–5. The only fatal evaluation error is
*cross-band* confusion (expected BAD, got GOOD or the reverse);
:class:`ZoneConfusion` counts it together with zone accuracy, exact match and
±1 match.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["ZONES", "Zone", "ZoneConfusion", "credit_score", "zone"]

Zone = Literal["BAD", "MID", "GOOD"]
ZONES: tuple[Zone, ...] = ("BAD", "MID", "GOOD")


def credit_score(high: int, low: int) -> int:
    """The seed-002 credit score (1–5) for ``high`` / ``low`` severity error counts."""
    if high < 0 or low < 0:
        raise ValueError(f"error counts must be >= 0, got high={high}, low={low}")
    if high >= 3:
        return 1
    if high >= 1:
        return 2
    if low >= 2:
        return 3
    if low == 1:
        return 4
    return 5


def zone(score: int) -> Zone:
    """BAD for 1–2, MID for 3, GOOD for 4–5."""
    if not 1 <= score <= 5:
        raise ValueError(f"credit score must be in 1..5, got {score}")
    return "BAD" if score <= 2 else "MID" if score == 3 else "GOOD"


@dataclass(slots=True)
class ZoneConfusion:
    """Expected-vs-actual credit scores, summarised as a 3×3 zone matrix.

    ``matrix[expected_zone][actual_zone]`` counts cases (rows = expected).
    """

    matrix: dict[Zone, dict[Zone, int]] = field(
        default_factory=lambda: {r: {c: 0 for c in ZONES} for r in ZONES})
    total: int = 0
    exact: int = 0
    within_one: int = 0

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[int, int]]) -> ZoneConfusion:
        """Build from ``(expected_score, actual_score)`` pairs."""
        out = cls()
        for expected, actual in pairs:
            out.add(expected, actual)
        return out

    def add(self, expected: int, actual: int) -> None:
        self.matrix[zone(expected)][zone(actual)] += 1
        self.total += 1
        self.exact += expected == actual
        self.within_one += abs(expected - actual) <= 1

    @property
    def cross_band(self) -> int:
        """BAD→GOOD plus GOOD→BAD cases."""
        return self.matrix["BAD"]["GOOD"] + self.matrix["GOOD"]["BAD"]

    @property
    def zone_correct(self) -> int:
        return sum(self.matrix[z][z] for z in ZONES)

    def _rate(self, n: int) -> float:
        return n / self.total if self.total else 0.0

    @property
    def zone_accuracy(self) -> float:
        return self._rate(self.zone_correct)

    @property
    def cross_band_rate(self) -> float:
        """(BAD→GOOD + GOOD→BAD) / total; seed 002's target is < 5%."""
        return self._rate(self.cross_band)

    @property
    def exact_rate(self) -> float:
        return self._rate(self.exact)

    @property
    def within_one_rate(self) -> float:
        return self._rate(self.within_one)

    def to_dict(self) -> dict[str, object]:
        return {
            "matrix": {r: dict(cols) for r, cols in self.matrix.items()},
            "total": self.total,
            "zone_accuracy": self.zone_accuracy,
            "cross_band_rate": self.cross_band_rate,
            "exact_rate": self.exact_rate,
            "within_one_rate": self.within_one_rate,
        }
