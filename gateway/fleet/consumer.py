"""The worker's side of fleet mode: :class:`FleetWorker`, what ``gateway worker`` runs.

One worker is one consumer (``name``) of the stream's consumer group. It runs up to
``concurrency`` jobs at once (verification is CPU work: run one worker per core) and:

- **reads** its own pending entries first (a previous life of the same name died
  with them), then new ones (``XREADGROUP … >``, blocking at most a second);
- **verifies** each job with the runtime's policies (``Verifier.run``; a candidates job
  with ``run_candidates``, as the pool's worker does), within its policy's
  ``budget.total_ms`` — past it the job is recorded ``abandoned`` (``on_error`` decides
  the verdict) — and at most ``redis.job_timeout`` (then ``failed``). The budget is kept
  cooperatively, between awaits (as ``LocalRunner``): synchronous text work in a layer
  is not interrupted here, unlike in the pool's worker processes. A job naming a policy
  version this worker has not loaded yet makes it re-read its policies directory once;
- **records** it exactly once, acknowledges it and counts how it ended
  (:mod:`gateway.fleet.settle`, over :mod:`gateway.fleet.ledger`), with the ``shadow``
  field every background job's record has (``result``, ``queue_ms``, this worker's pid);
- **re-claims** entries other consumers left pending for ``redis.claim_idle_seconds``
  (``XAUTOCLAIM``, :mod:`gateway.fleet.claim`; a slow job of its own is not taken
  over), trims the stream and forgets consumers long gone; a job delivered more than
  ``redis.max_deliveries`` times is not verified again but recorded as failed (a poison
  job: it killed or stalled every worker that took it).

An entry that is not a job this worker can read (another format version, a wrong
field: :mod:`gateway.fleet.codec`) is acknowledged, counted (``fleet.rejected``) and,
when it has a readable audit id, recorded as not verified. On :meth:`FleetWorker.run`'s
stop event it stops reading, lets running jobs finish for up to ``drain_seconds``,
acknowledges what was recorded and returns; what did not finish stays pending for
another worker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gateway.fleet.claim import Claimer, Entries
from gateway.fleet.codec import JobFormatError, decode_job
from gateway.fleet.connect import redis_errors
from gateway.fleet.outage import OutageLog, sleep_unless
from gateway.fleet.settle import Settler, Tally
from gateway.fleet.stream import Delivery, deliveries, ensure_group, entries_of
from gateway.redact import exception_summary
from gateway.settings import RedisConfig
from gateway.telemetry import RequestTrace, Telemetry
from gateway.verify.actions import band_action
from gateway.verify.job import VerificationJob
from gateway.verify.outcome import CandidateOutcome, Outcome
from gateway.verify.record import Recorder
from gateway.verify.runner import candidates_result
from gateway.verify.runtime import Runtime
from gateway.verify.verifier import ABANDONED, Verifier, abandoned

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["BLOCK_MS", "Delivery", "FleetWorker"]

log = logging.getLogger("gateway.fleet")

BLOCK_MS = 1000
"""How long one read waits for new entries (the stop event is seen this often)."""
DEFAULT_BUDGET_MS = 5000.0
"""The time of a job whose policy version is not known here (as the pool's worker)."""


class FleetWorker:
    """Consumes, verifies and records jobs (see the module docstring)."""

    def __init__(self, config: RedisConfig, client: Redis, runtime: Runtime,
                 recorder: Recorder, *, name: str, concurrency: int,
                 audit_path: str | None, flush: Callable[[], object] | None = None,
                 drain_seconds: float = 10.0) -> None:
        self.config = config
        self.client = client
        self.runtime = runtime
        self.verifier = Verifier(runtime)
        self.recorder = recorder
        self.telemetry: Telemetry = runtime.telemetry
        self.name = name
        self.concurrency = concurrency
        self.drain_seconds = drain_seconds
        self._errors = redis_errors()
        self._outage = OutageLog()
        self._running: dict[str, asyncio.Task[None]] = {}
        self._slot = asyncio.Event()
        self._last_refresh = 0.0
        tally = Tally(self.telemetry)
        self.counts = tally.counts
        self.settler = Settler(config, client, recorder, tally, self._outage, name=name,
                               audit_path=audit_path, flush=flush)
        self.sample = self.settler.sample
        self.claimer = Claimer(config, client, name=name, concurrency=concurrency,
                               running=self._running.keys(), redeliver=self._redeliver,
                               tally=tally, outage=self._outage)

    # ---- the loop ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set, then drain (see the module docstring)."""
        while not stop.is_set():
            try:
                await ensure_group(self.client, self.config.stream, self.config.group)
                break
            except self._errors as exc:
                self._outage.warn("connect", "fleet: Redis unreachable (%s); retrying",
                                  type(exc).__name__)
                await sleep_unless(stop, 1.0)
        self.telemetry.gauge("shadow.verified_ratio", self.sample.verified_ratio)
        acker = asyncio.create_task(self.settler.acker(), name="fleet-acker")
        loops = [asyncio.create_task(self._reader(stop), name="fleet-reader"),
                 asyncio.create_task(self.claimer.run(stop), name="fleet-claimer")]
        try:
            await stop.wait()
        finally:
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            running = list(self._running.values())
            if running:
                _, late = await asyncio.wait(running, timeout=self.drain_seconds)
                for task in late:
                    task.cancel()
                await asyncio.gather(*running, return_exceptions=True)
            acker.cancel()
            await asyncio.gather(acker, return_exceptions=True)
            await self.settler.ack_now()

    async def _reader(self, stop: asyncio.Event) -> None:
        start = "0"  # this consumer's own pending entries first
        while not stop.is_set():
            free = await self._free_slots()
            try:
                got = await self.client.xreadgroup(
                    self.config.group, self.name, {self.config.stream: start}, count=free,
                    block=None if start == "0" else BLOCK_MS)
            except self._errors as exc:
                self._outage.warn("read", "fleet: reading the stream failed (%s); retrying",
                                  type(exc).__name__)
                await sleep_unless(stop, 1.0)
                continue
            entries = entries_of(got)
            if start != ">":
                if not entries:
                    start = ">"
                    continue
                start = entries[-1][0]
                await self._redeliver(entries)
                continue
            for entry, data in entries:
                self._dispatch(Delivery(entry, data, 1))

    async def _redeliver(self, entries: Entries) -> None:
        """Dispatch entries delivered before (pending, or claimed from another consumer)
        with their delivery counts."""
        counts = await deliveries(self.client, self.config.stream, self.config.group,
                                  self.name, [e for e, _ in entries])
        for entry, data in entries:
            self._dispatch(Delivery(entry, data, counts.get(entry, 1)))

    async def _free_slots(self) -> int:
        while len(self._running) >= self.concurrency:
            self._slot.clear()
            await self._slot.wait()
        return self.concurrency - len(self._running)

    def _dispatch(self, d: Delivery) -> None:
        if d.entry in self._running:  # this process is verifying it already
            return
        task = asyncio.create_task(self._handle(d), name=f"fleet-job-{d.entry}")
        self._running[d.entry] = task

        def done(_: asyncio.Task[None]) -> None:
            self._running.pop(d.entry, None)
            self._slot.set()

        task.add_done_callback(done)

    # ---- one job -------------------------------------------------------------------------

    async def _handle(self, d: Delivery) -> None:
        if d.data is None:  # trimmed away while pending: nothing left to verify
            self.settler.tally.add("lost")
            log.warning("fleet: entry %s was trimmed from the stream before it was verified",
                        d.entry)
            self.settler.ack(d.entry, "")
            return
        try:
            job = decode_job(d.data, max_bytes=self.config.max_job_bytes)
        except JobFormatError as exc:
            await self.settler.reject(d, exc)
            return
        try:
            await self._verify_and_record(d, job)
        except self._errors as exc:  # claim or record step: it stays pending, redelivered
            self._outage.warn("job", "fleet: recording a job failed (%s); it will be "
                              "redelivered", type(exc).__name__)
        except Exception:  # a bug: the job stays pending (and ends as a poison record)
            log.exception("fleet: handling entry %s failed", d.entry)

    async def _verify_and_record(self, d: Delivery, job: VerificationJob) -> None:
        kind = "shadow audit" if job.kind == "verify" else "candidate policies"
        trace = self.telemetry.start_shadow(job.trace, kind)
        outcome = Outcome.for_job(job)
        done: list[CandidateOutcome] = []
        status, error, result = 200, None, "verified"
        if d.deliveries > self.config.max_deliveries:
            status, error, result = 0, "fleet_poison", "failed"
            self._not_run(job, outcome, done, f"not verified: the job failed on "
                          f"{d.deliveries - 1} deliveries (its workers died or stalled); "
                          f"recorded as failed")
        else:
            await self._know_policies(job)
            policy = self.verifier.policy(job.policy)
            budget_s = (policy.spec.budget.total_ms if policy is not None
                        else DEFAULT_BUDGET_MS) / 1000
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(min(budget_s, self.config.job_timeout)):
                    result = await self._run(job, trace, outcome, done)
            except TimeoutError:
                if budget_s <= self.config.job_timeout:
                    status, error, result = 0, "shadow_abandoned", "abandoned"
                    self._abandon(job, outcome, done, (time.perf_counter() - t0) * 1000)
                else:
                    status, error, result = 0, "fleet_timeout", "failed"
                    self._not_run(job, outcome, done, f"not verified: verification took "
                                  f"over redis.job_timeout ({self.config.job_timeout:g}s)")
        write = self.settler.writer(d, job, self.verifier, trace, outcome, done, result)
        try:
            recorded_here = await self.settler.commit(d, job.audit_id, write)
        finally:
            trace.end(status if error is None else 0, error)
        if recorded_here:
            self.settler.settle(job, result)

    async def _run(self, job: VerificationJob, trace: RequestTrace, outcome: Outcome,
                   done: list[CandidateOutcome]) -> str:
        """Verify ``job`` into ``outcome`` (``done`` for a candidates job), as the pool's
        worker does (``Verifier.run`` / ``run_candidates``): how it ended."""
        if job.kind == "candidates":
            try:
                await self.verifier.run_candidates(job, trace, done)
            except Exception as exc:  # noqa: BLE001 - recorded, never fatal to the worker
                log.error("fleet: candidates job failed: %s", exception_summary(exc))
                return "failed"
            return candidates_result(done)
        try:
            await self.verifier.run(job, trace, outcome)
        except Exception as exc:  # noqa: BLE001 - recorded, never fatal to the worker
            log.error("fleet: verification failed: %s", exception_summary(exc))
            outcome.note = f"not verified: verification failed ({exception_summary(exc)})"
            return "failed"
        return candidates_result(outcome.candidates)

    def _abandon(self, job: VerificationJob, outcome: Outcome, done: list[CandidateOutcome],
                 elapsed_ms: float) -> None:
        """Past ``budget.total_ms``: the :func:`abandoned` verdict where the live
        verification had none yet (``on_error`` decides), candidates not run abandoned."""
        policy = self.verifier.policy(job.policy)
        if job.kind == "verify" and policy is not None and outcome.verdict is None:
            v = abandoned(policy, elapsed_ms)
            outcome.record(v)
            outcome.action = band_action(policy.spec.actions, v.verdict).type
        target = done if job.kind == "candidates" else outcome.candidates
        names = {c.name for c in target}
        target.extend(CandidateOutcome(c.name, c.version, error=ABANDONED)
                      for c in job.candidates if c.name not in names)

    @staticmethod
    def _not_run(job: VerificationJob, outcome: Outcome, done: list[CandidateOutcome],
                 note: str) -> None:
        if job.kind == "candidates":
            done[:] = [CandidateOutcome(c.name, c.version, error=note) for c in job.candidates]
        else:
            outcome.note = note

    async def _know_policies(self, job: VerificationJob) -> None:
        """A job naming a policy version not loaded here (the relay reloaded first):
        re-read the policies directory, at most once a second."""
        refs = [job.policy, *job.candidates]
        if all(self.runtime.policy(r) is not None for r in refs):
            return
        if time.monotonic() - self._last_refresh < 1.0:
            return
        self._last_refresh = time.monotonic()
        await asyncio.to_thread(self.runtime.policies.reload)

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "running": len(self._running), **self.counts,
                "sample": self.sample.status()}
