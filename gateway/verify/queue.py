"""The bounded queue background verification runs on (the job runners of
:mod:`gateway.verify.runner` feed it).

:class:`ShadowQueue` holds at most ``queue_size`` jobs and runs them on
``concurrency`` worker tasks.

- :meth:`ShadowQueue.submit` never waits: a full (or closed) queue drops the job,
  counts it (``shadow.dropped``) and calls the job's ``on_drop``;
  :meth:`ShadowQueue.shed_queued` drops the waiting jobs the same way (a runner that
  sheds: ``gateway.pool``'s saturated relay).
- :attr:`ShadowQueue.depth` is observable (``telemetry.gauge_shadow_depth``), and
  so is the time each job waited (``shadow.queue.wait``, also :attr:`ShadowJob.waited`).
- :meth:`ShadowQueue.close` stops accepting, lets the workers drain for up to
  ``drain_seconds``, then cancels what is left; every job not run to completion is
  counted (``shadow.cancelled``); queued ones get ``on_drop("cancelled")``, running
  ones see ``CancelledError``.

Its unit of work is a :class:`ShadowJob`: an async callable (returning how the job
ended: ``verified``, ``abandoned`` or ``failed``; None is ``verified``) plus an
optional drop callback. Failures are logged and counted (``shadow.failed``); they
never reach a client. :class:`SampleMeter` keeps the verified share of the last
minute for ``/readyz``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gateway.settings import ShadowConfig
from gateway.telemetry import Telemetry

__all__ = ["RESULTS", "SampleMeter", "ShadowJob", "ShadowQueue"]

RESULTS = ("verified", "abandoned", "failed", "dropped", "cancelled")
"""How a background job can end (``shadow.result`` in its record and metrics)."""

log = logging.getLogger("gateway.shadow")


class SampleMeter:
    """How background jobs ended over the last minute (six 10-second buckets) and in
    all: the verified share of the shadow sample."""

    WINDOW_S = 60.0
    _BUCKET_S = 10.0

    def __init__(self) -> None:
        self.totals: dict[str, int] = dict.fromkeys(RESULTS, 0)
        self._buckets: dict[int, dict[str, int]] = {}

    def settle(self, result: str) -> None:
        self.totals[result] = self.totals.get(result, 0) + 1
        now = int(time.monotonic() // self._BUCKET_S)
        bucket = self._buckets.get(now)
        if bucket is None:
            oldest = now - int(self.WINDOW_S // self._BUCKET_S)
            for key in [k for k in self._buckets if k <= oldest]:
                del self._buckets[key]
            bucket = self._buckets[now] = {}
        bucket[result] = bucket.get(result, 0) + 1

    def recent(self) -> dict[str, int]:
        """Jobs settled in the last :attr:`WINDOW_S` seconds, by result."""
        oldest = int(time.monotonic() // self._BUCKET_S) - int(self.WINDOW_S // self._BUCKET_S)
        out = dict.fromkeys(RESULTS, 0)
        for key, bucket in self._buckets.items():
            if key > oldest:
                for result, n in bucket.items():
                    out[result] = out.get(result, 0) + n
        return out

    def verified_ratio(self) -> float | None:
        """Verified / settled over the last minute (None: nothing settled)."""
        recent = self.recent()
        settled = sum(recent.values())
        return recent["verified"] / settled if settled else None

    def status(self) -> dict[str, Any]:
        ratio = self.verified_ratio()
        return {"last_minute": self.recent(), "verified_ratio_last_minute":
                None if ratio is None else round(ratio, 4), "total": dict(self.totals)}


async def _spent() -> str | None:
    """A released :class:`ShadowJob`'s ``run``: it has already ended."""
    return None


@dataclass(slots=True)
class ShadowJob:
    run: Callable[[], Awaitable[str | None]]
    """Runs the job; returns how it ended (``verified``, ``abandoned``, ``failed``;
    None: ``verified``)."""
    on_drop: Callable[[str], None] | None = None
    """Called, for a job that never started, with ``"dropped"`` (queue full or closed) or
    ``"cancelled"`` (still queued at the drain deadline). A running job that is
    cancelled sees ``CancelledError`` itself."""
    kind: str = "audit"
    submitted: float = 0.0
    """``time.monotonic()`` when it was queued."""
    waited: float = 0.0
    """Seconds it waited in the queue (set when it starts)."""
    reason: str | None = None
    """Why it was dropped from the queue when not for the queue's own reasons (the
    runner's shed reason: :meth:`ShadowQueue.shed_queued`), for its record."""

    def release(self) -> None:
        """Let go of ``run`` and ``on_drop`` once the job has ended: a runner's
        closures usually hold the job itself (its record reads ``waited``), so the pair
        would otherwise stay alive as a reference cycle until the collector's next pass
        (a busy relay ends thousands of jobs between two)."""
        self.run = _spent
        self.on_drop = None

    def dropped(self, why: str) -> None:
        if self.on_drop is not None:
            try:
                self.on_drop(why)
            except Exception:  # a drop callback must not break the caller
                log.exception("shadow job drop callback failed")


class ShadowQueue:
    """Bounded queue + worker pool. Create and :meth:`start` inside a running loop."""

    def __init__(self, config: ShadowConfig, telemetry: Telemetry) -> None:
        self.config = config
        self.telemetry = telemetry
        self._queue: asyncio.Queue[ShadowJob] = asyncio.Queue(maxsize=config.queue_size)
        self._workers: list[asyncio.Task[None]] = []
        self._running: dict[asyncio.Task[None], ShadowJob] = {}
        self._accepting = False
        self.enqueued = 0
        self.dropped = 0
        self.completed = 0
        self.failed = 0
        self.cancelled = 0
        self.abandoned = 0
        self.sample = SampleMeter()

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        if self._workers:
            return
        self._accepting = True
        self._workers = [asyncio.create_task(self._worker(i), name=f"shadow-worker-{i}")
                         for i in range(self.config.concurrency)]
        self.telemetry.gauge_shadow_depth(lambda: self.depth)
        self.telemetry.gauge("shadow.verified_ratio", self.sample.verified_ratio)

    async def close(self) -> None:
        """Drain for up to ``drain_seconds``, then cancel the rest (counted)."""
        self._accepting = False
        if not self._workers:
            return
        try:
            await asyncio.wait_for(self._queue.join(), self.config.drain_seconds)
        except TimeoutError:
            log.warning("shadow queue: drain deadline (%.1fs) passed with %d job(s) left",
                        self.config.drain_seconds, self.depth + len(self._running))
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []
        left = 0
        while not self._queue.empty():
            job = self._queue.get_nowait()
            self._queue.task_done()
            job.dropped("cancelled")
            self.settle(job, "cancelled")
            left += 1
        if left:
            self.cancelled += left
            self.telemetry.count("shadow.cancelled", left)

    # ---- use -----------------------------------------------------------------------------

    @property
    def depth(self) -> int:
        """Jobs waiting (not counting the ones running)."""
        return self._queue.qsize()

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def accepting(self) -> bool:
        return self._accepting

    def submit(self, job: ShadowJob) -> bool:
        """Enqueue ``job`` without waiting; False (counted, dropped) when full or closed."""
        if not self._accepting:
            return self._drop(job, "closed")
        job.submitted = time.monotonic()
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            return self._drop(job, "full")
        self.enqueued += 1
        self.telemetry.count("shadow.enqueued", 1, {"kind": job.kind})
        return True

    def shed(self, kind: str) -> str | None:
        """Whether a job of ``kind`` submitted now would be dropped (queue full or
        closed): why (``full``, ``closed``), counted as dropped now as :meth:`submit`
        would count it, and its caller writes its record without building the job
        (shedding costs the relay as little as possible); None: it would be taken."""
        if self._accepting and not self._queue.full():
            return None
        reason = "full" if self._accepting else "closed"
        self.count_shed(kind, reason)
        return reason

    def shed_queued(self, reason: str) -> int:
        """Drop every job still waiting (not the running ones), each counted as dropped
        for ``reason`` (``shadow.dropped``) and given ``on_drop("dropped")`` with
        :attr:`ShadowJob.reason` set: how many. The runner's shed (a saturated relay)
        applies to a backlog queued before it as to new jobs."""
        n = 0
        while not self._queue.empty():
            job = self._queue.get_nowait()
            self._queue.task_done()
            job.reason = reason
            self._drop(job, reason)
            n += 1
        return n

    def count_shed(self, kind: str, reason: str) -> None:
        """Count a job of ``kind`` shed before it was built (``shadow.dropped`` by
        ``reason``, settled ``dropped``)."""
        self._count_drop(kind, reason)
        self._settle(kind, "dropped")

    def _drop(self, job: ShadowJob, reason: str) -> bool:
        self._count_drop(job.kind, reason)
        job.dropped("dropped")
        self.settle(job, "dropped")
        return False

    def _count_drop(self, kind: str, reason: str) -> None:
        self.dropped += 1
        self.telemetry.count("shadow.dropped", 1, {"kind": kind, "reason": reason})

    def settle(self, job: ShadowJob, result: str) -> None:
        """Count how ``job`` ended (``shadow.settled``, the sample meter); it is
        released (:meth:`ShadowJob.release`): every end of a job passes here."""
        self._settle(job.kind, result)
        job.release()

    def _settle(self, kind: str, result: str) -> None:
        self.sample.settle(result)
        self.telemetry.count("shadow.settled", 1, {"kind": kind, "result": result})
        if result == "abandoned":
            self.abandoned += 1
            self.telemetry.count("shadow.abandoned", 1, {"kind": kind})

    def status(self) -> dict[str, Any]:
        return {"depth": self.depth, "capacity": self.config.queue_size,
                "running": self.running, "workers": len(self._workers),
                "accepting": self._accepting, "enqueued": self.enqueued,
                "dropped": self.dropped, "completed": self.completed,
                "failed": self.failed, "cancelled": self.cancelled,
                "abandoned": self.abandoned, "sample": self.sample.status()}

    # ---- workers -------------------------------------------------------------------------

    async def _worker(self, index: int) -> None:
        while True:
            job = await self._queue.get()
            task = asyncio.current_task()
            assert task is not None
            self._running[task] = job
            job.waited = time.monotonic() - job.submitted
            self.telemetry.observe("shadow.queue.wait", job.waited, {"kind": job.kind})
            try:
                result = await job.run() or "verified"
                self.completed += 1
                if result == "failed":
                    self.failed += 1
                    self.telemetry.count("shadow.failed", 1, {"kind": job.kind})
                self.settle(job, result)
            except asyncio.CancelledError:  # the job saw its own cancellation
                self.cancelled += 1
                self.telemetry.count("shadow.cancelled", 1)
                self.settle(job, "cancelled")
                raise
            except Exception:
                self.failed += 1
                self.telemetry.count("shadow.failed", 1, {"kind": job.kind})
                self.settle(job, "failed")
                log.exception("shadow job failed")
            finally:
                self._running.pop(task, None)
                self._queue.task_done()
                # An idle worker waits in get() above: it must not keep the finished
                # job (its request, answer and accumulated stream) alive meanwhile.
                del job
