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
- **records** it exactly once (:mod:`gateway.fleet.ledger`: claim, write, flush the
  audit sink, then acknowledge and drop the claim, in batches), with the ``shadow``
  field every background job's record has (``gateway.verify.queue.shadow_info``:
  ``result``, ``queue_ms`` since Redis added the entry, this worker's pid), and counts
  how it ended (``shadow.settled``, the ``shadow.verified_ratio`` of this worker);
- **re-claims** entries other consumers left pending for ``redis.claim_idle_seconds``
  (``XAUTOCLAIM``; its own running entries are kept fresh meanwhile, so a slow job is
  not taken over); a job delivered more than ``redis.max_deliveries`` times is not
  verified again but recorded as failed (a poison job: it killed or stalled every
  worker that took it); an entry trimmed from the stream before it was verified is
  counted (``fleet.lost``) and logged;
- **trims** the stream up to the oldest entry some consumer group still needs, and
  forgets consumers idle for an hour with nothing pending.

An entry that is not a job this worker can read (another format version, a wrong
field: :mod:`gateway.fleet.codec`) is acknowledged, counted (``fleet.rejected``) and,
when it has a readable audit id, recorded as not verified. On :meth:`FleetWorker.run`'s
stop event it stops reading, lets running jobs finish for up to ``drain_seconds``,
acknowledges what was recorded and returns; what did not finish stays pending for
another worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.fleet.codec import JobFormatError, decode_job, peek_audit_id
from gateway.fleet.connect import redis_errors
from gateway.fleet.ledger import DONE, Held, Ledger, recorded
from gateway.fleet.stream import (
    deliveries,
    ensure_group,
    entries_of,
    forget_idle_consumers,
    text,
    trim,
)
from gateway.redact import exception_summary
from gateway.settings import RedisConfig
from gateway.telemetry import RequestTrace, Telemetry
from gateway.verify.actions import band_action
from gateway.verify.job import VerificationJob
from gateway.verify.outcome import CandidateOutcome, Outcome, utc_now
from gateway.verify.queue import SampleMeter, candidates_result, shadow_info
from gateway.verify.record import Recorder
from gateway.verify.runtime import Runtime
from gateway.verify.verifier import ABANDONED, Verifier, abandoned

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["Delivery", "FleetWorker"]

log = logging.getLogger("gateway.fleet")

BLOCK_MS = 1000
"""How long one read waits for new entries (the stop event is seen this often)."""
HOUSEKEEPING_SECONDS = 300.0
DEFAULT_BUDGET_MS = 5000.0
"""The time of a job whose policy version is not known here (as the pool's worker)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery of a stream entry: its id, the encoded job (None: the entry was
    trimmed away) and how many times it has been delivered, this one included."""

    entry: str
    data: bytes | None
    deliveries: int


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
        self.audit_path = audit_path
        self.flush = flush
        self.drain_seconds = drain_seconds
        self.ledger = Ledger(client, config.stream, config.group)
        self._token = f"{name}:{os.getpid()}:{secrets.token_hex(4)}"
        self._errors = redis_errors()
        self._running: dict[str, asyncio.Task[None]] = {}
        self._slot = asyncio.Event()
        self._acks: list[tuple[str, str]] = []
        self._ack_wake = asyncio.Event()
        self._last_refresh = 0.0
        self._last_housekeeping = 0.0
        self._warned: dict[str, float] = {}
        self.counts: dict[str, int] = {k: 0 for k in (
            "verified", "abandoned", "failed", "duplicates", "rejected", "lost", "claimed")}
        self.sample = SampleMeter()
        """How the jobs this worker recorded ended (the verified share of the sample)."""

    # ---- the loop ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set, then drain (see the module docstring)."""
        while not stop.is_set():
            try:
                await ensure_group(self.client, self.config.stream, self.config.group)
                break
            except self._errors as exc:
                self._warn("connect", "fleet: Redis unreachable (%s); retrying",
                           type(exc).__name__)
                await _sleep_unless(stop, 1.0)
        self.telemetry.gauge("shadow.verified_ratio", self.sample.verified_ratio)
        acker = asyncio.create_task(self._acker(), name="fleet-acker")
        loops = [asyncio.create_task(self._reader(stop), name="fleet-reader"),
                 asyncio.create_task(self._claimer(stop), name="fleet-claimer")]
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
            await self._ack_now()

    async def _reader(self, stop: asyncio.Event) -> None:
        start = "0"  # this consumer's own pending entries first
        while not stop.is_set():
            free = await self._free_slots()
            try:
                got = await self.client.xreadgroup(
                    self.config.group, self.name, {self.config.stream: start}, count=free,
                    block=None if start == "0" else BLOCK_MS)
            except self._errors as exc:
                self._warn("read", "fleet: reading the stream failed (%s); retrying",
                           type(exc).__name__)
                await _sleep_unless(stop, 1.0)
                continue
            entries = entries_of(got)
            if start != ">":
                if not entries:
                    start = ">"
                    continue
                start = entries[-1][0]
                counts = await self._deliveries([e for e, _ in entries])
                for entry, data in entries:
                    self._dispatch(Delivery(entry, data, counts.get(entry, 1)))
                continue
            for entry, data in entries:
                self._dispatch(Delivery(entry, data, 1))

    async def _claimer(self, stop: asyncio.Event) -> None:
        interval = max(0.2, self.config.claim_idle_seconds / 3)
        while not stop.is_set():
            await _sleep_unless(stop, interval)
            if stop.is_set():
                return
            try:
                await self._keep_fresh()
                await self._claim_idle()
                if time.monotonic() - self._last_housekeeping >= HOUSEKEEPING_SECONDS:
                    await self._housekeeping()
                else:
                    await trim(self.client, self.config.stream)
            except self._errors as exc:
                self._warn("claim", "fleet: claiming idle entries failed (%s)",
                           type(exc).__name__)

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

    # ---- redelivery ----------------------------------------------------------------------

    async def _keep_fresh(self) -> None:
        """Reset the idle time of the entries this worker is running (no re-claim)."""
        if self._running:
            await self.client.xclaim(self.config.stream, self.config.group, self.name, 0,
                                     list(self._running), justid=True)

    async def _claim_idle(self) -> None:
        free = self.concurrency - len(self._running)
        if free <= 0:
            return
        reply = await self.client.xautoclaim(
            self.config.stream, self.config.group, self.name,
            int(self.config.claim_idle_seconds * 1000), start_id="0-0", count=free)
        claimed = [(entry, data) for entry, data in entries_of([[b"", reply[1]]])
                   if entry not in self._running]
        deleted = [text(e) for e in (reply[2] if len(reply) > 2 else [])]
        if deleted:
            self.counts["lost"] += len(deleted)
            self.telemetry.count("fleet.lost", len(deleted))
            log.warning("fleet: %d pending job(s) were trimmed from the stream before they "
                        "were verified (ids %s…); raise redis.maxlen or add workers",
                        len(deleted), deleted[0])
        if not claimed:
            return
        self.counts["claimed"] += len(claimed)
        self.telemetry.count("fleet.claimed", len(claimed))
        counts = await self._deliveries([e for e, _ in claimed])
        for entry, data in claimed:
            self._dispatch(Delivery(entry, data, counts.get(entry, 1)))

    async def _deliveries(self, entries: list[str]) -> dict[str, int]:
        return await deliveries(self.client, self.config.stream, self.config.group,
                                self.name, entries)

    async def _housekeeping(self) -> None:
        self._last_housekeeping = time.monotonic()
        await trim(self.client, self.config.stream)
        await forget_idle_consumers(self.client, self.config.stream, self.config.group,
                                    keep=self.name)

    # ---- one job -------------------------------------------------------------------------

    async def _handle(self, d: Delivery) -> None:
        if d.data is None:  # trimmed away while pending: nothing left to verify
            self.counts["lost"] += 1
            self.telemetry.count("fleet.lost", 1)
            log.warning("fleet: entry %s was trimmed from the stream before it was verified",
                        d.entry)
            self._ack(d.entry, "")
            return
        try:
            job = decode_job(d.data, max_bytes=self.config.max_job_bytes)
        except JobFormatError as exc:
            await self._reject(d, exc)
            return
        try:
            await self._verify_and_record(d, job)
        except self._errors as exc:  # claim or record step: it stays pending, redelivered
            self._warn("job", "fleet: recording a job failed (%s); it will be redelivered",
                       type(exc).__name__)
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
        write = self._writer(job, trace, outcome, done, shadow_info(result, None, os.getpid()))
        try:
            recorded_here = await self._commit(d, job.audit_id, self._timed(d, write))
        finally:
            trace.end(status if error is None else 0, error)
        if recorded_here:
            self._settle(job, result)

    def _timed(self, d: Delivery, write: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """``write`` with the record's ``shadow.queue_ms``: from the stream entry's id
        (the time Redis added it, on Redis' clock) to now (this worker's clock)."""
        def go() -> None:
            write({"queue_ms": _queue_ms(d.entry)})
        return go

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

    def _writer(self, job: VerificationJob, trace: RequestTrace, outcome: Outcome,
                done: list[CandidateOutcome],
                shadow: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        """What writes the job's record, its ``shadow`` field (``shadow_info``) updated
        with the given keys at write time."""
        if job.kind == "candidates":
            names = {c.name for c in done}
            done.extend(CandidateOutcome(c.name, c.version, error="not run")
                        for c in job.candidates if c.name not in names)
            record = self.verifier.candidates_record(job, done)

            def write_candidates(extra: dict[str, Any]) -> None:
                record["shadow"] = {**shadow, **extra}
                self.recorder.write(record)
            return write_candidates

        def write_verify(extra: dict[str, Any]) -> None:
            outcome.shadow = {**shadow, **extra}
            self.recorder.finish(outcome, trace)
        return write_verify

    def _settle(self, job: VerificationJob, result: str) -> None:
        """Count how a job this worker recorded ended (as the relay's queue counts its
        own: ``shadow.settled``, the sample meter; and the ``fleet.*`` counters)."""
        kind = "shadow" if job.kind == "verify" else "candidates"
        self.sample.settle(result)
        self.telemetry.count("shadow.settled", 1, {"kind": kind, "result": result})
        if result == "abandoned":
            self.telemetry.count("shadow.abandoned", 1, {"kind": kind})
        self.counts[result] = self.counts.get(result, 0) + 1
        if result in ("verified", "failed"):
            self.telemetry.count(f"fleet.{result}", 1)

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

    async def _commit(self, d: Delivery, audit_id: str, write: Callable[[], None]) -> bool:
        """Record the job once (see :mod:`gateway.fleet.ledger`); True if this delivery
        wrote the record."""
        token = f"{self._token}:{d.entry}:{d.deliveries}"
        got = await self.ledger.claim(d.entry, audit_id, token)
        if isinstance(got, Held):
            if await asyncio.to_thread(recorded, self.audit_path, audit_id):
                return self._duplicate(d, audit_id, ack=True)
            log.info("fleet: job %s was claimed by %s, which did not record it; recording it",
                     d.entry, got.token.rsplit(":", 2)[0])
            got = await self.ledger.claim(d.entry, audit_id, token, force=True)
        if got == DONE:
            return self._duplicate(d, audit_id, ack=False)
        write()
        self._ack(d.entry, audit_id)
        return True

    def _duplicate(self, d: Delivery, audit_id: str, *, ack: bool) -> bool:
        self.counts["duplicates"] += 1
        self.telemetry.count("fleet.duplicates", 1)
        if ack:
            self._ack(d.entry, audit_id)
        return False

    async def _reject(self, d: Delivery, exc: JobFormatError) -> None:
        self.counts["rejected"] += 1
        self.telemetry.count("fleet.rejected", 1)
        log.warning("fleet: entry %s is not a job this worker reads: %s", d.entry, exc)
        audit_id = peek_audit_id(d.data or b"")
        if audit_id is None:
            self._ack(d.entry, "")
            return
        record = {"audit_id": audit_id, "finished_at": utc_now(),
                  "note": f"not verified: unreadable job ({exc})",
                  "shadow": {**shadow_info("failed", None, os.getpid()),
                             "queue_ms": _queue_ms(d.entry)}}
        try:
            if await self._commit(d, audit_id, lambda: self.recorder.write(record)):
                self.sample.settle("failed")
                self.telemetry.count("shadow.settled", 1, {"kind": "shadow",
                                                           "result": "failed"})
        except self._errors as err:
            self._warn("job", "fleet: recording a job failed (%s); it will be redelivered",
                       type(err).__name__)

    # ---- acknowledgement -----------------------------------------------------------------

    def _ack(self, entry: str, audit_id: str) -> None:
        self._acks.append((entry, audit_id))
        self._ack_wake.set()

    async def _acker(self) -> None:
        while True:
            await self._ack_wake.wait()
            self._ack_wake.clear()
            try:
                await self._ack_now()
            except self._errors as exc:
                self._warn("ack", "fleet: acknowledging failed (%s); retrying",
                           type(exc).__name__)
                await asyncio.sleep(1.0)
                self._ack_wake.set()

    async def _ack_now(self) -> None:
        """Flush the audit sink, then acknowledge what it holds (a record reaches the
        file before its entry leaves the pending list)."""
        if not self._acks:
            return
        batch, self._acks = self._acks, []
        try:
            if self.flush is not None:
                await asyncio.to_thread(self.flush)
            await self.ledger.ack(batch)
        except BaseException:
            self._acks[:0] = batch
            raise

    def _warn(self, kind: str, message: str, *args: Any) -> None:
        """A warning line per kind at most every 10 s (a Redis outage must not flood)."""
        now = time.monotonic()
        if now - self._warned.get(kind, -10.0) >= 10.0:
            self._warned[kind] = now
            log.warning(message, *args)

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "running": len(self._running), **self.counts,
                "sample": self.sample.status()}


# ---- helpers -------------------------------------------------------------------------------


def _queue_ms(entry: str) -> float | None:
    """Milliseconds since Redis added the entry (its id's time part), never negative."""
    try:
        added = int(entry.split("-", 1)[0])
    except ValueError:
        return None
    return round(max(0.0, time.time() * 1000 - added), 3)


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
