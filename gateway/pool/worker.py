"""The worker process of the verification pool: a runtime of its own, jobs in, records out.

:func:`serve` is the worker process's main (the relay's side is
:mod:`gateway.pool.channel`): :func:`init`, then one call after another read from its
socket until the relay closes it. :func:`init` lowers the process's priority (``pool.nice``: under contention the
relay runs first; background jobs also in ``SCHED_IDLE``, :mod:`gateway.pool.sched`), opens an event loop and a :class:`~gateway.verify.runtime.Runtime`
from the settings alone (``gateway.runtime.open_runtime``), and its own telemetry
from the environment (``OTEL_*``, as ``gateway serve`` reads it: spans and metrics
are exported per process). Then, per call, in the process's main thread:

- :func:`run_job` — a background job (``verify``: the policy and its candidates;
  ``candidates``), through :meth:`Verifier.run <gateway.verify.verifier.Verifier.run>`
  / ``run_candidates``. Returns a :class:`JobResult`: the audit record, encoded here
  (the relay appends it: one audit stream per gateway), and how the job ended.
- :func:`verify_inline` — an inline verification the request awaits: the
  :class:`~gateway.verify.outcome.Verification` itself.

**Budgets, for real.** A job gets its policy's ``budget.total_ms`` from the moment
it starts here; an interval timer (``SIGALRM``) then raises :class:`OverBudget`
(a ``BaseException``: no layer's ``except Exception`` swallows it) in whatever
Python code is running — a layer's synchronous text work included, which the
event loop's ``asyncio.timeout`` cannot interrupt. The job is recorded
``abandoned`` (:func:`gateway.verify.verifier.abandoned`: ``on_error`` decides the
verdict). A long call into C (one regular expression over megabytes) delays the
signal until it returns; the relay stops waiting ``pool.grace_ms`` later whatever
happens (``gateway.pool.runner``).

A job naming a policy version this process has not loaded yet (the relay reloaded
its policies since the worker started) makes the worker rescan its policies
directory once before it gives up on it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import pickle
import signal
import socket
import struct
import threading
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing import util as mp_util
from typing import Any

from gateway.audit.sink import NullAuditSink, encode
from gateway.pool.sched import Scheduling
from gateway.runtime import open_runtime
from gateway.settings import Settings
from gateway.telemetry import Telemetry, create_telemetry
from gateway.verify.actions import band_action
from gateway.verify.job import VerificationJob
from gateway.verify.outcome import CandidateOutcome, Outcome, Verification
from gateway.verify.pipeline import Budget
from gateway.verify.record import Recorder
from gateway.verify.runner import candidates_result
from gateway.verify.runtime import Runtime
from gateway.verify.verifier import ABANDONED, Verifier, abandoned

__all__ = ["JobResult", "OverBudget", "init", "ping", "run_job", "serve", "verify_inline"]

log = logging.getLogger("gateway.pool")

PARENT_CHECK_S = 1.0
"""How often a worker checks that its relay is still alive."""

DEFAULT_BUDGET_MS = 5000.0
"""The time of a job whose policy version is not known here (its record says so)."""


class OverBudget(BaseException):  # noqa: N818 - raised by the alarm, never an error
    """The job's ``budget.total_ms`` ran out (raised by the interval timer)."""


@dataclass(frozen=True, slots=True)
class JobResult:
    """What a background job gives back to the relay."""

    result: str
    """``verified``, ``abandoned`` or ``failed``."""
    line: bytes
    """The audit record, scrubbed and encoded here (``Outcome.audit_line``,
    ``gateway.audit.sink.encode``): the relay adds its ``shadow`` field and appends it
    (``gateway.audit.sink.EncodedRecord``) without decoding it."""
    pid: int


class _Worker:
    """This process's runtime, loop and telemetry (one per worker process)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, runtime: Runtime,
                 telemetry: Telemetry, close: Any) -> None:
        self.loop = loop
        self.runtime = runtime
        self.telemetry = telemetry
        self.verifier = Verifier(runtime)
        self.recorder = Recorder(telemetry, NullAuditSink())
        self.close = close
        self.armed = False


_worker: _Worker | None = None


def _alarm(_signum: int, _frame: Any) -> None:
    if _worker is not None and _worker.armed:
        raise OverBudget


def init(settings: Settings, nice: int, relay: int) -> None:
    """The worker process's start (see the module docstring); ``relay``: the pid of
    the relay that spawned it."""
    global _worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the relay's: it stops us
    _exit_with_parent(relay)
    if nice:
        with suppress(OSError):  # not allowed here: run at the relay's priority
            os.nice(nice)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    telemetry = create_telemetry(_worker_environ(os.environ))
    cm = open_runtime(settings, telemetry=telemetry)
    runtime = loop.run_until_complete(cm.__aenter__())
    signal.signal(signal.SIGALRM, _alarm)

    def close() -> None:  # at the worker's exit (multiprocessing runs it, atexit does not)
        try:
            loop.run_until_complete(cm.__aexit__(None, None, None))
            loop.close()
        finally:
            telemetry.shutdown(settings.telemetry.flush_seconds)

    _worker = _Worker(loop, runtime, telemetry, close)
    mp_util.Finalize(None, close, exitpriority=10)
    # As the relay does once it is ready (gateway.app): what start-up made (modules,
    # compiled patterns, policies, layer data) lives as long as the process; out of
    # the collector's full passes, which otherwise traverse it all (~40 ms each).
    gc.freeze()


_FRAME = struct.Struct("<Q")


def _recv(conn: socket.socket) -> bytes | None:
    """One frame (``gateway.pool.channel``); None at end of file (the relay closed it)."""
    head = _recv_exactly(conn, _FRAME.size)
    if head is None:
        return None
    return _recv_exactly(conn, _FRAME.unpack(head)[0])


def _recv_exactly(conn: socket.socket, size: int) -> bytes | None:
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = conn.recv_into(view[got:])
        if n == 0:
            return None
        got += n
    return bytes(buf)


def _send(conn: socket.socket, value: object) -> None:
    try:
        data = pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - an unpicklable result or error
        data = pickle.dumps((False, RuntimeError(
            f"the worker's reply does not pickle: {type(exc).__name__}")))
    head = _FRAME.pack(len(data))
    if len(data) < 65536:
        conn.sendall(head + data)
    else:  # no copy of a large reply
        conn.sendall(head)
        conn.sendall(data)


def serve(conn: socket.socket, settings: Settings, nice: int, relay: int) -> None:
    """The worker process's main: :func:`init`, say ``("ready", pid)``, then answer each
    call ``(fn, args)`` with ``(True, fn(*args))`` or ``(False, exception)`` until the
    relay closes the socket."""
    conn.setblocking(True)
    try:
        init(settings, nice, relay)
    except Exception as exc:  # noqa: BLE001 - the relay logs it and runs without us
        log.exception("verification worker: start-up failed")
        _send(conn, ("failed", f"{type(exc).__name__}: {exc}"[:300]))
        return
    _send(conn, ("ready", os.getpid()))
    sched = Scheduling(settings.pool.sched_idle)
    while (data := _recv(conn)) is not None:
        try:
            fn, args = pickle.loads(data)
            sched.background(fn is run_job)
            reply: tuple[bool, Any] = (True, fn(*args))
        except Exception as exc:  # noqa: BLE001 - the caller's to handle
            reply = (False, exc)
        del data
        _send(conn, reply)
    conn.close()


def _worker_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with this process told apart in the telemetry resource
    (``process.pid``, ``verity.process.role``): cumulative metrics of several
    processes under one resource would read as one series that jumps."""
    extra = f"process.pid={os.getpid()},verity.process.role=verification-worker"
    attrs = environ.get("OTEL_RESOURCE_ATTRIBUTES", "").strip().strip(",")
    return {**environ, "OTEL_RESOURCE_ATTRIBUTES": f"{attrs},{extra}" if attrs else extra}


def _exit_with_parent(parent: int) -> None:
    """Exit when the relay that spawned this worker is gone (killed with SIGKILL, it
    cannot stop its pool: an orphaned worker would wait for jobs forever), also when
    it died before this worker got here."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)
    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def ping() -> int:
    """Started and ready: this worker's pid."""
    return os.getpid()


def _state() -> _Worker:
    if _worker is None:
        raise RuntimeError("the verification worker was not initialised")
    return _worker


def _budget_ms(w: _Worker, job: VerificationJob) -> float:
    w.runtime.prune()  # forget what replaced policy versions held (cheap when none)
    policy = w.verifier.policy(job.policy)
    if policy is None:
        w.runtime.policies.reload()  # a version the relay loaded after this worker started
        policy = w.verifier.policy(job.policy)
    return float(policy.spec.budget.total_ms if policy is not None else DEFAULT_BUDGET_MS)


def _within(w: _Worker, budget_ms: float, coro: Any) -> tuple[bool, Any]:
    """Run ``coro`` on the worker's loop for at most ``budget_ms``: (finished, value).
    Tasks it left behind when stopped are cancelled."""
    loop = w.loop
    task = loop.create_task(coro)
    w.armed = True
    signal.setitimer(signal.ITIMER_REAL, max(budget_ms, 1.0) / 1000)
    try:
        try:
            return True, loop.run_until_complete(task)
        finally:
            w.armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
    except OverBudget:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: not logged as "never retrieved"
        return False, None


def _ran_out(v: Verification) -> bool:
    """Whether the pipeline stopped a layer because the time budget was spent."""
    return any(o.error_type == "timeout" and o.error == "time budget exhausted"
               for o in v.layers)


def run_job(job: VerificationJob) -> JobResult:
    """Verify a background job within its budget; its record and how it ended."""
    w = _state()
    budget_ms = _budget_ms(w, job)
    t0 = time.perf_counter()
    if job.kind == "candidates":
        return _candidates(w, job, budget_ms)
    trace = w.telemetry.start_shadow(job.trace)
    outcome = Outcome.for_job(job)
    result, status, error = "verified", 200, None
    try:
        finished, _ = _within(w, budget_ms, w.verifier.run(job, trace, outcome))
        if finished:
            result = candidates_result(outcome.candidates)
        else:
            result, status, error = "abandoned", 0, "shadow_abandoned"
            _abandon(w, job, outcome, (time.perf_counter() - t0) * 1000)
    except Exception:  # noqa: BLE001 - the record says so; the relay counts it
        log.exception("shadow job failed")
        result, status, error = "failed", 0, "shadow_failed"
        outcome.note = outcome.note or "not verified: verification failed"
    w.recorder.finish(outcome, trace, write=False)
    trace.end(status, error)
    return JobResult(result, outcome.audit_line(), os.getpid())


def _abandon(w: _Worker, job: VerificationJob, outcome: Outcome, elapsed_ms: float) -> None:
    """Record where the budget ran out: the live verification, or a candidate."""
    policy = w.verifier.policy(job.policy)
    if policy is not None and outcome.verdict is None:
        v = abandoned(policy, elapsed_ms)
        outcome.record(v)
        outcome.action = band_action(policy.spec.actions, v.verdict).type
    names = {c.name for c in outcome.candidates}
    outcome.candidates.extend(CandidateOutcome(c.name, c.version, error=ABANDONED)
                              for c in job.candidates if c.name not in names)


def _candidates(w: _Worker, job: VerificationJob, budget_ms: float) -> JobResult:
    trace = w.telemetry.start_shadow(job.trace, "candidate policies")
    done: list[CandidateOutcome] = []
    result = "verified"
    try:
        finished, _ = _within(w, budget_ms, w.verifier.run_candidates(job, trace, done))
        result = candidates_result(done) if finished else "abandoned"
    except Exception:  # noqa: BLE001
        log.exception("candidates job failed")
        result = "failed"
    names = {c.name for c in done}
    why = {"abandoned": ABANDONED, "failed": "failed"}.get(result, "not run")
    done.extend(CandidateOutcome(c.name, c.version, error=why)
                for c in job.candidates if c.name not in names)
    trace.end(200)
    record = w.verifier.candidates_record(job, done)
    record.pop("shadow", None)  # the relay's to add
    return JobResult(result, encode(record), os.getpid())


def verify_inline(job: VerificationJob, budget_ms: float) -> Verification:
    """An inline verification (the request awaits it) within what is left of its
    request's budget; over it, the :func:`abandoned` verdict."""
    w = _state()
    _budget_ms(w, job)  # loads the job's policy version if needed
    policy = w.verifier.policy(job.policy)
    if policy is None:
        raise LookupError(f"policy {job.policy.name!r} version {job.policy.version} "
                          "is not loaded")
    budget = Budget.for_policy(policy)
    budget.total_ms = budget_ms
    trace = w.telemetry.continue_trace(job.trace, "verify in worker")
    t0 = time.perf_counter()
    try:
        finished, v = _within(w, budget_ms, w.verifier.verify(
            job, policy=policy, trace=trace, budget=budget))
        # Past its budget either way: stopped by the alarm, or the pipeline found the
        # budget spent before a layer (the alarm, armed a moment after the budget
        # started, had not fired yet) -- recorded the same, as abandoned.
        if not finished or _ran_out(v):
            v = abandoned(policy, (time.perf_counter() - t0) * 1000)
    finally:
        trace.end(200)
    assert isinstance(v, Verification)
    return v
