"""``pool.workers`` unset: the cores the relay processes do not need, shared among them
(``serve --workers N`` must not open N × (cpus − 1) verification processes)."""

from __future__ import annotations

import pytest

from gateway.pool.runner import default_workers


@pytest.mark.parametrize(("cpus", "relays", "expected"), [
    (1, 1, 1), (2, 1, 1), (8, 1, 7),          # one relay: cpus - 1, at least one
    (2, 2, 1), (8, 2, 3), (8, 4, 1), (16, 4, 3), (4, 8, 1),
])
def test_default_workers_per_relay(monkeypatch: pytest.MonkeyPatch, cpus: int, relays: int,
                                   expected: int) -> None:
    monkeypatch.setattr("gateway.pool.runner.os.sched_getaffinity",
                        lambda _pid: set(range(cpus)), raising=False)
    assert default_workers(relays) == expected
    assert relays + relays * expected <= max(cpus, 2 * relays), "relays + pools fit the box"
