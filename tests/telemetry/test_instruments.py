"""The instruments every gateway makes at start come from one table
(``_otel_metrics.INSTRUMENTS``): each typed attribute of ``Instruments`` is made from
exactly one row of the right kind, and no metric name is made twice."""

from __future__ import annotations

from gateway.telemetry._otel_metrics import INSTRUMENTS, Instruments


def test_each_declared_instrument_is_made_from_one_row_of_its_kind() -> None:
    declared = {name: kind.lower() for name, kind in Instruments.__annotations__.items()}
    rows = {attribute: kind for attribute, kind, *_ in INSTRUMENTS}
    assert len(rows) == len(INSTRUMENTS)
    assert rows == declared
    made = Instruments(None)
    assert all(getattr(made, name, None) is not None for name in declared)


def test_no_metric_name_is_made_twice() -> None:
    names = [metric for _, _, metric, _, _ in INSTRUMENTS]
    assert len(set(names)) == len(names)
