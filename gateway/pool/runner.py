"""The relay's side of the verification pool: a :class:`~gateway.verify.runner.JobRunner`
whose jobs run in worker processes, and inline verifications awaited from them.

:class:`ProcessRunner` keeps the shadow queue (``gateway.verify.queue.ShadowQueue``,
bounded, never waiting) in the relay and one queue task per worker process: each
task hands its job to an idle worker (``spawn``: a fresh interpreter, no copy of the
relay's loop, sockets or threads) over that worker's socket
(:mod:`gateway.pool.channel`: pickled once on the loop, the reply read by the loop —
no helper thread competing with the relay for the GIL) and waits for the record,
which it writes to the audit sink — one audit stream per gateway. So the relay only
relays, enqueues and writes records; when the workers cannot keep up the queue fills
and the shadow *sample* sheds (``shadow.dropped``, the record says ``result:
dropped``) instead of clients waiting.

Per job, at most ``budget.total_ms`` + ``pool.grace_ms`` after it was handed over
(the worker itself stops at ``budget.total_ms``: :mod:`gateway.pool.worker`) the
relay stops waiting and records it ``abandoned``; the worker takes its next call once
that one returns. A worker that dies (killed, out of memory) fails the job it was
running (recorded ``failed``) and a new one takes its place (``workers.replaced``);
one that died idle is replaced by the first call that finds it dead (that call fails).

A request body of ``pool.parse_min_bytes`` or more is parsed in an idle worker
(:meth:`ProcessRunner.offload`, the request awaiting it); when it cannot be (its
worker died, or it waited :data:`OFFLOAD_SECONDS`) the relay parses it itself.

Workers are started at open (each says it is ready) before the gateway says it is
ready — when a loaded policy needs them (``gateway.modes.dispatch.needs_pool``);
otherwise :meth:`ProcessRunner.start_soon` starts them in the background once one
does (a policy reload; failing that, the first call that needs a worker). A
replacement starts in the background too; jobs queued meanwhile wait in the queue
(their ``queue_ms``).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import pickle
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import gateway.pool.worker as worker
from gateway.audit.sink import EncodedRecord
from gateway.pool.channel import THREADED_BYTES, Channel, WorkerDied
from gateway.pool.relay_load import RelayLoad
from gateway.settings import Settings
from gateway.telemetry import Telemetry
from gateway.verify.actions import band_action
from gateway.verify.job import JobKind, VerificationJob
from gateway.verify.outcome import CandidateOutcome, Outcome, Verification
from gateway.verify.pipeline import Budget
from gateway.verify.queue import ShadowJob, ShadowQueue
from gateway.verify.record import Recorder
from gateway.verify.runner import NOT_VERIFIED, record_shed, shadow_info
from gateway.verify.verifier import ABANDONED, Verifier, abandoned

__all__ = ["OFFLOAD_SECONDS", "ProcessRunner", "default_workers"]

A = TypeVar("A")
R = TypeVar("R")

log = logging.getLogger("gateway.pool")

START_SECONDS = 120.0
"""How long the workers may take to start (at open; a job waiting for a replacement
pool is recorded failed after that)."""

CLOSE_SECONDS = 30.0
"""How long closing waits for the workers to finish their calls and stop (they flush
their telemetry) before killing them."""

OFFLOAD_SECONDS = 5.0
"""How long a request waits for its :meth:`ProcessRunner.offload` call before the
relay computes it itself: only an idle worker is handed one, so this bounds the rare
race with a shadow job taken meanwhile (it then waits behind that job, FIFO)."""


def default_workers(relays: int = 1) -> int:
    """The cores the relay processes do not need, shared among them: with ``relays``
    relay processes (``server.workers``) on ``cpus`` CPUs this process may run on,
    ``max(1, (cpus - relays) // relays)`` per relay — ``max(1, cpus - 1)`` for one."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    relays = max(1, relays)
    return max(1, (cpus - relays) // relays)


class ProcessRunner:
    """Background jobs (and large inline verifications) in worker processes."""

    def __init__(self, settings: Settings, queue: ShadowQueue, verifier: Verifier,
                 recorder: Recorder, telemetry: Telemetry, workers: int) -> None:
        self.settings = settings
        self.queue = queue
        self.verifier = verifier
        self.recorder = recorder
        self.telemetry = telemetry
        self.workers = workers
        self.replaced = 0
        self._grace_s = settings.pool.grace_ms / 1000
        self._ctx = multiprocessing.get_context("spawn")
        self._channels: list[Channel] = []
        """The workers (one that died running a call leaves at once; one that died
        idle when a caller finds it)."""
        self._idle: asyncio.Queue[Channel] = asyncio.Queue()
        """Workers with no call running (FIFO for callers waiting for one); one that
        died idle stays here until a caller takes it, finds it dead and replaces it."""
        self._ready = asyncio.Event()
        self._opening: asyncio.Task[None] | None = None
        """The workers' first start (:meth:`start` or :meth:`start_soon`)."""
        self._starting: set[asyncio.Task[None]] = set()
        self._closing = False
        self.offloaded = 0
        """Calls :meth:`offload` handed to a worker that answered them."""
        self.offload_fallbacks = 0
        """Calls :meth:`offload` computed in the relay after all (a dead worker, a wait)."""
        self.load = RelayLoad(settings.pool.relay_busy, settings.pool.busy_jobs_per_second)
        """The relay's own load: while its loop is saturated, fewer jobs are handed off
        (and those queued when it became saturated are shed)."""
        self.load.on_saturated = self._shed_backlog

    @property
    def pids(self) -> list[int]:
        """The live worker processes' pids."""
        return sorted(ch.pid for ch in self._channels)

    # ---- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Start the worker processes and wait (at most :data:`START_SECONDS`) until
        they answer: the gateway is ready once it can verify. A pool that fails to
        start is logged, not fatal (its jobs are recorded ``failed``). Once only (a
        second call waits for the first)."""
        if self._opening is None:
            self._opening = asyncio.get_running_loop().create_task(self._open())
        await asyncio.shield(self._opening)

    def start_soon(self) -> None:
        """Start the worker processes in the background unless they are started or
        starting (or the pool is closing); jobs wait for them in the queue."""
        if self._opening is None and not self._closing:
            self._opening = asyncio.get_running_loop().create_task(self._open())
            log.info("verification pool: starting %d worker process(es)", self.workers)

    async def _open(self) -> None:
        self.telemetry.gauge("workers", lambda: float(len(self._channels)))
        self.load.start()
        try:
            await asyncio.gather(*(self._spawn() for _ in range(self.workers)))
            log.info("verification pool: %d worker process(es) ready (pids %s)",
                     self.workers, ", ".join(map(str, self.pids)))
        except Exception:  # noqa: BLE001 - jobs then fail (recorded)
            log.exception("verification pool: the workers failed to start")
        finally:
            self._ready.set()

    async def _spawn(self) -> None:
        ch = await Channel.spawn(self._ctx, self.settings, self.settings.pool.nice,
                                 START_SECONDS)
        if self._closing:
            ch.close_input()
            ch.kill()
            await ch.closed()
            return
        self._channels.append(ch)
        ch.serve(self._idle.put_nowait, self._died)
        self._idle.put_nowait(ch)

    def _died(self, ch: Channel, busy: bool) -> None:
        if busy and not self._closing:  # its call failed: replace it now
            self._replace(ch)
        # Died idle: it stays listed until a caller takes it, finds it dead and
        # replaces it (that call fails: an offloaded parse falls back to the relay).

    def _drop(self, ch: Channel) -> None:
        if ch in self._channels:
            self._channels.remove(ch)

    def _replace(self, dead: Channel) -> None:
        if dead.replaced:
            return
        dead.replaced = True
        self._drop(dead)
        log.error("verification pool: worker process %d died; replacing it", dead.pid)
        self.replaced += 1
        self.telemetry.count("workers.replaced", 1, {"exit": "died"})
        task = asyncio.get_running_loop().create_task(self._respawn())
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _respawn(self) -> None:
        try:
            await self._spawn()
        except Exception:  # noqa: BLE001 - one worker fewer; logged
            log.exception("verification pool: a replacement worker failed to start")

    async def close(self) -> None:
        """After the queue's drain: stop the workers (they flush their telemetry); kill
        any still running :data:`CLOSE_SECONDS` later."""
        self._closing = True
        if self._opening is not None:  # its spawns end (each sees _closing: killed)
            await asyncio.shield(self._opening)
        self.load.stop()
        for task in list(self._starting):
            task.cancel()
        await asyncio.gather(*self._starting, return_exceptions=True)
        channels = list(self._channels)
        for ch in channels:
            ch.close_input()
        try:
            await asyncio.wait_for(_exited(channels), CLOSE_SECONDS)
        except TimeoutError:
            # A worker that does not stop (stuck in a call no alarm reaches, or caught
            # starting up) must not hold the gateway's exit: kill it.
            log.warning("verification pool: workers still running %.0f s after close; "
                        "killing them", CLOSE_SECONDS)
            for ch in channels:
                ch.kill()
            await asyncio.wait_for(_exited(channels), CLOSE_SECONDS)
        for ch in channels:
            await ch.closed()

    @property
    def started(self) -> bool:
        """The workers answered once (until then an inline verification stays on the
        loop rather than wait for them to start)."""
        return self._ready.is_set() and bool(self._channels)

    def status(self) -> dict[str, Any]:
        return {**self.queue.status(), "runner": "process",
                "pool": {"workers": self.workers, "started": self._ready.is_set(),
                         "pids": self.pids, "replaced": self.replaced,
                         "offloaded": self.offloaded,
                         "offload_fallbacks": self.offload_fallbacks},
                "relay": self.load.status()}

    # ---- running a call in a worker ------------------------------------------------------

    async def _take(self) -> Channel:
        """An idle worker (waiting for one); WorkerDied when the one taken had died
        idle (it is replaced) or there is none and none starting."""
        if not self._ready.is_set():
            self.start_soon()  # a call needs a worker (none was needed until now)
            await asyncio.wait_for(self._ready.wait(), START_SECONDS)
        if self._idle.empty() and not self._channels and not self._starting:
            raise WorkerDied("no verification worker process is running")
        ch = await self._idle.get()
        if ch.dead:
            if self._closing:
                self._drop(ch)
            else:
                self._replace(ch)
            raise WorkerDied(f"verification worker {ch.pid} died")
        return ch

    async def _call(self, deadline_s: float, fn: Any, *args: Any,
                    threaded: bool = False) -> Any:
        """``fn(*args)`` in a worker; TimeoutError past ``deadline_s`` (waiting for a
        worker included); WorkerDied when its worker died (it is replaced).
        ``threaded``: pickle the call on a thread (a large argument)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + deadline_s
        ch = await asyncio.wait_for(self._take(), deadline_s)
        try:
            call = (fn, args)
            payload = (await asyncio.to_thread(pickle.dumps, call, pickle.HIGHEST_PROTOCOL)
                       if threaded else pickle.dumps(call, pickle.HIGHEST_PROTOCOL))
            reply = ch.send(payload)
        except BaseException:
            if ch.dead:  # it died meanwhile (its reader saw no call running)
                if not self._closing:
                    self._replace(ch)
            else:
                self._idle.put_nowait(ch)  # nothing reached it
            raise
        # Stopping to wait leaves the call running: the worker is free again once its
        # reply (then ignored) is read.
        return await asyncio.wait_for(asyncio.shield(reply),
                                      max(deadline - loop.time(), 0.001))

    @property
    def idle(self) -> bool:
        """The workers are up and one has nothing to do: a call handed over now runs at
        once rather than behind a shadow job."""
        return self.started and not self._idle.empty()

    async def offload(self, fn: Callable[[A], R], arg: A) -> R:
        """``fn(arg)`` in a worker, the caller (a request) awaiting it; computed on a
        thread of the relay instead when its worker died or it waited
        :data:`OFFLOAD_SECONDS` — the request gets its answer either way. ``fn`` is a
        module-level function; it, ``arg`` and its result pickle."""
        try:
            big = isinstance(arg, bytes | bytearray | str) and len(arg) >= THREADED_BYTES
            result: R = await self._call(OFFLOAD_SECONDS, fn, arg, threaded=big)
            self.offloaded += 1
            return result
        except Exception as exc:  # noqa: BLE001 - a dead worker, a timeout: do it here
            self.offload_fallbacks += 1
            log.warning("verification pool: an offloaded call failed (%s); computing it in "
                        "the relay", type(exc).__name__)
            return await asyncio.to_thread(fn, arg)

    def _budget_ms(self, job: VerificationJob) -> float:
        policy = self.verifier.policy(job.policy)
        return float(policy.spec.budget.total_ms if policy is not None
                     else worker.DEFAULT_BUDGET_MS)

    # ---- inline --------------------------------------------------------------------------

    async def verify(self, job: VerificationJob, budget: Budget) -> Verification:
        """Verify ``job`` (its policy must be loaded) in a worker within what is left of
        ``budget``; the request awaits it, the event loop serves others meanwhile."""
        policy = self.verifier.policy(job.policy)
        assert policy is not None, "an inline job's policy is the one selected"
        left = budget.remaining_ms()
        t0 = time.perf_counter()
        if left > 0:
            try:
                v: Verification = await self._call(
                    left / 1000 + self._grace_s, worker.verify_inline,
                    job.with_policy(job.policy), left)
                return v
            except TimeoutError:
                pass
        return abandoned(policy, (time.perf_counter() - t0) * 1000)

    # ---- background jobs (the JobRunner seam) --------------------------------------------

    def submit(self, job: VerificationJob) -> bool:
        return self.queue.submit(self._shadow_job(job))

    def shed(self, kind: JobKind) -> str | None:
        """The queue's answer; then, when the relay's loop is saturated, the hand-off
        budget's (:mod:`gateway.pool.relay_load`: ``relay_busy``)."""
        qkind = "shadow" if kind == "verify" else "candidates"
        why = self.queue.shed(qkind)
        if why is None and not self.load.admit():
            why = "relay_busy"
            self.queue.count_shed(qkind, why)
        return why

    def hand_off(self) -> Literal["shed", "token", "free"]:
        """Asked as a shadow request arrives: ``shed`` when the relay is saturated and
        its hand-off budget spent (its answer is then relayed unread, see
        :meth:`shed_relayed`); ``token``: saturated, a token taken (then only the
        queue may still shed its job); ``free``: not saturated (its job is asked
        about again, :meth:`shed`, once its answer is in)."""
        if not self.load.saturated:
            return "free"
        return "token" if self.load.take() else "shed"

    def shed_relayed(self) -> None:
        """Count a job :meth:`hand_off` refused as shed (``relay_busy``), once its
        answer was relayed (the caller writes its record)."""
        self.load.shed += 1
        self.queue.count_shed("shadow", "relay_busy")

    def _shed_backlog(self) -> None:
        """The relay just became saturated: shed the jobs still queued (``relay_busy``)."""
        self.load.shed += self.queue.shed_queued("relay_busy")

    def _shadow_job(self, job: VerificationJob) -> ShadowJob:
        recorder = self.recorder

        async def run() -> str:
            t0 = time.perf_counter()
            try:
                done: worker.JobResult = await self._call(
                    self._budget_ms(job) / 1000 + self._grace_s, worker.run_job, job)
            except TimeoutError:
                self._lost(job, "abandoned", (time.perf_counter() - t0) * 1000,
                           shadow_info("abandoned", sj))
                return "abandoned"
            except asyncio.CancelledError:
                self._lost(job, "cancelled", 0.0, shadow_info("cancelled", sj))
                raise
            except Exception as exc:  # noqa: BLE001 - a dead worker, a pickling error
                log.error("shadow job failed in the pool: %s", type(exc).__name__)
                self._lost(job, "failed", 0.0, shadow_info("failed", sj))
                return "failed"
            recorder.write(EncodedRecord(done.line, {
                "shadow": shadow_info(done.result, sj, done.pid)}))
            return done.result

        def dropped(why: str) -> None:  # never started
            self._lost(job, why, 0.0, shadow_info(why), sj.reason)

        sj = ShadowJob(run, dropped, kind="shadow" if job.kind == "verify" else "candidates")
        return sj

    def _lost(self, job: VerificationJob, why: str, elapsed_ms: float,
              shadow: dict[str, Any], reason: str | None = None) -> None:
        """Write the record of a job the pool did not verify (``why``: ``dropped``,
        ``cancelled``, ``failed``, ``abandoned``; ``reason``: the shed reason of a job
        dropped for the relay's load). A ``verify`` job's record is built on the
        audit's writer thread, as for a request (a shed sample costs the relay
        little)."""
        error = {"abandoned": ABANDONED, "failed": "failed: its worker process failed"}.get(
            why, why)
        if job.kind == "candidates":
            done = [CandidateOutcome(c.name, c.version, error=error) for c in job.candidates]
            record = self.verifier.candidates_record(job, done)
            record["shadow"] = shadow
            self.recorder.write(record)
            return
        outcome = Outcome.for_job(job)
        if why in NOT_VERIFIED:
            record_shed(self.recorder, self.telemetry, outcome, job.candidates, job.trace, why,
                        reason)
            return
        trace = self.telemetry.start_shadow(job.trace)
        policy = self.verifier.policy(job.policy)
        if why == "abandoned" and policy is not None:
            v = abandoned(policy, elapsed_ms)
            outcome.record(v)
            outcome.action = band_action(policy.spec.actions, v.verdict).type
        else:
            outcome.note = "not verified: its verification worker process failed"
        outcome.candidates = [CandidateOutcome(c.name, c.version, error=error)
                              for c in job.candidates]
        outcome.shadow = shadow
        self.recorder.finish(outcome, trace)
        trace.end(0, f"shadow_{why}")


async def _exited(channels: list[Channel]) -> None:
    """Until every worker process of ``channels`` has exited (and is reaped)."""
    while any(ch.process.is_alive() for ch in channels):
        await asyncio.sleep(0.02)
