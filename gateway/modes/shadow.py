"""Shadow mode: the client gets the upstream answer untouched; verification runs in
the background and only reaches the audit and the traces.

- :func:`handle` — relay JSON or SSE exactly as the upstream sent it (an SSE stream
  is folded into a completion on its way through), with ``x-verity-policy``,
  ``-mode`` and ``-audit-id``; then submit the request's
  :class:`~gateway.verify.job.VerificationJob` (the policy's verification and its
  candidates') to the job runner, which writes the record (a full queue or shutdown
  writes a "not verified" one). When the runner says it would shed the job, the
  job is never built: the record is written from the request's own outcome.
- When the relay is saturated and its hand-off budget is spent as the request
  arrives (``gateway.pool.ProcessRunner.hand_off``), the job is shed before the
  upstream call: the answer is relayed as pass-through relays it (not captured, not
  parsed) and the record says ``relay_busy`` — without ``response_id`` (the answer
  was not read), and without telling an answer from a non-answer or a cut stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gateway.http.relay import relay_stream
from gateway.modes.headers import verity_headers
from gateway.modes.relay import is_sse, relay_accumulating
from gateway.modes.request import PolicyRequest
from gateway.modes.unverified import not_answer, not_stream
from gateway.policy.select import Selection
from gateway.verify.job import PolicyRef
from gateway.verify.outcome import Outcome
from gateway.verify.runner import record_shed
from gateway.verify.shed import ShedPlan, ShedRecord
from gateway.wire.messages import maybe_json

if TYPE_CHECKING:
    from gateway.modes.dispatch import VerityEngine
    from gateway.pool import ProcessRunner

__all__ = ["handle", "relay_shed"]


async def handle(engine: VerityEngine, r: PolicyRequest, budget: str = "free") -> None:
    """Relay the upstream answer untouched (same bytes, same timing), then queue its
    verification (the job runner writes the record). ``budget``: what the pool's
    :meth:`~gateway.pool.ProcessRunner.hand_off` said as the request arrived (``token``
    or ``free``; a ``shed`` one goes to :func:`relay_shed` instead)."""
    policy, x = r.policy, r.x
    fmt = x.fmt
    outcome = r.new_outcome("shadow")
    submit = _submitter(engine, r, outcome, admitted=budget == "token")
    completion: dict[str, Any] | None = None
    async with x.call_upstream(x.body, stream=x.stream) as (resp, up):
        x.status = outcome.upstream_status = resp.status
        ok = resp.status < 400
        headers = resp.headers + verity_headers(policy, "shadow",
                                                outcome.audit_id if ok else None)
        if ok:
            r.track(outcome)
        if x.stream and ok and is_sse(resp):
            relayed = fmt.fold()  # what the client got so far, if it leaves
            r.track(outcome, lambda: (
                f"after {len(fmt.answer_text(relayed.completion()))} characters of the "
                f"answer were relayed", relayed.id))

            def salvage() -> bool:
                # The client left once it had the whole answer (an SDK closing the
                # connection after the last event, before the upstream's own end):
                # the answer is complete, so it is verified as if the client stayed.
                if relayed.truncated or relayed.error is not None or relayed.unreadable:
                    return False
                whole = relayed.completion()
                if not fmt.is_answer(whole):
                    return False
                submit(whole)
                return True
            r.salvage = salvage
            acc, why = await relay_accumulating(x, resp, up, headers, relayed)
            completion = acc.completion() if acc is not None else None
            if completion is None:
                outcome.note = why
            elif acc is not None and (acc.unreadable or not fmt.is_answer(completion)):
                completion = None  # its text is not all in the answer
                outcome.note = f"not verified: {not_stream(fmt)} ({fmt.stream_problem(acc)})"
        else:
            data = await resp.read()
            parsed = maybe_json(data)
            up.response(resp.status, parsed if isinstance(parsed, dict) else None)
            await x.respond(resp.status, data, headers)
            if ok and fmt.is_answer(parsed):
                completion = parsed
            elif ok:
                outcome.note = f"not verified: {not_answer(fmt)}"
    if completion is None:
        if outcome.note is not None:  # an audit id went out: account for it
            engine.finish(outcome, x.trace)
        return
    submit(completion)


async def relay_shed(engine: VerityEngine, pool: ProcessRunner, r: PolicyRequest) -> None:
    """The job is shed before the upstream call (a saturated relay): relay the answer
    as pass-through does, then write the shed record from what is known (a
    :class:`~gateway.verify.shed.ShedRecord`: no ``Outcome`` unless the client leaves
    first)."""
    x = r.x
    selection = r.selection
    policy = selection.policy
    record = ShedRecord(_plan(selection), r.audit_id, x.info.model, x.info.tenant, x.stream,
                        policy.spec.streaming if x.stream else None, x.served)
    async with x.call_upstream(x.body, stream=x.stream) as (resp, up):
        x.status = record.upstream_status = resp.status
        ok = resp.status < 400
        headers = verity_headers(policy, "shadow", record.audit_id if ok else None)
        if ok:
            r.track(record, _relaying)
        if x.stream and ok and is_sse(resp):
            await relay_stream(x, resp, up, headers)
        else:
            data = await resp.read()
            if up.recording:
                parsed = maybe_json(data)
                up.response(resp.status, parsed if isinstance(parsed, dict) else None)
            await x.respond(resp.status, data, resp.headers + headers)
    if ok:  # an upstream error is relayed without a record, as on the full path
        r.untrack()
        pool.shed_relayed()
        record.write(engine.audit, engine.telemetry, x.trace)


_PLANS_MAX = 256
"""Selections whose shed record's fixed part is kept; past it the cache starts over."""
_plans: dict[int, tuple[Selection, ShedPlan]] = {}


def _plan(selection: Selection) -> ShedPlan:
    """The fixed part of ``selection``'s ``relay_busy`` record: built once per
    selection (one per policy version and reason, kept by the policy set: what the
    operator loaded, never what a client sent)."""
    kept = _plans.get(id(selection))
    if kept is not None and kept[0] is selection:
        return kept[1]
    if len(_plans) >= _PLANS_MAX:
        _plans.clear()
    policy = selection.policy
    plan = ShedPlan(policy.name, policy.version,
                    [PolicyRef(c.name, c.version) for c in selection.candidates], "relay_busy")
    _plans[id(selection)] = (selection, plan)
    return plan


def _relaying() -> tuple[str, str | None]:
    return "while the answer was relayed (its verification already shed: relay_busy)", None


def _submitter(engine: VerityEngine, r: PolicyRequest, outcome: Outcome, *,
               admitted: bool = False) -> Callable[[dict[str, Any]], None]:
    """Hand the answer's verification to the job runner, which writes the record from
    then on (no await: it may run inside the disconnect path). ``admitted``: the
    saturated relay's hand-off budget already admitted it (only the queue may shed
    it); else the runner is asked as usual (saturation may have begun meanwhile)."""
    def submit(completion: dict[str, Any]) -> None:
        r.untrack()
        r.salvage = None
        outcome.response_id = completion.get("id")
        # Decided before the job is built: no job at all.
        why = engine.shadow.shed("shadow") if admitted else engine.runner.shed("verify")
        if why:
            record_shed(engine.recorder, engine.telemetry, outcome,
                        [PolicyRef(c.name, c.version) for c in r.selection.candidates],
                        r.x.trace, reason=why)
        else:
            engine.runner.submit(r.job(completion, outcome, background=True))
    return submit
