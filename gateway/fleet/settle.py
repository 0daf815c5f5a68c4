"""Settling a delivered job, the worker's side of :mod:`gateway.fleet.ledger`: record it
exactly once, acknowledge it, and count how it ended.

- :meth:`Settler.writer` is what writes a verified (or abandoned, failed) job's record;
  :meth:`Settler.commit` claims the job in the ledger and writes its record, unless
  another delivery recorded it already (a duplicate, counted) — a claim whose holder
  died without recording is settled by reading the audit file;
- :meth:`Settler.reject` records an entry that is not a job this worker reads (when it
  has a readable audit id) as not verified, and acknowledges it either way;
- acknowledgements are batched: the audit sink is flushed first, so a record reaches
  the file before its entry leaves the pending list (:meth:`Settler.acker`);
- :class:`Tally` counts how the jobs ended: the worker's ``status`` and the ``fleet.*``
  counters; :meth:`Settler.settle` adds ``shadow.settled`` and the sample meter.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

from gateway.fleet.codec import JobFormatError, peek_audit_id
from gateway.fleet.connect import redis_errors
from gateway.fleet.ledger import DONE, Held, Ledger, recorded
from gateway.fleet.outage import OutageLog
from gateway.fleet.stream import Delivery, queue_ms
from gateway.settings import RedisConfig
from gateway.telemetry import RequestTrace, Telemetry
from gateway.verify.job import VerificationJob
from gateway.verify.outcome import CandidateOutcome, Outcome, utc_now
from gateway.verify.queue import SampleMeter
from gateway.verify.record import Recorder
from gateway.verify.runner import shadow_info
from gateway.verify.verifier import Verifier

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["Settler", "Tally"]

log = logging.getLogger("gateway.fleet")

RESULTS = ("verified", "abandoned", "failed", "duplicates", "rejected", "lost", "claimed")


class Tally:
    """What this worker counted (``counts``, its status), each also a ``fleet.<key>``
    counter unless ``export`` is off."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry
        self.counts: dict[str, int] = dict.fromkeys(RESULTS, 0)

    def add(self, key: str, n: int = 1, *, export: bool = True) -> None:
        self.counts[key] = self.counts.get(key, 0) + n
        if export:
            self.telemetry.count(f"fleet.{key}", n)


class Settler:
    """Records, acknowledges and counts the jobs of one worker (see the module
    docstring). ``name`` is the worker's consumer name (in its ledger claims)."""

    def __init__(self, config: RedisConfig, client: Redis, recorder: Recorder, tally: Tally,
                 outage: OutageLog, *, name: str, audit_path: str | None,
                 flush: Callable[[], object] | None) -> None:
        self.ledger = Ledger(client, config.stream, config.group)
        self.recorder = recorder
        self.tally = tally
        self.telemetry = tally.telemetry
        self.outage = outage
        self.audit_path = audit_path
        self.flush = flush
        self.sample = SampleMeter()
        """How the jobs this worker recorded ended (the verified share of the sample)."""
        self._token = f"{name}:{os.getpid()}:{secrets.token_hex(4)}"
        self._errors = redis_errors()
        self._acks: list[tuple[str, str]] = []
        self._ack_wake = asyncio.Event()

    # ---- recording once ------------------------------------------------------------------

    async def commit(self, d: Delivery, audit_id: str, write: Callable[[], None]) -> bool:
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
        self.ack(d.entry, audit_id)
        return True

    def _duplicate(self, d: Delivery, audit_id: str, *, ack: bool) -> bool:
        self.tally.add("duplicates")
        if ack:
            self.ack(d.entry, audit_id)
        return False

    async def reject(self, d: Delivery, exc: JobFormatError) -> None:
        """An entry that is not a job this worker reads: counted, recorded as not
        verified when it has a readable audit id, acknowledged."""
        self.tally.add("rejected")
        log.warning("fleet: entry %s is not a job this worker reads: %s", d.entry, exc)
        audit_id = peek_audit_id(d.data or b"")
        if audit_id is None:
            self.ack(d.entry, "")
            return
        record = {"audit_id": audit_id, "finished_at": utc_now(),
                  "note": f"not verified: unreadable job ({exc})",
                  "shadow": {**shadow_info("failed", None, os.getpid()),
                             "queue_ms": queue_ms(d.entry)}}
        try:
            if await self.commit(d, audit_id, lambda: self.recorder.write(record)):
                self.sample.settle("failed")
                self.telemetry.count("shadow.settled", 1, {"kind": "shadow",
                                                           "result": "failed"})
        except self._errors as err:
            self.outage.warn("job", "fleet: recording a job failed (%s); it will be "
                             "redelivered", type(err).__name__)

    def settle(self, job: VerificationJob, result: str) -> None:
        """Count how a job this worker recorded ended (as the relay's queue counts its
        own: ``shadow.settled``, the sample meter; and the ``fleet.*`` counters)."""
        kind = "shadow" if job.kind == "verify" else "candidates"
        self.sample.settle(result)
        self.telemetry.count("shadow.settled", 1, {"kind": kind, "result": result})
        if result == "abandoned":
            self.telemetry.count("shadow.abandoned", 1, {"kind": kind})
        self.tally.add(result, export=result in ("verified", "failed"))

    def writer(self, d: Delivery, job: VerificationJob, verifier: Verifier,
               trace: RequestTrace, outcome: Outcome, done: list[CandidateOutcome],
               result: str) -> Callable[[], None]:
        """What writes the job's record (the outcome, or ``done`` for a candidates job),
        with the ``shadow`` field every background job's record has (``shadow_info``)
        and its ``queue_ms``: from the stream entry's id (the time Redis added it, on
        Redis' clock) to the write (this worker's clock)."""
        shadow = shadow_info(result, None, os.getpid())
        if job.kind == "candidates":
            names = {c.name for c in done}
            done.extend(CandidateOutcome(c.name, c.version, error="not run")
                        for c in job.candidates if c.name not in names)
            record = verifier.candidates_record(job, done)

            def write_candidates() -> None:
                record["shadow"] = {**shadow, "queue_ms": queue_ms(d.entry)}
                self.recorder.write(record)
            return write_candidates

        def write_verify() -> None:
            outcome.shadow = {**shadow, "queue_ms": queue_ms(d.entry)}
            self.recorder.finish(outcome, trace)
        return write_verify

    # ---- acknowledgement -----------------------------------------------------------------

    def ack(self, entry: str, audit_id: str) -> None:
        """Acknowledge ``entry`` with the next batch (see :meth:`ack_now`)."""
        self._acks.append((entry, audit_id))
        self._ack_wake.set()

    async def acker(self) -> None:
        """Acknowledge batches as they come, until cancelled (a failure is retried)."""
        while True:
            await self._ack_wake.wait()
            self._ack_wake.clear()
            try:
                await self.ack_now()
            except self._errors as exc:
                self.outage.warn("ack", "fleet: acknowledging failed (%s); retrying",
                                 type(exc).__name__)
                await asyncio.sleep(1.0)
                self._ack_wake.set()

    async def ack_now(self) -> None:
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
