"""Derived values: an answer's number computed from numbers the texts state.

A faithful answer may state what the context implies rather than says: "15 % of the
120 patients, *18 people*"; "two months' rent of €1,450, *€2,900*"; "4.25 % a year in
two instalments, *2.125 %* each"; "landed *four days* after the 16 July launch" (20 July).
:func:`derivations` tries the small arithmetic such answers use — a product or
quotient of a stated value and a stated multiplier, a percentage of a value, the days
between two dates — over a small pool of operands (the values of
the context sentences the answer aligns with, the answer sentence's own, and the
question's) and returns how the answer's value can be obtained.

Only stated operands are used (never an arbitrary constant), so "480,000" is not
"48,000 x 10". Sums and differences are not tried: over a handful of durations or
amounts almost any small number is one ("6 hours" = 2 h + 4 h). Tolerance follows the answer's precision (rounding to its significant
digits), never a hedge's looser one: a derivation is a weaker support. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from itertools import combinations
from math import floor, log10

from gateway.text.measures import COUNT, Measure
from gateway.text.quantities import DateRef

__all__ = ["Derivation", "Operand", "derivations"]

MAX_OPERANDS = 24
_NOT_ARITHMETIC = frozenset(["ordinal", "clock"])
"""At most this many operands are tried (pairs grow quadratically)."""


@dataclass(frozen=True, slots=True)
class Operand:
    value: float
    """In the base unit of ``dim`` (a percentage as its number of percent)."""
    dim: str
    text: str
    origin: str
    """``context``, ``answer`` or ``question``."""
    raw: float = 0.0
    """The number as written ("two months" -> 2), a multiplier for another value."""


@dataclass(frozen=True, slots=True)
class Derivation:
    how: str
    operands: tuple[Operand, ...]


def _round_sig(x: float, sig: int) -> float:
    if x == 0:
        return 0.0
    return round(x, sig - 1 - floor(log10(abs(x))))


def _states(a: Measure, value_base: float) -> bool:
    """Whether ``a`` states ``value_base`` (in its dimension's base unit)."""
    factor = a.unit.factor if a.unit is not None else 1.0
    v = value_base / factor
    if v <= 0 or a.value <= 0:
        return False
    if abs(v - a.value) <= 1e-9 * a.value:
        return True
    # Rounded to the answer's precision, but a round "1000" is no rounding of 1,150.
    return a.sig >= 2 and _round_sig(v, a.sig) == a.value and abs(v - a.value) <= 0.05 * v


def operands_of(measures: Sequence[Measure], origin: str) -> list[Operand]:
    return [Operand(m.base, m.dim, m.text, origin, m.value) for m in measures
            if m.base > 0]


def _days(d: DateRef, default_year: int | None) -> date | None:
    year = d.year if d.year is not None else default_year
    if year is None or d.month is None or d.day is None:
        return None
    try:
        return date(year, d.month, d.day)
    except ValueError:
        return None


def derivations(a: Measure, operands: Sequence[Operand],
                dates: Sequence[DateRef] = ()) -> list[Derivation]:
    """How ``a`` follows from two of ``operands`` (or from two ``dates``), if it does."""
    out: list[Derivation] = []
    ops = list(operands)[:MAX_OPERANDS]
    dim = a.dim
    if dim in _NOT_ARITHMETIC or dim.startswith("temperature"):
        return out
    plain = dim in (COUNT, "percent") or dim.startswith("currency")
    for x, y in combinations(ops, 2):
        for p, q in ((x, y), (y, x)):
            # A product or quotient keeps the answer's dimension when the other side is a
            # stated multiplier ("two months' rent" x €1,450; 4.25 % / two instalments).
            if p.dim == dim and q.dim != dim and 1 < q.raw <= 1000:
                if _states(a, p.value * q.raw):
                    out.append(Derivation("product", (p, q)))
                elif _states(a, p.value / q.raw):
                    out.append(Derivation("quotient", (p, q)))
            if p.dim == "percent" and q.dim == dim and plain and _states(a, p.value * q.value / 100):
                out.append(Derivation("share", (p, q)))
    if dim == "time" and len(dates) >= 2:
        years = [d.year for d in dates if d.year is not None]
        default = years[0] if years else None
        for d1, d2 in combinations(dates, 2):
            t1, t2 = _days(d1, default), _days(d2, default)
            if t1 is None or t2 is None:
                continue
            gap = abs((t2 - t1).days) * 86400.0
            if gap and _states(a, gap):
                out.append(Derivation("dates", (Operand(0, "date", d1.text, "context"),
                                                Operand(0, "date", d2.text, "context"))))
    return out
