"""The shadow queue: bounded, never blocking, drained with a deadline on close."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from modes.support import RecordingTelemetry
from gateway.settings import ShadowConfig
from gateway.verify.queue import ShadowJob, ShadowQueue

pytestmark = pytest.mark.anyio


def _queue(size: int = 2, workers: int = 1, drain: float = 5.0
           ) -> tuple[ShadowQueue, RecordingTelemetry]:
    tel = RecordingTelemetry()
    q = ShadowQueue(ShadowConfig(queue_size=size, concurrency=workers, drain_seconds=drain), tel)
    q.start()
    return q, tel


async def test_jobs_run_on_workers() -> None:
    q, tel = _queue()
    done: list[int] = []

    async def job(i: int) -> None:
        done.append(i)

    for i in range(2):
        assert q.submit(ShadowJob(lambda i=i: job(i)))  # type: ignore[misc]
    await q.close()
    assert sorted(done) == [0, 1] and q.completed == 2 and tel.total("shadow.enqueued") == 2


async def test_overflow_is_dropped_and_counted_without_waiting() -> None:
    q, tel = _queue(size=1)
    gate = asyncio.Event()
    started = asyncio.Event()
    drops: list[str] = []

    async def hold() -> None:
        started.set()
        await gate.wait()

    assert q.submit(ShadowJob(hold))
    await started.wait()  # the worker holds job 1
    assert q.submit(ShadowJob(hold))  # fills the queue
    assert q.depth == 1
    for _ in range(3):  # submit() is synchronous: it cannot block
        assert not q.submit(ShadowJob(hold, drops.append))
    assert drops == ["dropped"] * 3 and q.dropped == 3 and tel.total("shadow.dropped") == 3
    assert q.status()["dropped"] == 3 and q.status()["capacity"] == 1
    gate.set()
    await q.close()
    assert q.completed == 2


async def test_close_cancels_after_the_drain_deadline() -> None:
    q, tel = _queue(size=5, drain=0)
    started = asyncio.Event()
    cancelled: list[str] = []
    drops: list[str] = []

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("running")
            raise

    q.submit(ShadowJob(forever, drops.append))
    await started.wait()
    q.submit(ShadowJob(forever, drops.append))
    await q.close()
    assert cancelled == ["running"] and drops == ["cancelled"]
    assert q.cancelled == 2 and tel.total("shadow.cancelled") == 2
    assert not q.submit(ShadowJob(forever, drops.append))  # closed: dropped
    assert drops == ["cancelled", "dropped"]


async def test_failing_job_is_counted_and_does_not_stop_the_worker(
        caplog: pytest.LogCaptureFixture) -> None:
    q, tel = _queue()
    ran: list[str] = []

    async def bad() -> None:
        raise ValueError("nope")

    async def good() -> None:
        ran.append("good")

    q.submit(ShadowJob(bad))
    q.submit(ShadowJob(good))
    await q.close()
    assert ran == ["good"] and q.failed == 1 and tel.total("shadow.failed") == 1
    assert "shadow job failed" in caplog.text


async def test_the_waiting_jobs_can_be_shed_with_a_reason_the_running_one_finishes() -> None:
    q, tel = _queue(size=5)
    gate = asyncio.Event()
    started = asyncio.Event()
    drops: list[tuple[str, str | None]] = []

    async def hold() -> str:
        started.set()
        await gate.wait()
        return "verified"

    assert q.submit(ShadowJob(hold))
    await started.wait()  # the worker holds job 1
    waiting = [ShadowJob(hold) for _ in range(3)]
    for job in waiting:
        job.on_drop = lambda why, job=job: drops.append((why, job.reason))  # type: ignore[misc]
        assert q.submit(job)
    assert q.shed_queued("relay_busy") == 3
    assert drops == [("dropped", "relay_busy")] * 3 and q.depth == 0 and q.dropped == 3
    assert tel.total("shadow.dropped") == 3
    assert q.status()["sample"]["total"]["dropped"] == 3
    gate.set()
    await q.close()
    assert q.completed == 1 and q.status()["sample"]["total"]["verified"] == 1


async def test_an_ended_job_lets_go_of_its_closures() -> None:
    """A runner's closures hold their job (run -> cell -> job -> run): once the job has
    ended (run, dropped, or cancelled at shutdown) the queue releases them, so the
    pair is freed at once, not left to the collector."""
    q, _ = _queue(size=1)
    gate = asyncio.Event()
    refs: list[weakref.ref[object]] = []
    seen: list[float] = []

    def make(wait: bool) -> ShadowJob:
        async def run() -> str:
            if wait:
                await gate.wait()
            seen.append(sj.waited)
            return "verified"

        def dropped(why: str) -> None:
            seen.append(sj.waited)

        sj = ShadowJob(run, dropped)
        refs.extend((weakref.ref(run), weakref.ref(dropped)))
        return sj

    enabled = gc.isenabled()
    gc.disable()  # only reference counting frees what follows
    try:
        assert q.submit(make(wait=True))
        for _ in range(50):  # until the worker holds it
            await asyncio.sleep(0)
        assert q.submit(make(wait=False))  # queued behind it
        assert not q.submit(make(wait=False))  # the queue is full: dropped
        gate.set()
        await q.close()
        assert q.completed == 2 and q.dropped == 1 and len(seen) == 3
        assert [r() for r in refs] == [None] * 6
    finally:
        if enabled:
            gc.enable()
