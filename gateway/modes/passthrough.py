"""Inline ``streaming: passthrough``: relay the stream as it comes, verify it, then
end it with the verdict.

Chunks are relayed as they arrive, the tail (finish, usage, ``[DONE]``) is held back
until the verdict (:class:`~gateway.modes.holdback.HoldBack`); only policy, mode and
audit-id headers can be sent. ``regenerate`` cannot replace text already delivered,
so it degrades to its ``fallback`` (recorded in the audit ``note``). How the verdict
is signalled in-band is the format's: :mod:`gateway.wire.chat_hold`,
:mod:`gateway.wire.responses_format`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from gateway.errors import UpstreamTooLarge, UpstreamTruncated
from gateway.modes.headers import verity_headers
from gateway.modes.holdback import HoldBack
from gateway.modes.relay import is_sse
from gateway.modes.request import PolicyRequest, Progress
from gateway.modes.unverified import not_stream, unverified
from gateway.modes.verdict import act, conclude
from gateway.types import Headers
from gateway.wire.messages import maybe_json

if TYPE_CHECKING:
    from gateway.modes.dispatch import VerityEngine

__all__ = ["handle"]

JsonForStream = Callable[["VerityEngine", PolicyRequest, int, bytes, Any, Headers],
                         Awaitable[None]]


def _sent(hold: HoldBack) -> Progress:
    """A passthrough stream cut by its client: how much (unverified) answer it was sent."""
    def progress() -> tuple[str, str | None]:
        n = len(hold.x.fmt.answer_text(hold.completion()))
        return f"after {n} characters of the answer were sent", hold.acc.id
    return progress


async def handle(engine: VerityEngine, r: PolicyRequest, json_for_stream: JsonForStream) -> None:
    """``json_for_stream`` answers a JSON body to the stream request (nothing relayed
    yet: it is verified whole, as ``buffer`` would)."""
    policy, x = r.policy, r.x
    outcome = r.new_outcome("inline")
    hold: HoldBack | None = None
    data, parsed = b"", None
    async with x.call_upstream(x.body, stream=True) as (resp, up):
        x.status = status = resp.status
        up_headers = resp.headers
        if status < 400 and is_sse(resp):
            hold = HoldBack(x)
            r.track(outcome, _sent(hold))
            await hold.relay(resp, up, up_headers + verity_headers(policy, "inline",
                                                                   outcome.audit_id))
        else:
            data = await resp.read()
            parsed = maybe_json(data) if status < 400 else None
            up.response(status, parsed if isinstance(parsed, dict) else None)
    if hold is None:
        if status < 400:  # a JSON answer: nothing relayed yet, verified whole like buffer
            await json_for_stream(engine, r, status, data, parsed, up_headers)
            return
        await x.respond(status, data, up_headers + verity_headers(policy, "inline"))
        return
    outcome.upstream_status = status
    completion = hold.completion()
    if hold.error is not None or hold.acc.error is not None:
        outcome.note = f"not verified: {hold.error.code}" \
            if isinstance(hold.error, (UpstreamTooLarge, UpstreamTruncated)) \
            else "not verified: the upstream stream failed"
        if hold.error is not None:
            await hold.abort()
        else:
            await hold.finish(action="pass")
        engine.finish(outcome, x.trace)
        return
    if hold.acc.unreadable or not x.fmt.is_answer(completion):
        # The held tail starts at the first unreadable event: fail_closed drops it and
        # ends with an error event (the SDK raises), fail_open sends it as it came.
        _, err = unverified(r, status, not_stream(x.fmt), x.fmt.stream_problem(hold.acc),
                            outcome, refused="the stream ended with an upstream_error event")
        if err is not None:
            await hold.finish(action="block", error_body=err.body())
        else:
            await hold.finish(action="pass")
        engine.finish(outcome, x.trace)
        return
    applied = await act(engine, r, completion, outcome, allow_regenerate=False)
    signal = {"audit_id": outcome.audit_id, "policy": policy.name,
              "verdict": applied.verification.verdict, "action": applied.action,
              "score": applied.verification.score}
    if applied.error is not None:
        await hold.finish(action="block", error_body=applied.error.body())
    elif applied.action == "block":
        await hold.finish(action="block", text="\n\n" + (applied.message or ""),
                          verity=signal)
    else:
        await hold.finish(action=applied.action, text=applied.appended, verity=signal)
    conclude(engine, r, completion, outcome)
