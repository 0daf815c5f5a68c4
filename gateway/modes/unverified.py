"""An upstream success the policy cannot verify: never delivered as if verified.

A body that is not an answer of the front door's format (for chat completions: not
JSON, invalid UTF-8, trailing bytes, no ``choices``, a choice, message or content of
another shape: :func:`gateway.wire.chat.is_completion`; an SSE answer to
``stream: false``), a stream whose events are not the format's or one of whose
events cannot be read (the fold's ``unreadable``): with ``on_error: fail_closed`` the client
gets a 502 ``upstream_error`` (in passthrough, once the body has started: that error
as the last event), with ``fail_open`` the upstream body with ``x-verity-verdict:
n/a``; either way an audit record (``note: "not verified: …"``) and a warning log
line.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from gateway.errors import UpstreamError
from gateway.modes.headers import unverified_headers, verity_headers
from gateway.modes.request import PolicyRequest
from gateway.types import Headers
from gateway.verify.outcome import Outcome
from gateway.wire.base import ResponseFormat

if TYPE_CHECKING:
    from gateway.modes.dispatch import VerityEngine

__all__ = ["NOT_CHUNKS", "NOT_COMPLETION", "not_answer", "not_stream", "unverifiable",
           "unverified"]

log = logging.getLogger("gateway.engine")

NOT_COMPLETION = "the upstream body is not a chat completion"  # as shadow's note says
NOT_CHUNKS = "the upstream stream is not a chat completion stream"


def not_answer(fmt: ResponseFormat) -> str:
    """What an unverifiable body is, in notes (:data:`NOT_COMPLETION` for chat)."""
    return f"the upstream body is not a {fmt.noun}"


def not_stream(fmt: ResponseFormat) -> str:
    """What an unverifiable stream is, in notes (:data:`NOT_CHUNKS` for chat)."""
    return f"the upstream stream is not a {fmt.noun} stream"


def unverified(r: PolicyRequest, status: int, what: str, why: str,
               outcome: Outcome | None = None, *,
               refused: str = "answered 502 upstream_error",
               ) -> tuple[Outcome, UpstreamError | None]:
    """The record (and, under ``fail_closed``, the error) for an upstream success the
    policy cannot verify: ``what`` names it, ``why`` says what is wrong with it,
    ``refused`` what the client gets instead under ``fail_closed``. Logs a warning."""
    policy = r.policy
    outcome = outcome or r.new_outcome("inline")
    outcome.upstream_status = status
    err = None
    if policy.spec.on_error == "fail_closed":
        err = UpstreamError(
            f"The upstream answered {status} with a response the gateway cannot verify: "
            f"{what} ({why}). Policy '{policy.name}' fails closed, so it is not delivered.")
        consequence = f"fail_closed: {refused}"
    else:
        outcome.action, outcome.applied = "pass", True
        consequence = "fail_open: delivered unverified"
    outcome.note = f"not verified: {what} ({why}); {consequence}"
    log.warning("policy %r (inline): upstream status %s, but %s (%s); %s (audit id %s)",
                policy.name, status, what, why, consequence, outcome.audit_id)
    return outcome, err


async def unverifiable(engine: VerityEngine, r: PolicyRequest, status: int, data: bytes,
                       up_headers: Headers, what: str, why: str) -> None:
    """Nothing sent yet: a 502 (``fail_closed``) or the upstream bytes with verdict
    ``n/a`` (``fail_open``); audited either way."""
    outcome, err = unverified(r, status, what, why)
    if err is not None:
        await r.x.respond_error(err, verity_headers(r.policy, "inline", outcome.audit_id))
    else:
        await r.x.respond(status, data, up_headers + unverified_headers(r.policy,
                                                                        outcome.audit_id))
    engine.finish(outcome, r.x.trace)
