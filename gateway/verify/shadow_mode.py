"""Shadow mode: the client gets the upstream answer untouched; verification runs in
the background (``gateway.shadow``) and only reaches the audit and the traces.

- :func:`handle` — relay JSON or SSE exactly as the upstream sent it (an SSE stream
  is folded into a completion on its way through), with ``x-verity-policy``,
  ``-mode`` and ``-audit-id``; then :func:`submit`.
- :func:`submit` — queue the policy's verification and its candidates'; the job
  writes the audit record (a full queue or shutdown writes a "not verified" one).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from gateway.http.asgi import send_bytes
from gateway.policy.select import Selection
from gateway.proxy import ChatExchange, _maybe_json
from gateway.shadow import ShadowJob
from gateway.verify.actions import answer_text, band_action
from gateway.verify.engine import is_completion, verity_headers
from gateway.verify.outcome import Outcome
from gateway.verify.streaming import is_sse, relay_accumulating
from gateway.wire.sse import StreamAccumulator

if TYPE_CHECKING:
    from gateway.proxy import Proxy
    from gateway.verify.engine import VerityEngine

__all__ = ["handle", "submit"]


async def handle(engine: VerityEngine, proxy: Proxy, x: ChatExchange, plan: Selection) -> None:
    """Relay the upstream answer untouched (same bytes, same timing), then verify it in
    the background (:func:`submit`)."""
    policy = plan.policy
    outcome = engine.new_outcome(policy, x, "shadow")
    completion: dict[str, Any] | None = None
    async with proxy.call_upstream(x, x.body, stream=x.stream) as (resp, up):
        x.status = outcome.upstream_status = resp.status
        ok = resp.status < 400
        headers = resp.headers + verity_headers(policy, "shadow",
                                                outcome.audit_id if ok else None)
        if ok:
            engine.track(x, outcome)
        if x.stream and ok and is_sse(resp):
            relayed = StreamAccumulator()  # what the client got so far, if it leaves
            engine.track(x, outcome, lambda: (
                f"after {len(answer_text(relayed.completion()))} characters of the answer "
                f"were relayed", relayed.id))
            acc, why = await relay_accumulating(x, resp, up, headers, relayed)
            completion = acc.completion() if acc is not None else None
            if completion is None:
                outcome.note = why
            elif acc is not None and acc.unreadable:  # its text is not all in the answer
                completion = None
                outcome.note = (f"not verified: the upstream stream is not a chat "
                                f"completion stream ({acc.unreadable} event(s) unreadable)")
        else:
            data = await resp.read()
            parsed = _maybe_json(data)
            up.response(resp.status, parsed if isinstance(parsed, dict) else None)
            x.watcher.disarm()
            await send_bytes(x.send, resp.status, data, headers, content_type=None)
            if ok and is_completion(parsed):
                completion = parsed
            elif ok:
                outcome.note = "not verified: the upstream body is not a chat completion"
    if completion is None:
        if outcome.note is not None:  # an audit id went out: account for it
            engine.finish(outcome, x.trace)
        return
    submit(engine, x, plan, completion, outcome)

def submit(engine: VerityEngine, x: ChatExchange, plan: Selection,
           completion: dict[str, Any], outcome: Outcome) -> None:
    """Queue the verification of ``completion``; the job writes ``outcome``."""
    policy = plan.policy
    engine.untrack(x)  # the shadow job writes the record now
    outcome.response_id = completion.get("id")
    shadow_trace = engine.telemetry.start_shadow(x.trace)

    async def run() -> None:
        status, error = 200, None
        try:
            v = await engine.verify(policy, x, completion, shadow_trace)
            outcome.record(v)
            outcome.action = band_action(policy.spec.actions, v.verdict).type
            engine.record_content(policy, outcome, shadow_trace,
                                x.payload.get("messages") or [], answer_text(completion))
            for cand in plan.candidates:
                outcome.candidates.append(await engine.candidate(cand, x, completion,
                                                                shadow_trace))
        except asyncio.CancelledError:
            status, error = 0, "shadow_cancelled"
            outcome.note = "shadow verification cancelled at shutdown"
            raise
        finally:
            engine.finish(outcome, shadow_trace)
            shadow_trace.end(status, error)

    def dropped(why: str) -> None:  # never started
        outcome.note = ("not verified: shadow queue full" if why == "dropped"
                        else "not verified: still queued at shutdown")
        engine.finish(outcome, shadow_trace)
        shadow_trace.end(0, f"shadow_{why}")

    engine.shadow.submit(ShadowJob(run, dropped, kind="shadow"))
