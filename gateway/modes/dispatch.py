"""The verification engine as the chat front door sees it: policy selection, the mode,
and the records of requests that end early.

:func:`open_engine` (the app lifespan) opens the verification runtime from the
settings (policy store, judge: ``gateway.runtime.open_runtime``), starts the policy
reload watcher, the shadow queue with its job runner and the audit sink, and yields a
:class:`VerityEngine`. A policies directory that does not exist yields ``None`` (pure
pass-through; ``/readyz`` is ready); an empty one yields an engine that selects
nothing until a file appears.

Per request (:meth:`VerityEngine.handle`), by the selected policy's ``mode``:

- **shadow** — the client gets exactly the upstream bytes (same status and
  headers, plus ``x-verity-policy``, ``x-verity-mode``, ``x-verity-audit-id``);
  streams are relayed chunk by chunk as they arrive. Verification is then a job
  for the job runner; its outcome (with the action that *would* have been taken)
  goes to the audit sink and a shadow trace linked to the request
  (:mod:`gateway.modes.shadow`).
- **inline** — verify, apply the band's action and answer with ``x-verity-*``
  headers; streams per ``streaming`` (:mod:`gateway.modes.inline`).

Upstream errors (status ≥ 400) pass through unverified, with policy and mode headers
and no audit record. An upstream call that fails before the client got a byte
(connect error 502, timeout 504, a stream cut while ``streaming: buffer`` reads it
502) is the gateway's own error: it carries policy, mode and audit-id headers, and
a record with ``note: "not verified: <code>"`` is written (:meth:`VerityEngine.
upstream_failed`). A client that disconnects cancels the request (the exchange's
disconnect watcher); the request is still accounted for: a record with ``note:
"not verified: client disconnected …"`` (before the response was sent, or after how
much of a stream) is written (:meth:`VerityEngine.client_gone`), unless the upstream
answered an error. A policy's ``candidates`` are evaluated on the same answer by the
job runner; their outcomes are added to the live record (written once they finish),
never affecting the response.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

from gateway.audit.sink import AuditSink, open_audit_sink
from gateway.errors import UpstreamError
from gateway.fleet.publisher import RedisRunner, fleet_runner
from gateway.http.asgi import Offload
from gateway.http.exchange import ChatExchange
from gateway.layers.base import Judge
from gateway.layers.registry import BUILTIN, LayerRegistry
from gateway.modes import inline, shadow
from gateway.modes.headers import verity_headers
from gateway.modes.request import PolicyRequest
from gateway.policy.select import PolicySet, Selection, select_policy
from gateway.policy.store import PolicyStore
from gateway.pool import ProcessRunner, default_workers
from gateway.runtime import open_runtime
from gateway.settings import PoolConfig, Settings
from gateway.telemetry import RequestTrace, Telemetry
from gateway.types import RequestInfo
from gateway.verify.outcome import AuditIds, CandidateOutcome, Outcome
from gateway.verify.queue import ShadowQueue
from gateway.verify.record import Recorder
from gateway.verify.runner import JobRunner, LocalRunner, shadow_info
from gateway.verify.runtime import Runtime
from gateway.verify.shed import ShedRecord
from gateway.verify.verifier import Verifier

__all__ = ["VerityEngine", "needs_pool", "open_engine"]

log = logging.getLogger("gateway.engine")


class VerityEngine:
    """What the chat front door hands requests with a policy to (``select``, ``handle``,
    ``status``: the :class:`~gateway.http.chat.Engine` protocol)."""

    def __init__(self, runtime: Runtime, verifier: Verifier, runner: JobRunner,
                 queue: ShadowQueue, recorder: Recorder) -> None:
        self.runtime = runtime
        self.verifier = verifier
        self.telemetry = runtime.telemetry
        self.store: PolicyStore = runtime.policies
        self.runner = runner
        self.shadow = queue
        """The background queue the runner uses (its counters: ``/readyz``, tests)."""
        self.recorder = recorder
        self.audit: AuditSink = recorder.sink
        self.pool: ProcessRunner | None = None
        """The worker processes, when verification runs in them (``pool.workers``)."""
        self.inline_min_chars: int | None = None
        """An inline verification this large (request body + answer) runs in the pool."""
        self.parse_min_bytes: int | None = None
        """A request body this large (bytes) is parsed in the pool (:meth:`offload`)."""
        self.audit_ids = AuditIds()
        """Each policy request's audit id (drawn 256 at a time)."""

    @property
    def judge(self) -> Judge | None:
        return self.runtime.judge

    # ---- the Engine protocol -------------------------------------------------------------

    def select(self, info: RequestInfo) -> Selection | None:
        self.runtime.prune()  # the policy set changed: forget what old versions held
        return select_policy(self.store.policies, info)

    async def handle(self, x: ChatExchange, plan: Selection) -> None:
        r = PolicyRequest(x, plan, self.audit_ids())
        policy = plan.policy
        mode = policy.spec.mode
        x.trace.selected(policy.name, mode)
        try:
            if mode == "shadow":
                pool, budget = self.pool, "free"
                if pool is not None:
                    budget = pool.hand_off()
                    if budget == "shed":  # a saturated relay: straight to the lean path
                        await shadow.relay_shed(self, pool, r)
                        return
                await shadow.handle(self, r, budget)
            else:
                await inline.handle(self, r)
        except UpstreamError as err:  # the gateway answers with this error, no byte sent yet
            self.upstream_failed(r, err)
            raise
        except asyncio.CancelledError:  # re-raised: the front door decides what it means
            if x.watcher.disconnected:
                self.client_gone(r)
            raise

    def status(self) -> tuple[bool, dict[str, Any]]:
        ready, detail = self.store.status()
        queue = self.runner.status()
        return ready and queue["accepting"], {**detail, "shadow": queue}

    def offload(self, size: int) -> Offload | None:
        """A request body of ``size`` bytes is parsed in a worker process when it is at
        least ``pool.parse_min_bytes`` and a worker is idle; else (None) in the relay."""
        limit, pool = self.parse_min_bytes, self.pool
        if pool is None or limit is None or size < limit or not pool.idle:
            return None
        return pool.offload

    def in_pool(self, r: PolicyRequest) -> bool:
        """Whether ``r``'s inline verification runs in a worker process: the pool's
        workers are up and its request body is at least ``pool.inline_min_bytes``."""
        limit, pool = self.inline_min_chars, self.pool
        return pool is not None and limit is not None and len(r.x.body) >= limit \
            and pool.started

    # ---- records -------------------------------------------------------------------------

    def finish(self, outcome: Outcome, trace: RequestTrace, *, write: bool = True) -> None:
        """Close the record: ``trace.decision``, metrics, and the audit (unless deferred)."""
        self.recorder.finish(outcome, trace, write=write)

    def submit_candidates(self, r: PolicyRequest, completion: dict[str, Any],
                          outcome: Outcome) -> bool:
        """Queue the candidates' evaluation; the job writes ``outcome`` (its record) to
        the audit. False when there are no candidates (the caller writes it).

        Shed, never slow: when the runner would shed the job (a full queue, a saturated
        relay: ``pool.relay_busy``) it is never built — counted as shed by the runner,
        and ``outcome`` is written here with each candidate ``dropped`` (``shadow.result:
        dropped``). The inline verification itself is the client's wait: never shed."""
        candidates = r.selection.candidates
        if not candidates:
            return False
        if self.runner.shed("candidates"):
            # As a shed job's: its trace, linked to the request's, says it was dropped.
            self.telemetry.start_shadow(r.x.trace, "candidate policies").end(
                0, "shadow_dropped")
            outcome.candidates = [CandidateOutcome(c.name, c.version, error="dropped")
                                  for c in candidates]
            outcome.shadow = shadow_info("dropped")
            self.audit.write(outcome)
            return True
        self.runner.submit(r.job(completion, outcome, kind="candidates",
                                 decided=outcome.to_dict(), background=True))
        return True

    def client_gone(self, r: PolicyRequest) -> None:
        """The client disconnected (its request is being cancelled): write the record of
        what is known — the tracked outcome (its audit id may have been sent), else a new
        one. An upstream error being relayed unverified gets none, as when the client stays.
        Runs inside ``except CancelledError``: no await, and no exception escapes."""
        x, policy = r.x, r.policy
        try:
            if r.salvage is not None and r.tracked is not None and r.salvage():
                return
            tracked, progress = r.tracked, r.progress
            r.untrack()
            # A request whose job was shed on arrival: its record as it is so far.
            outcome = tracked.outcome() if isinstance(tracked, ShedRecord) else tracked
            if outcome is None:
                if x.status >= 400:
                    return
                outcome, progress = r.new_outcome(policy.spec.mode), None
            elif outcome.finished_at is not None:  # already written (or being written)
                return
            if outcome.upstream_status is None:
                outcome.upstream_status = x.status or None
            if progress is not None:
                detail, response_id = progress()
                outcome.response_id = outcome.response_id or response_id
            elif outcome.response_id is None:
                detail = "before the response was sent"
            else:  # the answer is in, its verification (or a regenerate call) was running
                detail = "before the response was sent, while verifying the answer"
                if outcome.attempts:
                    detail += f" (regenerate attempt {outcome.attempts})"
            outcome.note = f"not verified: client disconnected {detail}"
            self.finish(outcome, x.trace)
        except Exception:  # noqa: BLE001 - the cancellation must go on
            log.exception("policy %r: the record of a request cut by its client failed",
                          policy.name)

    def upstream_failed(self, r: PolicyRequest, err: UpstreamError) -> None:
        """The upstream call failed before the client got a byte (connect error, timeout,
        a stream cut while buffered): name the policy on the error response and account
        for the request with a record (``x.status`` is the upstream's status, if it
        answered at all)."""
        mode = r.policy.spec.mode
        outcome = r.new_outcome(mode)
        outcome.upstream_status = r.x.status or None
        outcome.note = f"not verified: {err.code}"
        err.headers.update((k.decode("latin-1"), v.decode("latin-1"))
                           for k, v in verity_headers(r.policy, mode, outcome.audit_id))
        self.finish(outcome, r.x.trace)


def needs_pool(policies: PolicySet, config: PoolConfig) -> bool:
    """Whether a loaded policy sends work to the worker processes: a shadow policy or
    candidates (their jobs), or — with ``pool.inline_min_bytes`` set — an inline one
    (its large verifications). With none, a relay's pool is not started until one is
    loaded (a 4 MiB body is then parsed in the relay, as with no policies at all)."""
    if config.inline_min_bytes is not None and policies:
        return True
    return any(p.spec.mode == "shadow" or p.spec.candidates for p in policies.values())


def _pool_starter(store: PolicyStore, pool: ProcessRunner,
                  settings: Settings) -> Callable[[], None]:
    """After a reload: start the workers if a policy now needs them."""
    def on_change() -> None:
        if needs_pool(store.policies, settings.pool):
            pool.start_soon()
    return on_change


@asynccontextmanager
async def open_engine(settings: Settings, telemetry: Telemetry, *,
                      layers: LayerRegistry = BUILTIN) -> AsyncIterator[VerityEngine | None]:
    """Run the engine for the app's lifetime; ``None`` when the policies dir is missing."""
    directory = settings.resolved_policies_dir()
    if not directory.is_dir():
        log.warning("policies directory %s %s: verification off (pass-through)", directory,
                    "is not a directory" if directory.exists() else "does not exist")
        yield None
        return
    async with open_runtime(settings, telemetry=telemetry, layers=layers) as runtime:
        fleet = settings.shadow.runner == "redis"  # jobs to gateway workers (gateway.fleet)
        workers = settings.pool.workers
        if workers is None:  # the cores the relay processes (server.workers) do not need
            workers = default_workers(settings.server.workers)
        workers = 0 if fleet else workers
        if workers and layers is not BUILTIN:  # a worker resolves layers in BUILTIN only
            log.warning("a custom layer registry: verification runs in-process")
            workers = 0
        shadow_config = settings.shadow
        if workers:  # one queue task per worker process: the queue is the backlog
            shadow_config = shadow_config.model_copy(update={"concurrency": workers})
        queue = ShadowQueue(shadow_config, telemetry)
        sink = open_audit_sink(settings.audit, loop=asyncio.get_running_loop())
        verifier, recorder = Verifier(runtime), Recorder(telemetry, sink)
        pool: ProcessRunner | None = None
        redis: RedisRunner | None = None
        runner: JobRunner
        if fleet:
            runner = redis = fleet_runner(settings, verifier, recorder, telemetry)
        elif workers:
            queue.start()
            runner = pool = ProcessRunner(settings, queue, verifier, recorder, telemetry,
                                          workers)
        else:
            queue.start()
            runner = LocalRunner(queue, verifier, recorder, telemetry)
        store = runtime.policies
        engine = VerityEngine(runtime, verifier, runner, queue, recorder)
        engine.pool = pool
        engine.inline_min_chars = settings.pool.inline_min_bytes
        engine.parse_min_bytes = settings.pool.parse_min_bytes
        watcher: asyncio.Task[None] | None = None
        try:
            if pool is not None:
                if needs_pool(store.policies, settings.pool):
                    await pool.start()  # ready once it can verify
                else:
                    log.info("verification pool: no loaded policy needs worker processes; "
                             "they start once one does")
            if redis is not None:
                await redis.start()  # probes Redis; sheds (recorded) until it answers
            if settings.reload_policies:
                watcher = asyncio.create_task(store.watch(
                    on_change=None if pool is None else _pool_starter(store, pool, settings)))
            yield engine
        finally:
            if watcher is not None:
                watcher.cancel()
                with suppress(asyncio.CancelledError):
                    await watcher
            await queue.close()
            if redis is not None:
                await redis.close()
            if pool is not None:
                await pool.close()
            await asyncio.to_thread(sink.close)
