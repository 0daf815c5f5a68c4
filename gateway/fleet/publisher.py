"""The relay's side of fleet mode: :class:`RedisRunner`, a :class:`~gateway.verify.
queue.JobRunner` that publishes jobs to a Redis Stream for ``gateway worker`` s.

``submit(job)`` never waits and never touches the network: the job goes into a
bounded buffer (``redis.buffer``) that one background task publishes, in batches,
each batch one ``MULTI``/``XADD``…/``EXEC`` transaction (all of it on the stream, or
none). A job is *shed* — counted (``shadow.dropped`` with its ``reason``) and recorded
as not verified in this relay's audit, as the local runner does when its queue is
full — when:

- ``full``: the buffer is full (Redis is slower than the traffic);
- ``redis_down``: Redis did not answer the last command (a probe every second says
  when it does again); ``redis_error``: the batch's publish failed;
- ``backlog``: the workers are behind by ``redis.max_backlog`` jobs (published and not
  yet acknowledged, read every second) — so the stream's trim never reaches a job that
  was not verified, and a fleet without workers holds a bounded stream;
- ``too_large``: the encoded job is over ``redis.max_job_bytes``; ``unencodable``: it
  holds a value JSON cannot carry (the publisher never stops on one job);
- ``closed`` / ``cancelled``: shutdown (still buffered after ``shadow.drain_seconds``).

That is the :class:`~gateway.verify.runner.JobRunner` contract as the process pool keeps
it: every job ends in exactly one record with a ``shadow`` field
(``gateway.verify.runner.shadow_info``) — here ``result: dropped`` (``cancelled`` at
shutdown) for a shed job, counted in ``shadow.settled``; a published job's record and
count are the ``gateway worker``'s (:mod:`gateway.fleet.consumer`).

Every command is bounded by ``redis.timeout``; a client request never waits for
Redis. A relay starts without Redis (it sheds until Redis answers); the consumer
group is created by whichever of relay and worker comes first.

(A batch whose ``EXEC`` reached Redis but whose reply was lost is recorded here as
shed although the workers will verify it: the same audit id then has two records,
the second saying what was verified.)
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gateway.fleet.codec import encode_job
from gateway.fleet.connect import open_redis, redis_errors
from gateway.fleet.stream import backlog, ensure_group
from gateway.settings import RedisConfig, Settings
from gateway.telemetry import Telemetry
from gateway.verify.job import VerificationJob
from gateway.verify.outcome import CandidateOutcome, Outcome
from gateway.verify.queue import SampleMeter
from gateway.verify.record import Recorder
from gateway.verify.runner import shadow_info
from gateway.verify.verifier import Verifier

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["RedisRunner", "fleet_runner", "job_size"]

log = logging.getLogger("gateway.fleet")

BATCH = 128
"""Jobs per publish transaction at most."""
PROBE_SECONDS = 1.0
"""How often the backlog is read (and, while Redis is down, how often it is probed)."""

_NOTES = {
    "full": "not verified: the fleet publish buffer was full",
    "redis_down": "not verified: Redis was unreachable",
    "redis_error": "not verified: publishing to Redis failed",
    "backlog": "not verified: the workers' backlog was full (redis.max_backlog)",
    "too_large": "not verified: the job is over redis.max_job_bytes",
    "unencodable": "not verified: the job could not be encoded for the stream",
    "closed": "not verified: still queued at shutdown",
    "cancelled": "not verified: still queued at shutdown",
}


def job_size(job: VerificationJob) -> int:
    """A cheap lower bound of the encoded job's size (characters of the messages' text
    and of the answer's content): a job far over the limit is shed unencoded."""
    n = 0
    for message in job.messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            n += len(content)
        elif isinstance(content, list):
            n += sum(len(p.get("text") or "") for p in content
                     if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    for choice in job.answer.get("choices") or ():
        said = choice.get("message") if isinstance(choice, Mapping) else None
        content = said.get("content") if isinstance(said, Mapping) else None
        if isinstance(content, str):
            n += len(content)
    return n


class RedisRunner:
    """Publishes jobs to ``redis.stream`` (see the module docstring). :meth:`start` and
    :meth:`close` inside the running loop."""

    def __init__(self, config: RedisConfig, client: Redis, verifier: Verifier,
                 recorder: Recorder, telemetry: Telemetry, *, drain_seconds: float) -> None:
        self.config = config
        self.client = client
        self.verifier = verifier
        self.recorder = recorder
        self.telemetry = telemetry
        self.drain_seconds = drain_seconds
        self._buffer: deque[VerificationJob] = deque()
        self._batch: list[VerificationJob] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._tasks: list[asyncio.Task[None]] = []
        self._errors = redis_errors()
        self._accepting = False
        self.up = False
        self.backlog: int | None = None
        self.enqueued = 0
        self.published = 0
        self.dropped: dict[str, int] = {}
        self.sample = SampleMeter()

    # ---- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Probe Redis (a relay starts without it: it sheds until Redis answers), then
        run the publisher and the monitor."""
        await self._probe()
        self._accepting = True
        self._tasks = [asyncio.create_task(self._publisher(), name="fleet-publisher"),
                       asyncio.create_task(self._monitor(), name="fleet-monitor")]
        self.telemetry.gauge_shadow_depth(lambda: len(self._buffer) + len(self._batch))

    async def close(self) -> None:
        """Stop accepting; publish what is buffered for up to ``drain_seconds``; shed
        the rest (``cancelled``); close the client."""
        self._accepting = False
        if self._buffer or self._batch:
            self._wake.set()
            try:
                await asyncio.wait_for(self._drained(), self.drain_seconds)
            except TimeoutError:
                log.warning("fleet: drain deadline (%.1fs) passed with %d job(s) unpublished",
                            self.drain_seconds, len(self._buffer) + len(self._batch))
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        for job in [*self._batch, *self._buffer]:
            self._shed(job, "cancelled")
        self._batch, self._buffer = [], deque()
        await self.client.aclose()

    async def _drained(self) -> None:
        while self._buffer or self._batch:
            self._idle.clear()
            await self._idle.wait()

    # ---- the JobRunner -------------------------------------------------------------------

    def submit(self, job: VerificationJob) -> bool:
        if not self._accepting:
            return self._shed(job, "closed")
        if not self.up:
            return self._shed(job, "redis_down")
        if self.backlog is not None and self.backlog >= self.config.max_backlog:
            return self._shed(job, "backlog")
        if len(self._buffer) >= self.config.buffer:
            return self._shed(job, "full")
        if job_size(job) > self.config.max_job_bytes:
            return self._shed(job, "too_large")
        self._buffer.append(job)
        self.enqueued += 1
        self.telemetry.count("shadow.enqueued", 1, {"kind": _kind(job)})
        self._wake.set()
        return True

    def shed(self, kind: str) -> str | None:
        """Never asked ahead here: whether a job is shed depends on it (its size), so
        :meth:`submit` decides, and writes its record."""
        return None

    def status(self) -> dict[str, Any]:
        return {"runner": "redis", "accepting": self._accepting,
                "redis": "up" if self.up else "down", "stream": self.config.stream,
                "group": self.config.group, "buffered": len(self._buffer) + len(self._batch),
                "capacity": self.config.buffer, "backlog": self.backlog,
                "max_backlog": self.config.max_backlog, "enqueued": self.enqueued,
                "published": self.published, "dropped": sum(self.dropped.values()),
                "dropped_by_reason": dict(self.dropped), "sample": self._sample_status()}

    def _sample_status(self) -> dict[str, Any]:
        """The jobs that ended here (shed: ``dropped``, ``cancelled``); how the published
        ones ended is counted by the ``gateway worker`` s (``verity.shadow.settled``),
        so the verified share is not known to a relay: ``null`` here."""
        return {**self.sample.status(), "verified_ratio_last_minute": None,
                "verified_by": "gateway workers (verity.shadow.settled)"}

    # ---- shedding ------------------------------------------------------------------------

    def _shed(self, job: VerificationJob, reason: str) -> bool:
        """Count the job as dropped (``cancelled`` when still buffered at shutdown, as
        the local queue does) and write its record, not verified, with the ``shadow``
        field (``shadow_info``) every background job's record has."""
        kind = _kind(job)
        result = "cancelled" if reason == "cancelled" else "dropped"
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        self.telemetry.count(f"shadow.{result}", 1, {"kind": kind, "reason": reason})
        self.sample.settle(result)
        self.telemetry.count("shadow.settled", 1, {"kind": kind, "result": result})
        try:
            trace = self.telemetry.start_shadow(
                job.trace, "shadow audit" if job.kind == "verify" else "candidate policies")
            if job.kind == "candidates":
                done = [CandidateOutcome(c.name, c.version, error=result)
                        for c in job.candidates]
                trace.end(0, f"shadow_{reason}")
                record = self.verifier.candidates_record(job, done)
                record["shadow"] = shadow_info(result)
                self.recorder.write(record)
            else:
                outcome = Outcome.for_job(job)
                outcome.note = _NOTES[reason]
                outcome.shadow = shadow_info(result)
                self.recorder.finish(outcome, trace)
                trace.end(0, f"shadow_{reason}")
        except Exception:  # a record that cannot be written must not reach the client
            log.exception("fleet: the record of a shed job failed")
        return False

    # ---- background ----------------------------------------------------------------------

    async def _publisher(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._buffer:
                n = min(BATCH, len(self._buffer))
                self._batch = [self._buffer.popleft() for _ in range(n)]
                try:
                    await self._publish(self._batch)
                finally:
                    self._batch = []
            self._idle.set()

    async def _publish(self, batch: list[VerificationJob]) -> None:
        entries: list[tuple[VerificationJob, bytes]] = []
        for job in batch:
            if not self.up:
                self._shed(job, "redis_down")
                continue
            try:
                data = encode_job(job)
            except (TypeError, ValueError):  # e.g. an integer over 64 bits in metadata
                self._shed(job, "unencodable")
                continue
            if len(data) > self.config.max_job_bytes:
                self._shed(job, "too_large")
            else:
                entries.append((job, data))
        if not entries:
            return
        try:
            pipe = self.client.pipeline(transaction=True)
            for _, data in entries:
                pipe.xadd(self.config.stream, {b"job": data}, maxlen=self.config.maxlen,
                          approximate=True)
            await pipe.execute()
        except Exception as exc:  # noqa: BLE001 - the batch is shed and recorded, whatever broke
            if not isinstance(exc, self._errors):
                log.exception("fleet: publishing a batch failed")
            self._went_down(exc)
            for job, _ in entries:
                self._shed(job, "redis_error")
            return
        self.published += len(entries)
        self.telemetry.count("fleet.published", len(entries))

    async def _monitor(self) -> None:
        while True:
            await asyncio.sleep(PROBE_SECONDS)
            await self._probe()

    async def _probe(self) -> None:
        """Redis answers (ensure the group once it does) and the group's backlog."""
        try:
            if not self.up:
                await ensure_group(self.client, self.config.stream, self.config.group)
                self.up = True
                log.info("fleet: Redis reachable; publishing jobs to stream %r",
                         self.config.stream)
            self.backlog = await backlog(self.client, self.config.stream, self.config.group)
        except Exception as exc:  # noqa: BLE001 - the monitor outlives any failure
            if not isinstance(exc, self._errors):
                log.exception("fleet: probing Redis failed")
            self._went_down(exc)

    def _went_down(self, exc: BaseException) -> None:
        if self.up:
            log.warning("fleet: Redis unreachable (%s); shadow jobs are shed until it "
                        "answers", type(exc).__name__)
        self.up = False


def _kind(job: VerificationJob) -> str:
    return "shadow" if job.kind == "verify" else "candidates"


def fleet_runner(settings: Settings, verifier: Verifier, recorder: Recorder,
                 telemetry: Telemetry) -> RedisRunner:
    """The relay's :class:`RedisRunner` for ``settings`` (``shadow.runner: redis``), not
    started: :meth:`RedisRunner.start` it in the running loop, :meth:`RedisRunner.close`
    it at shutdown."""
    return RedisRunner(settings.redis, open_redis(settings.redis), verifier, recorder,
                       telemetry, drain_seconds=settings.shadow.drain_seconds)
