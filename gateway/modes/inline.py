"""Inline mode: verify before answering (or, for ``streaming: passthrough``, while).

- **non-stream** — read the completion, verify, apply the action, answer with
  ``x-verity-policy``, ``-mode``, ``-verdict``, ``-score``, ``-action``, ``-layers``
  (``grounding=0.9134:pass,claims=1.0000:pass``), ``-audit-id`` (and ``-attempts`` after
  regenerate). An answer left unchanged (pass, flag) is sent as the upstream bytes.
  With ``expose_detail`` and the request header ``x-verity-detail: true`` the body
  gets a ``verity`` object (per-layer detail); never otherwise.
- **stream, buffer** — the upstream stream is read whole (the client's
  ``stream_options`` untouched), verified, acted on; an unchanged answer is replayed
  byte for byte, a changed one is re-emitted as a synthesized SSE stream. Same
  headers as non-stream.
- **stream, passthrough** — :mod:`gateway.modes.passthrough`.

Answers are read and rewritten through the front door's
:class:`~gateway.wire.base.ResponseFormat` (``x.fmt``). An upstream success that
cannot be verified: :mod:`gateway.modes.unverified`. A JSON answer to a
``stream: true`` request is verified like any answer and re-sent as a synthesized
SSE stream (the SDK reads nothing from a JSON body on a stream call). The layers' context-side work (indexing the grounding documents) runs
while the upstream generates the answer (:mod:`gateway.verify.prepare`).

A client that disconnects cancels verification (the exchange's disconnect watcher);
the record says so (``note: "not verified: client disconnected …"``: before the
response was sent, or after how many characters of a passthrough answer;
``VerityEngine.client_gone``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from gateway.modes import passthrough
from gateway.modes.headers import verdict_headers, verity_headers
from gateway.modes.relay import is_sse, read_all
from gateway.modes.request import PolicyRequest
from gateway.modes.unverified import not_answer, not_stream, unverifiable
from gateway.modes.verdict import conclude, detail, verified, wants_detail
from gateway.types import Headers
from gateway.verify.actions import Applied
from gateway.wire.base import StreamFold
from gateway.wire.chat import include_usage
from gateway.wire.messages import maybe_json

if TYPE_CHECKING:
    from gateway.modes.dispatch import VerityEngine

__all__ = ["handle"]

_SSE_CT = (b"content-type", b"text/event-stream; charset=utf-8")


async def handle(engine: VerityEngine, r: PolicyRequest) -> None:
    x = r.x
    prepared = engine.runtime.prepared
    # The layers' context-side work (e.g. indexing the grounding documents) runs while
    # the upstream generates the answer, not after it.
    # (Not for a request verified in a worker process: that work would be the loop's.)
    if not engine.in_pool(r):
        prepared.start(r.audit_id, r.policy, x.messages, x.trace.prepare())
    try:
        if not x.stream:
            await _non_stream(engine, r)
        elif r.policy.spec.streaming == "buffer":
            await _buffer(engine, r)
        else:
            await passthrough.handle(engine, r, json_for_stream)
    finally:
        prepared.discard(r.audit_id)


async def _send_blocked(r: PolicyRequest, applied: Applied, headers: Headers) -> None:
    err = applied.error
    assert err is not None
    await r.x.respond_error(err, headers)


async def json_for_stream(engine: VerityEngine, r: PolicyRequest, status: int, data: bytes,
                          parsed: Any, up_headers: Headers) -> None:
    """A ``stream: true`` request the upstream answered with a plain JSON body.

    An answer of the format is verified like any answer (whatever ``streaming`` says:
    nothing has been sent, so every action is possible) and re-sent as a synthesized
    SSE stream, which is what a streaming client reads; anything else is unverifiable."""
    policy, x = r.policy, r.x
    fmt = x.fmt
    if not fmt.is_answer(parsed):
        await unverifiable(engine, r, status, data, up_headers, not_answer(fmt),
                           fmt.body_problem(data, parsed))
        return
    outcome, applied = await verified(engine, r, parsed, status)
    noun = "completion" if fmt.chat_shaped else fmt.noun
    converted = f"the upstream answered the stream request with a JSON {noun}; re-sent as SSE"
    outcome.note = f"{outcome.note}; {converted}" if outcome.note else converted
    headers = verdict_headers(policy, outcome.audit_id, applied)
    if applied.error is not None:
        await _send_blocked(r, applied, headers)
    else:
        raw = fmt.stream_body(applied.completion or parsed,
                              include_usage=include_usage(x.payload))
        kept = [h for h in up_headers if h[0] != b"content-type"]
        await x.respond(status, raw, kept + headers, content_type=_SSE_CT)
    conclude(engine, r, parsed, outcome)


# ---- non-stream ---------------------------------------------------------------------------

async def _non_stream(engine: VerityEngine, r: PolicyRequest) -> None:
    policy, x = r.policy, r.x
    async with x.call_upstream(x.body, stream=False) as (resp, up):
        x.status = status = resp.status  # before reading: a failed read is audited with it
        data = await resp.read()
        parsed = maybe_json(data)
        up.response(resp.status, parsed if isinstance(parsed, dict) else None)
        up_headers = resp.headers
    if status >= 400:
        await x.respond(status, data, up_headers + verity_headers(policy, "inline"))
        return
    if not x.fmt.is_answer(parsed):  # an SSE answer to stream: false included
        await unverifiable(engine, r, status, data, up_headers, not_answer(x.fmt),
                           x.fmt.body_problem(data, parsed))
        return
    outcome, applied = await verified(engine, r, parsed, status)
    headers = verdict_headers(policy, outcome.audit_id, applied)
    if applied.error is not None:
        await _send_blocked(r, applied, headers)
    else:
        want_detail = wants_detail(r)
        if applied.modified or want_detail:
            body = dict(applied.completion or parsed)
            if want_detail:
                body["verity"] = detail(outcome)
            data = orjson.dumps(body)
        await x.respond(status, data, up_headers + headers)
    conclude(engine, r, parsed, outcome)


# ---- stream: buffer -----------------------------------------------------------------------

async def _buffer(engine: VerityEngine, r: PolicyRequest) -> None:
    policy, x = r.policy, r.x
    fmt = x.fmt
    acc: StreamFold | None = None
    parsed: Any = None
    async with x.call_upstream(x.body, stream=True) as (resp, up):
        status, up_headers = resp.status, resp.headers
        x.status = status  # before reading: a cut stream is audited with it
        if status >= 400:
            data = await resp.read()
            up.response(status, None)
            await x.respond(status, data, up_headers + verity_headers(policy, "inline"))
            return
        if is_sse(resp):
            raw, acc = await read_all(resp, up, fmt.fold())
        else:
            raw = await resp.read()
            parsed = maybe_json(raw)
            up.response(status, parsed if isinstance(parsed, dict) else None)
    if acc is None:
        await json_for_stream(engine, r, status, raw, parsed, up_headers)
        return
    completion = acc.completion()
    if acc.error is not None:  # an in-band upstream error: relay it unverified
        await x.respond(status, raw, up_headers + verity_headers(policy, "inline"))
        return
    if acc.unreadable or not fmt.is_answer(completion):
        await unverifiable(engine, r, status, raw, up_headers, not_stream(fmt),
                           fmt.stream_problem(acc))
        return
    outcome, applied = await verified(engine, r, completion, status)
    headers = verdict_headers(policy, outcome.audit_id, applied)
    if applied.error is not None:
        await _send_blocked(r, applied, headers)
    else:
        if applied.modified:
            raw = fmt.stream_body(applied.completion or completion,
                                  include_usage=include_usage(x.payload))
        await x.respond(status, raw, up_headers + headers)
    conclude(engine, r, completion, outcome)
