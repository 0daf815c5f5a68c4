"""Verify an inline answer and apply its band's action: shared by the inline paths.

:func:`act` verifies through :meth:`Verifier.verify
<gateway.verify.verifier.Verifier.verify>` (one job per answer: the upstream's, then
each regenerate attempt's), applies the action (:mod:`gateway.verify.actions`;
``regenerate`` calls the upstream through the exchange) and fills the request's
record; :func:`conclude` closes it after the response.

A request for structured output (chat ``response_format``, Responses ``text.format``:
``json_schema`` / ``json_object``) never gets a disclaimer: text appended to JSON
breaks the client's parsing (the SDK's ``parse`` raises). Its ``disclaimer`` (a
band's, or a regenerate's fallback) is a ``flag`` instead — the verdict in the
headers (and, in a passthrough stream, nowhere else) — and the record's note says so
(:data:`STRUCTURED_NOTE`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from gateway.modes.request import PolicyRequest
from gateway.policy.models import ActionSet, DisclaimerAction
from gateway.verify.actions import (
    UPSTREAM_ACTIONS,
    Applied,
    RegenContext,
    apply_action,
    apply_static,
    band_action,
    needs_upstream,
    without_disclaimer,
)
from gateway.verify.content import record_content
from gateway.verify.outcome import Outcome, Verification
from gateway.verify.pipeline import Budget

if TYPE_CHECKING:
    from gateway.modes.dispatch import VerityEngine

__all__ = ["STRUCTURED_NOTE", "act", "conclude", "detail", "verified", "wants_detail"]

STRUCTURED_NOTE = ("disclaimer not appended: the client asked for structured (JSON) output; "
                   "flagged instead")


async def verified(engine: VerityEngine, r: PolicyRequest, completion: dict[str, Any],
                   status: int) -> tuple[Outcome, Applied]:
    """A new outcome for an upstream answer (``status``), verified and acted on."""
    outcome = r.new_outcome("inline")
    outcome.upstream_status = status
    return outcome, await act(engine, r, completion, outcome)


async def act(engine: VerityEngine, r: PolicyRequest, completion: dict[str, Any],
              outcome: Outcome, *, allow_regenerate: bool = True) -> Applied:
    """Verify ``completion``, apply its band's action and record both in ``outcome``
    (``allow_regenerate=False``: the answer was already streamed, so an action that
    needs the upstream again applies its ``fallback`` instead)."""
    x, policy = r.x, r.policy
    fmt = x.fmt
    budget = Budget.for_policy(policy)
    spec = policy.spec
    actions = spec.actions
    if fmt.structured(x.payload):  # JSON output: text appended would break its parsing
        actions = without_disclaimer(actions)
    outcome.response_id = completion.get("id")  # the delivered answer's, once acted on
    r.track(outcome)  # a client that disconnects from here on gets this record
    calls: list[str | None] = []  # each regenerate call's response id
    job = r.job(completion, outcome)

    pool = engine.pool if engine.in_pool(r) else None

    async def verify(c: dict[str, Any]) -> Verification:
        this = job if c is completion else job.with_answer(fmt.job_answer(c))
        if pool is not None:  # a large one: in a worker process, the loop serves others
            return await pool.verify(this, budget)
        return await engine.verifier.verify(this, policy=policy, trace=x.trace, budget=budget)

    async def complete(payload: dict[str, Any]) -> tuple[int, Any, bytes]:
        calls.append(None)
        outcome.attempts = len(calls)  # the attempt running, should the client disconnect
        t0 = time.monotonic()
        try:
            status, parsed, raw = await x.complete(payload)
        finally:  # upstream time is not verification time (budget.total_ms)
            budget.exclude(time.monotonic() - t0)
        calls[-1] = parsed.get("id") if isinstance(parsed, dict) else None
        return status, parsed, raw

    v = await verify(completion)
    action = band_action(actions, v.verdict)
    if needs_upstream(action) and not allow_regenerate:
        fallback = action.fallback  # type: ignore[union-attr]
        applied = apply_static(fallback, completion, v, policy.name, fmt)
        applied.note = (f"{action.type} is not possible once a passthrough stream has been "
                        f"delivered; fallback {fallback.type} applied")
    else:
        ctx = RegenContext(policy=policy.name, messages=x.messages, payload=x.payload,
                           actions=actions, complete=complete, verify=verify,
                           attempt=lambda n: x.trace.attempt(n, action.type),
                           time_left=budget.remaining_ms, fmt=fmt)
        applied = await apply_action(action, completion, v, ctx)
    outcome.record(applied.verification)
    outcome.action, outcome.applied = applied.action, True
    outcome.attempts, outcome.attempt_history = applied.attempts, applied.history
    if actions is not spec.actions and _would_disclaim(spec.actions, applied):
        applied.note = "; ".join(n for n in (applied.note, STRUCTURED_NOTE) if n)
    notes = [n for n in (applied.verification.note, applied.note) if n]
    outcome.note = "; ".join(notes) or None
    delivered = applied.completion or completion
    # The id the client got (a regenerated answer's); each attempt's in attempt_history
    # (entry 0 is the answer first verified, then one per regenerate call).
    outcome.response_id = delivered.get("id")
    if calls and len(applied.history) == len(calls) + 1:
        for entry, rid in zip(applied.history, [completion.get("id"), *calls], strict=True):
            entry["response_id"] = rid
    if spec.telemetry.record_content:  # else nothing is recorded: no answer text
        record_content(policy, outcome, x.trace, x.messages, fmt.answer_text(delivered))
    return applied


def _would_disclaim(actions: ActionSet, applied: Applied) -> bool:
    """The policy's own action for the delivered verdict appends a disclaimer (the
    structured output made it a flag)."""
    action = band_action(actions, applied.verification.verdict)
    if needs_upstream(action):  # the answer fell back to its fallback
        fallback = getattr(action, "fallback", None)
        return isinstance(fallback, DisclaimerAction) and applied.action == "flag"
    return isinstance(action, DisclaimerAction) and (applied.action == "flag"
                                                     or applied.action in UPSTREAM_ACTIONS)


def wants_detail(r: PolicyRequest) -> bool:
    """``expose_detail`` and the request header ``x-verity-detail: true``."""
    return r.policy.spec.expose_detail and \
        r.x.info.headers.get("x-verity-detail", "").strip().lower() in ("true", "1", "yes")


def detail(outcome: Outcome) -> dict[str, Any]:
    """The ``verity`` body field (per-layer detail) of an inline answer."""
    d = outcome.to_dict()
    keys = ("audit_id", "policy", "policy_version", "mode", "risk_level", "verdict", "score",
            "min_confidence", "action", "attempts", "reasons", "failed_claims", "layers")
    return {k: d[k] for k in keys}


def conclude(engine: VerityEngine, r: PolicyRequest, completion: dict[str, Any],
             outcome: Outcome) -> None:
    """After the response: decision, metrics, candidates, audit."""
    engine.finish(outcome, r.x.trace, write=False)
    if not engine.submit_candidates(r, completion, outcome):
        engine.audit.write(outcome)
