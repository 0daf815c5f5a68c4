"""Shadow mode: the client gets the upstream answer untouched; verification runs in
the background and only reaches the audit and the traces.

- :func:`handle` — relay JSON or SSE exactly as the upstream sent it (an SSE stream
  is folded into a completion on its way through), with ``x-verity-policy``,
  ``-mode`` and ``-audit-id``; then submit the request's
  :class:`~gateway.verify.job.VerificationJob` (the policy's verification and its
  candidates') to the job runner, which writes the record (a full queue or shutdown
  writes a "not verified" one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.modes.headers import verity_headers
from gateway.modes.relay import is_sse, relay_accumulating
from gateway.modes.request import PolicyRequest
from gateway.wire.chat import answer_text, is_completion
from gateway.wire.messages import maybe_json
from gateway.wire.sse import StreamAccumulator

if TYPE_CHECKING:
    from gateway.modes.dispatch import VerityEngine

__all__ = ["handle"]


async def handle(engine: VerityEngine, r: PolicyRequest) -> None:
    """Relay the upstream answer untouched (same bytes, same timing), then queue its
    verification (the job runner writes the record)."""
    policy, x = r.policy, r.x
    outcome = r.new_outcome("shadow")
    completion: dict[str, Any] | None = None
    async with x.call_upstream(x.body, stream=x.stream) as (resp, up):
        x.status = outcome.upstream_status = resp.status
        ok = resp.status < 400
        headers = resp.headers + verity_headers(policy, "shadow",
                                                outcome.audit_id if ok else None)
        if ok:
            r.track(outcome)
        if x.stream and ok and is_sse(resp):
            relayed = StreamAccumulator()  # what the client got so far, if it leaves
            r.track(outcome, lambda: (
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
            parsed = maybe_json(data)
            up.response(resp.status, parsed if isinstance(parsed, dict) else None)
            await x.respond(resp.status, data, headers)
            if ok and is_completion(parsed):
                completion = parsed
            elif ok:
                outcome.note = "not verified: the upstream body is not a chat completion"
    if completion is None:
        if outcome.note is not None:  # an audit id went out: account for it
            engine.finish(outcome, x.trace)
        return
    r.untrack()  # the job writes the record now
    outcome.response_id = completion.get("id")
    engine.runner.submit(r.job(completion, outcome, background=True))
