"""Closing the process pool is bounded: a worker that does not stop is killed after
``CLOSE_SECONDS`` instead of holding the gateway's exit (a shutdown that waits for it
forever hung a test session once)."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import pytest

import gateway.pool.runner as runner_module
from gateway.pool.channel import WorkerDied
from gateway.pool.runner import ProcessRunner
from gateway.settings import load_settings
from gateway.telemetry import Telemetry
from gateway.verify.queue import ShadowQueue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child not yet reaped is a zombie: gone for our purpose.
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().split(") ", 1)[1][0] != "Z"


def test_a_worker_stuck_in_a_call_is_killed_at_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_module, "CLOSE_SECONDS", 1.0)
    settings = load_settings(environ={}, overrides={})
    telemetry = Telemetry()

    async def scenario() -> tuple[list[int], Any]:
        queue = ShadowQueue(settings.shadow, telemetry)
        pool = ProcessRunner(settings, queue, None, None, telemetry, 1)  # type: ignore[arg-type]
        await pool.start()
        pids = list(pool.pids)
        assert pids and all(map(_alive, pids))
        stuck = asyncio.ensure_future(pool._call(7200, time.sleep, 3600))
        await asyncio.sleep(0.2)  # the call reached the worker
        await asyncio.wait_for(pool.close(), 20)  # returns: the worker was killed
        result = await asyncio.gather(stuck, return_exceptions=True)
        return pids, result[0]

    pids, result = asyncio.run(scenario())
    assert isinstance(result, WorkerDied)
    assert not any(map(_alive, pids))
