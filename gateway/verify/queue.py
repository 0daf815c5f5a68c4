"""Background verification: the job runner seam, and the bounded queue it runs on.

Shadow audits (and candidate-policy evaluations) run after the client already has
its answer. A :class:`JobRunner` takes :class:`~gateway.verify.job.VerificationJob`
values (``submit(job) -> bool``: never waits; False means shed, counted, and the
record written as not verified). :class:`LocalRunner` is today's implementation:
the jobs run on a :class:`ShadowQueue` in this process. (Worker processes and a
queue feeding ``gateway worker`` s are other implementations of the same seam.)

:class:`ShadowQueue` holds at most ``queue_size`` jobs and runs them on
``concurrency`` worker tasks.

- :meth:`ShadowQueue.submit` never waits: a full (or closed) queue drops the job,
  counts it (``shadow.dropped``) and calls the job's ``on_drop``.
- :attr:`ShadowQueue.depth` is observable (``telemetry.gauge_shadow_depth``).
- :meth:`ShadowQueue.close` stops accepting, lets the workers drain for up to
  ``drain_seconds``, then cancels what is left; every job not run to completion is
  counted (``shadow.cancelled``); queued ones get ``on_drop("cancelled")``, running
  ones see ``CancelledError``.

Its unit of work is a :class:`ShadowJob`: an async callable plus an optional drop
callback. Failures are logged and counted (``shadow.failed``); they never reach a
client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from gateway.settings import ShadowConfig
from gateway.telemetry import Telemetry
from gateway.verify.job import VerificationJob
from gateway.verify.outcome import CandidateOutcome, Outcome
from gateway.verify.record import Recorder
from gateway.verify.verifier import Verifier

__all__ = ["JobRunner", "LocalRunner", "ShadowJob", "ShadowQueue"]

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


# ---- the job runner ------------------------------------------------------------------------


@runtime_checkable
class JobRunner(Protocol):
    """Runs :class:`~gateway.verify.job.VerificationJob` s in the background (shadow
    audits, candidate policies) and writes their records.

    The seam for running verification elsewhere (worker processes, a queue feeding
    ``gateway worker`` s): an implementation takes the job — a picklable value — and
    must never make the caller wait. Today's implementation is :class:`LocalRunner`.
    """

    def submit(self, job: VerificationJob) -> bool:
        """Queue ``job`` without waiting. False: it was shed (the queue is full or
        closed) — counted (``shadow.dropped``), its record written as not verified."""
        ...

    def status(self) -> dict[str, Any]:
        """Counters and state for ``/readyz`` (``accepting`` is required)."""
        ...


class LocalRunner:
    """The in-process :class:`JobRunner`: jobs run on the :class:`ShadowQueue`'s
    workers, in this event loop, through :meth:`Verifier.run
    <gateway.verify.verifier.Verifier.run>`; records go to the recorder.

    Each job's trace (``shadow audit`` or ``candidate policies``, linked to the
    request's span) starts when the job is submitted, while the request's span is
    still open, so that span links back to it."""

    def __init__(self, queue: ShadowQueue, verifier: Verifier, recorder: Recorder,
                 telemetry: Telemetry) -> None:
        self.queue = queue
        self.verifier = verifier
        self.recorder = recorder
        self.telemetry = telemetry

    def status(self) -> dict[str, Any]:
        return self.queue.status()

    def submit(self, job: VerificationJob) -> bool:
        if job.kind == "candidates":
            return self.queue.submit(self._candidates(job))
        return self.queue.submit(self._verify(job))

    def _verify(self, job: VerificationJob) -> ShadowJob:
        trace = self.telemetry.start_shadow(job.trace)
        outcome = Outcome.for_job(job)
        verifier, recorder = self.verifier, self.recorder

        async def run() -> None:
            status, error = 200, None
            try:
                await verifier.run(job, trace, outcome)
            except asyncio.CancelledError:
                status, error = 0, "shadow_cancelled"
                outcome.note = "shadow verification cancelled at shutdown"
                raise
            finally:
                recorder.finish(outcome, trace)
                trace.end(status, error)

        def dropped(why: str) -> None:  # never started
            outcome.note = ("not verified: shadow queue full" if why == "dropped"
                            else "not verified: still queued at shutdown")
            recorder.finish(outcome, trace)
            trace.end(0, f"shadow_{why}")

        return ShadowJob(run, dropped, kind="shadow")

    def _candidates(self, job: VerificationJob) -> ShadowJob:
        trace = self.telemetry.start_shadow(job.trace, "candidate policies")
        verifier, recorder = self.verifier, self.recorder
        done: list[CandidateOutcome] = []

        async def run() -> None:
            try:
                await verifier.run_candidates(job, trace, done)
            finally:
                trace.end(200)
                recorder.write(verifier.candidates_record(job, done))

        def dropped(why: str) -> None:  # never started: write the record here
            names = {c.name for c in done}
            done.extend(CandidateOutcome(c.name, c.version, error=why)
                        for c in job.candidates if c.name not in names)
            trace.end(0, f"shadow_{why}")
            recorder.write(verifier.candidates_record(job, done))

        return ShadowJob(run, dropped, kind="candidates")
