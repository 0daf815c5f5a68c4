"""The relay's end of a worker process (``gateway.pool.channel``), through the runner:
one call at a time per worker, a call given up on leaves the worker busy until its
late reply is read (then it takes the next), and an error travels back as itself."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from gateway.pool.runner import ProcessRunner
from gateway.settings import load_settings
from gateway.telemetry import Telemetry
from gateway.verify.queue import ShadowQueue


def test_a_call_given_up_on_frees_its_worker_once_its_reply_comes() -> None:
    settings = load_settings(environ={}, overrides={})
    telemetry = Telemetry()

    async def scenario() -> tuple[list[int], int, int, bool, int]:
        pool = ProcessRunner(settings, ShadowQueue(settings.shadow, telemetry), None,  # type: ignore[arg-type]
                             None, telemetry, 1)  # type: ignore[arg-type]
        await pool.start()
        try:
            pids = list(pool.pids)
            # A sleep of 1 s cannot answer within 0.1 s, however loaded the box.
            with pytest.raises(TimeoutError):
                await pool._call(0.1, time.sleep, 1.0)
            idle_while_late = pool.idle  # still running the late call
            pid = await pool._call(60, os.getpid)  # waits for it, then runs here
            with pytest.raises(ZeroDivisionError):
                await pool._call(60, divmod, 1, 0)
            return pids, pid, pool.replaced, idle_while_late, len(pool.pids)
        finally:
            await pool.close()

    pids, pid, replaced, idle_while_late, workers = asyncio.run(scenario())
    assert pids == [pid] and replaced == 0 and workers == 1
    assert idle_while_late is False
