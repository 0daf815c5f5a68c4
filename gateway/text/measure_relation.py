"""How a context's measure bears on an answer's: :func:`relation` says ``MATCH`` (the
same value — rounding, conversion and bounds allowed), ``CONFLICT`` (the same kind of
quantity with another value, an opposite bound on the same value, or the same number in
another unit or kind) or ``UNRELATED``. The measures themselves are read by
:mod:`gateway.text.measures`.
"""

from __future__ import annotations

from math import floor, log10

from gateway.text.measures import COUNT, Measure
from gateway.text.units import unit_named

__all__ = ["CONFLICT", "MATCH", "UNRELATED", "relation"]

MATCH, CONFLICT, UNRELATED = 1, -1, 0


def _round_sig(x: float, sig: int) -> float:
    if x == 0:
        return 0.0
    return round(x, sig - 1 - floor(log10(abs(x))))


def _close(a: Measure, cv: float, converted: bool, fuzzy: bool) -> bool:
    """Whether the answer's ``a.value`` states ``cv`` (the context value in a's unit)."""
    v = a.value
    if abs(v - cv) <= 1e-9 * max(1.0, abs(cv)):
        return True
    if v == 0 or cv == 0:
        return False
    if (converted or a.approx or v >= 1000 or fuzzy) and _round_sig(cv, a.sig) == v:
        return True
    rel = abs(v - cv) / abs(cv)
    if a.approx and fuzzy and rel <= 0.10:
        return True  # "about a month and a half" for 6 weeks
    if fuzzy and rel <= 0.03:
        return True
    return converted and rel <= 0.01


def _dims(a: Measure, c: Measure) -> bool:
    """Same kind of quantity (a rate's denominator may be left unsaid on one side)."""
    if a.dim == c.dim:
        return True
    if a.base_dim != c.base_dim:
        return False
    return a.per is None or c.per is None


def relation(a: Measure, c: Measure) -> int:
    """How the context's ``c`` bears on the answer's ``a``: ``MATCH`` (it states the same
    value, rounding, conversion and bounds allowed), ``CONFLICT`` (the same kind of
    quantity with another value, an opposite bound on the same value, or the same number
    in another unit or kind) or ``UNRELATED``."""
    if not _dims(a, c):
        if a.value == c.value and _unit_kinds_clash(a, c):
            return CONFLICT
        return UNRELATED
    if a.dim in (COUNT, "ordinal", "clock"):
        # Counts of different nouns may be different things ("12 reports", "2 burns").
        same = abs(a.value - c.value) <= 1e-9 * max(1.0, abs(c.value)) or (
            (a.approx or a.value >= 1000) and _round_sig(c.value, a.sig) == a.value)
        if same:
            return CONFLICT if a.bound and c.bound and a.bound != c.bound else MATCH
        if not c.bound and _within_bound(a, c.value):
            return MATCH
        return CONFLICT
    factor_a = a.unit.factor if a.unit is not None else 1.0
    factor_c = c.unit.factor if c.unit is not None else 1.0
    cv = c.base / factor_a
    if a.per is not None and c.per is None and c.unit is not None:
        cv = c.value * factor_c / (factor_a * _per_factor(a))  # compare the numerators
    elif c.per is not None and a.per is None and a.unit is not None:
        cv = c.value * factor_c * _per_factor(c) / factor_a
    converted = a.unit is not None and c.unit is not None and a.unit.name != c.unit.name
    fuzzy = bool((a.unit is not None and a.unit.fuzzy) or (c.unit is not None and c.unit.fuzzy))
    if _close(a, cv, converted, fuzzy):
        if a.bound and c.bound and a.bound != c.bound:
            return CONFLICT  # "over $50" vs "under $50"
        return MATCH
    if not c.bound and not converted and _within_bound(a, cv):
        return MATCH  # "more than $100 billion" for $120 billion, "within 2 hours" for 97 min
    return CONFLICT


def _within_bound(a: Measure, cv: float) -> bool:
    """A bound the context's value satisfies, and that is no wild understatement. "Up to
    80 Nm" states a maximum, not a bound a 60 Nm maximum satisfies: no ceiling here."""
    if a.bound == 1:
        return a.value < cv <= 2 * a.value
    if a.bound == -1 and not a.ceiling:
        return 0.5 * a.value <= cv < a.value
    return False


def _per_factor(m: Measure) -> float:
    """The denominator's factor of a rate ("per hour": 3600)."""
    u = m.unit
    if u is None or "/" not in u.name:
        return 1.0
    den = unit_named(u.name.split("/", 1)[1])
    return den.factor if den is not None else 1.0


def _unit_kinds_clash(a: Measure, c: Measure) -> bool:
    """The same number written in a confusable unit: "5 mg" vs "5 ml", "15 patients"
    vs "15 %", "3 %" vs "three patients" — a unit error, not another quantity."""
    kinds = frozenset((a.base_dim, c.base_dim))
    return kinds in _CONFUSABLE


_CONFUSABLE = frozenset(frozenset(p) for p in (
    (COUNT, "percent"), ("mass", "volume"), ("power", "energy"), ("charge", "energy"),
    ("data", "bitrate"), ("length", "area")))
"""Kinds one unit slip turns into each other ("5 mg" for "5 ml", "15 patients" for
"15 %", "45 W" for "45 Wh"); other pairs with the same number ("3 kg", "3 days") are
different facts, not a unit error."""
