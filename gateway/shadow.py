"""The shadow queue: bounded background work that never blocks a client.

Shadow audits (and candidate-policy evaluations) run after the client already has
its answer. :class:`ShadowQueue` holds at most ``queue_size`` jobs and runs them on
``concurrency`` worker tasks.

- :meth:`ShadowQueue.submit` never waits: a full (or closed) queue drops the job,
  counts it (``shadow.dropped``) and calls the job's ``on_drop``.
- :attr:`ShadowQueue.depth` is observable (``telemetry.gauge_shadow_depth``).
- :meth:`ShadowQueue.close` stops accepting, lets the workers drain for up to
  ``drain_seconds``, then cancels what is left; every job not run to completion is
  counted (``shadow.cancelled``); queued ones get ``on_drop("cancelled")``, running
  ones see ``CancelledError``.

A job is a :class:`ShadowJob`: an async callable plus an optional drop callback.
Job failures are logged and counted (``shadow.failed``); they never reach a client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gateway.settings import ShadowConfig
from gateway.telemetry import Telemetry

__all__ = ["ShadowJob", "ShadowQueue"]

log = logging.getLogger("gateway.shadow")


@dataclass(slots=True)
class ShadowJob:
    run: Callable[[], Awaitable[None]]
    on_drop: Callable[[str], None] | None = None
    """Called, for a job that never started, with ``"dropped"`` (queue full or closed) or
    ``"cancelled"`` (still queued at the drain deadline). A running job that is
    cancelled sees ``CancelledError`` itself."""
    kind: str = "audit"

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

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        if self._workers:
            return
        self._accepting = True
        self._workers = [asyncio.create_task(self._worker(i), name=f"shadow-worker-{i}")
                         for i in range(self.config.concurrency)]
        self.telemetry.gauge_shadow_depth(lambda: self.depth)

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
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            return self._drop(job, "full")
        self.enqueued += 1
        self.telemetry.count("shadow.enqueued", 1, {"kind": job.kind})
        return True

    def _drop(self, job: ShadowJob, reason: str) -> bool:
        self.dropped += 1
        self.telemetry.count("shadow.dropped", 1, {"kind": job.kind, "reason": reason})
        job.dropped("dropped")
        return False

    def status(self) -> dict[str, Any]:
        return {"depth": self.depth, "capacity": self.config.queue_size,
                "running": self.running, "workers": len(self._workers),
                "accepting": self._accepting, "enqueued": self.enqueued,
                "dropped": self.dropped, "completed": self.completed,
                "failed": self.failed, "cancelled": self.cancelled}

    # ---- workers -------------------------------------------------------------------------

    async def _worker(self, index: int) -> None:
        while True:
            job = await self._queue.get()
            task = asyncio.current_task()
            assert task is not None
            self._running[task] = job
            try:
                await job.run()
                self.completed += 1
            except asyncio.CancelledError:  # the job saw its own cancellation
                self.cancelled += 1
                self.telemetry.count("shadow.cancelled", 1)
                raise
            except Exception:
                self.failed += 1
                self.telemetry.count("shadow.failed", 1, {"kind": job.kind})
                log.exception("shadow job failed")
            finally:
                self._running.pop(task, None)
                self._queue.task_done()
                # An idle worker waits in get() above: it must not keep the finished
                # job (its request, answer and accumulated stream) alive meanwhile.
                del job
