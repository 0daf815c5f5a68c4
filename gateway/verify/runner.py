"""Background verification: the job runner seam and its in-process implementation.

Shadow audits (and candidate-policy evaluations) run after the client already has
its answer. A :class:`JobRunner` takes :class:`~gateway.verify.job.VerificationJob`
values. **The contract** (every implementation keeps it; ``docs/architecture.md``):

- ``submit(job) -> bool`` never waits. False: the job was shed (queue full or
  closed) — counted (``shadow.dropped``) and its record written as not verified
  (``shadow.result: dropped``). Every job submitted ends in exactly one audit
  record (for a ``candidates`` job: the live record it completes), whatever
  happens to it: verified, abandoned at its budget, failed (an error, a worker
  that died), dropped, or cancelled at shutdown — each counted in
  ``shadow.settled`` by ``result``. A job's time is its policy's
  ``budget.total_ms``.
- ``status() -> dict`` for ``/readyz``: ``accepting`` (required), the counters,
  and ``sample`` (:class:`~gateway.verify.queue.SampleMeter`: the verified share of the last minute).
- Its lifecycle (start, drain, stop) belongs to whoever opens it (the lifespan).

Implementations: :class:`LocalRunner` runs the jobs on a :class:`~gateway.verify.queue.ShadowQueue` in
this process (tests, embedding); ``gateway.pool.ProcessRunner`` — the default of
``gateway serve`` — feeds the same queue to worker processes.

A job shed before it was built gets its record from :func:`record_shed`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from gateway.telemetry import RequestTrace, Telemetry, TraceLink
from gateway.verify.job import JobKind, PolicyRef, VerificationJob
from gateway.verify.outcome import CandidateOutcome, Outcome
from gateway.verify.queue import ShadowJob, ShadowQueue
from gateway.verify.record import Recorder
from gateway.verify.verifier import ABANDONED, Verifier

__all__ = ["NOT_VERIFIED", "SHED_NOTES", "JobRunner", "LocalRunner", "candidates_result",
           "record_shed", "shadow_info"]


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

    def shed(self, kind: JobKind) -> str | None:
        """Asked before a job is built: why a ``kind`` job submitted now would be shed
        (``full``, ``closed``, ``relay_busy``, …) — it is then counted as shed and the
        caller writes its record itself (:func:`record_shed` with that reason), so a
        shed sample costs no job. None promises nothing (``submit`` may still shed it)."""
        ...

    def status(self) -> dict[str, Any]:
        """Counters and state for ``/readyz`` (``accepting`` is required)."""
        ...


def shadow_info(result: str, job: ShadowJob | None = None,
                worker: int | None = None) -> dict[str, Any]:
    """The ``shadow`` field of a background job's record (see :data:`~gateway.verify.queue.RESULTS`)."""
    waited = job.waited if job is not None and result not in ("dropped", "cancelled") else None
    return {"result": result, "queue_ms": None if waited is None else round(waited * 1000, 3),
            "worker": worker}


NOT_VERIFIED = {"dropped": "not verified: shadow queue full",
                "cancelled": "not verified: still queued at shutdown"}
"""The note of a ``verify`` job's record that never ran, by why."""

SHED_NOTES = {"relay_busy": "not verified: the relay was saturated (shadow sample reduced)"}
"""The note of a job shed before it was built, by the reason :meth:`JobRunner.shed`
gave, where it is not the queue's (``full``, ``closed``: :data:`NOT_VERIFIED`)."""


def record_shed(recorder: Recorder, telemetry: Telemetry, outcome: Outcome,
                candidates: Sequence[PolicyRef], parent: RequestTrace | TraceLink | None,
                why: str = "dropped", reason: str | None = None) -> None:
    """Write the record of a ``verify`` job that never ran (``why``: ``dropped``,
    ``cancelled``) from its request's ``outcome``: the same record as when the
    job was built and then shed (its trace a ``shadow audit`` linked to ``parent``);
    ``reason``: what :meth:`JobRunner.shed` said (its note, :data:`SHED_NOTES`)."""
    trace = telemetry.start_shadow(parent)
    outcome.note = SHED_NOTES.get(reason or "") or NOT_VERIFIED[why]
    outcome.candidates = [CandidateOutcome(c.name, c.version, error=why) for c in candidates]
    outcome.shadow = shadow_info(why)
    recorder.finish(outcome, trace)
    trace.end(0, f"shadow_{why}")


def candidates_result(done: list[CandidateOutcome]) -> str:
    """``abandoned`` when a candidate ran out of the job's time, else ``verified``."""
    return "abandoned" if any(c.error == ABANDONED for c in done) else "verified"


class LocalRunner:
    """The in-process :class:`JobRunner`: jobs run on the :class:`ShadowQueue`'s
    workers, in this event loop, through :meth:`Verifier.run
    <gateway.verify.verifier.Verifier.run>`; records go to the recorder. Budgets are
    kept cooperatively only (between layers and policies): a layer's synchronous work
    cannot be interrupted here — ``gateway.pool.ProcessRunner`` can.

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
        return {**self.queue.status(), "runner": "local"}

    def shed(self, kind: JobKind) -> str | None:
        return self.queue.shed("shadow" if kind == "verify" else "candidates")

    def submit(self, job: VerificationJob) -> bool:
        if job.kind == "candidates":
            return self.queue.submit(self._candidates(job))
        return self.queue.submit(self._verify(job))

    def _verify(self, job: VerificationJob) -> ShadowJob:
        trace = self.telemetry.start_shadow(job.trace)
        outcome = Outcome.for_job(job)
        verifier, recorder = self.verifier, self.recorder

        async def run() -> str:
            status, error, result = 200, None, "cancelled"
            try:
                await verifier.run(job, trace, outcome)
                result = candidates_result(outcome.candidates)
            except asyncio.CancelledError:
                status, error = 0, "shadow_cancelled"
                outcome.note = "shadow verification cancelled at shutdown"
                raise
            except Exception:
                status, error, result = 0, "shadow_failed", "failed"
                raise
            finally:
                outcome.shadow = shadow_info(result, sj, os.getpid())
                recorder.finish(outcome, trace)
                trace.end(status, error)
            return result

        def dropped(why: str) -> None:  # never started
            outcome.note = NOT_VERIFIED[why]
            outcome.shadow = shadow_info(why)
            recorder.finish(outcome, trace)
            trace.end(0, f"shadow_{why}")

        sj = ShadowJob(run, dropped, kind="shadow")
        return sj

    def _candidates(self, job: VerificationJob) -> ShadowJob:
        trace = self.telemetry.start_shadow(job.trace, "candidate policies")
        verifier, recorder = self.verifier, self.recorder
        done: list[CandidateOutcome] = []

        async def run() -> str:
            result = "cancelled"
            try:
                await verifier.run_candidates(job, trace, done)
                result = candidates_result(done)
            except Exception:
                result = "failed"
                raise
            finally:
                trace.end(200)
                record = verifier.candidates_record(job, done)
                record["shadow"] = shadow_info(result, sj, os.getpid())
                recorder.write(record)
            return result

        def dropped(why: str) -> None:  # never started: write the record here
            names = {c.name for c in done}
            done.extend(CandidateOutcome(c.name, c.version, error=why)
                        for c in job.candidates if c.name not in names)
            trace.end(0, f"shadow_{why}")
            record = verifier.candidates_record(job, done)
            record["shadow"] = shadow_info(why)
            recorder.write(record)

        sj = ShadowJob(run, dropped, kind="candidates")
        return sj
