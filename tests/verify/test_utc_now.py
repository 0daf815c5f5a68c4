"""utc_now: the record's timestamps, formatted once per second, read as before."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import gateway.verify.outcome as outcome


@pytest.mark.parametrize("now", [1764115200.0, 1764115200.0004, 1764115200.1234,
                                 1764115200.9991, 1764115201.5, 1764201599.999,
                                 1764201600.001, 1767225599.5, 1767225600.25,
                                 1764115200.9999996])
def test_utc_now_matches_isoformat(monkeypatch: pytest.MonkeyPatch, now: float) -> None:
    monkeypatch.setattr(outcome.time, "time", lambda: now)
    expected = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
    assert outcome.utc_now() == expected.replace("+00:00", "Z")
    assert outcome.utc_now() == expected.replace("+00:00", "Z")  # from the cached second


def test_utc_now_moves_on_with_the_second(monkeypatch: pytest.MonkeyPatch) -> None:
    stamps = []
    for now in (1764115200.5, 1764115201.25, 1764115200.75):
        monkeypatch.setattr(outcome.time, "time", lambda now=now: now)
        stamps.append(outcome.utc_now())
    assert stamps == ["2025-11-26T00:00:00.500Z", "2025-11-26T00:00:01.250Z",
                      "2025-11-26T00:00:00.750Z"]
