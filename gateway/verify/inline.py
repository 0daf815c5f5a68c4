"""Inline mode: verify before (or, for ``streaming: passthrough``, while) answering.

- **non-stream** — read the completion, verify, apply the action, answer with
  ``x-verity-policy``, ``-mode``, ``-verdict``, ``-score``, ``-action``, ``-layers``
  (``grounding=0.91:pass,claims=1.00:pass``), ``-audit-id`` (and ``-attempts`` after
  regenerate). An answer left unchanged (pass, flag) is sent as the upstream bytes.
  With ``expose_detail`` and the request header ``x-verity-detail: true`` the body
  gets a ``verity`` object (per-layer detail); never otherwise.
- **stream, buffer** — the upstream stream is read whole (the client's
  ``stream_options`` untouched), verified, acted on; an unchanged answer is replayed
  byte for byte, a changed one is re-emitted as a synthesized SSE stream. Same
  headers as non-stream.
- **stream, passthrough** — chunks are relayed as they arrive, the tail (finish,
  usage, ``[DONE]``) is held back until the verdict; only policy, mode and audit-id
  headers can be sent. ``regenerate`` cannot replace text already delivered, so it
  degrades to its ``fallback`` (recorded in the audit ``note``). How the verdict is
  signalled in-band: ``gateway.verify.streaming``.

A client that disconnects cancels verification (the proxy's disconnect watcher);
nothing is audited then.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

import orjson

from gateway.asgi import send_bytes, send_error
from gateway.policy.models import RegenerateAction
from gateway.proxy import ChatExchange, _maybe_json
from gateway.verify.actions import (
    Applied,
    RegenContext,
    answer_text,
    apply_action,
    apply_static,
    band_action,
)
from gateway.verify.engine import is_completion, verity_headers
from gateway.verify.outcome import Outcome
from gateway.verify.pipeline import Budget
from gateway.verify.streaming import HoldBack, is_sse, read_all, synthesize

if TYPE_CHECKING:
    from gateway.policy.loader import Policy
    from gateway.policy.select import Selection
    from gateway.proxy import Proxy
    from gateway.verify.engine import VerityEngine

__all__ = ["handle"]

Headers = list[tuple[bytes, bytes]]


async def handle(engine: VerityEngine, proxy: Proxy, x: ChatExchange, plan: Selection) -> None:
    # The layers' context-side work (e.g. indexing the grounding documents) runs while
    # the upstream generates the answer, not after it.
    engine.prepare(plan.policy, x)
    try:
        if not x.stream:
            await _non_stream(engine, proxy, x, plan)
        elif plan.policy.spec.streaming == "buffer":
            await _buffer(engine, proxy, x, plan)
        else:
            await _passthrough(engine, proxy, x, plan)
    finally:
        engine.discard_prepared(x)


# ---- shared ------------------------------------------------------------------------------

async def _act(engine: VerityEngine, proxy: Proxy, x: ChatExchange, policy: Policy,
               completion: dict[str, Any], outcome: Outcome, *,
               allow_regenerate: bool = True) -> Applied:
    budget = Budget.for_policy(policy)
    spec = policy.spec

    async def verify(c: dict[str, Any]) -> Any:
        return await engine.verify(policy, x, c, x.trace, budget)

    async def complete(payload: dict[str, Any]) -> tuple[int, Any, bytes]:
        model = str(payload.get("model") or x.info.model)
        t0 = time.monotonic()
        try:
            target = x if model == x.info.model else dataclasses.replace(
                x, upstream=proxy.route(model))
            return await proxy.complete(target, payload)
        finally:  # upstream time is not verification time (budget.total_ms)
            budget.exclude(time.monotonic() - t0)

    v = await verify(completion)
    action = band_action(spec.actions, v.verdict)
    if isinstance(action, RegenerateAction) and not allow_regenerate:
        applied = apply_static(action.fallback, completion, v, policy.name)
        applied.note = ("regenerate is not possible once a passthrough stream has been "
                        f"delivered; fallback {action.fallback.type} applied")
    else:
        ctx = RegenContext(policy=policy.name, messages=x.payload.get("messages") or [],
                           payload=x.payload, actions=spec.actions, complete=complete,
                           verify=verify, attempt=x.trace.attempt,
                           time_left=budget.remaining_ms)
        applied = await apply_action(action, completion, v, ctx)
    outcome.record(applied.verification)
    outcome.action, outcome.applied = applied.action, True
    outcome.attempts, outcome.attempt_history = applied.attempts, applied.history
    notes = [n for n in (applied.verification.note, applied.note) if n]
    outcome.note = "; ".join(notes) or None
    outcome.response_id = completion.get("id")
    delivered = applied.completion or completion
    engine.record_content(policy, outcome, x.trace, x.payload.get("messages") or [],
                          answer_text(delivered))
    return applied


def _headers(policy: Policy, outcome: Outcome, applied: Applied) -> Headers:
    v = applied.verification
    out = verity_headers(policy, "inline", outcome.audit_id)
    out += [
        (b"x-verity-verdict", v.verdict.encode()),
        (b"x-verity-score", (b"n/a" if v.score is None else f"{v.score:.2f}".encode())),
        (b"x-verity-action", applied.action.encode()),
        # "n/a" (like the score) when no layer ran, e.g. an answer of tool calls only
        (b"x-verity-layers", (v.layers_header() or "n/a").encode("latin-1", "replace")),
    ]
    if applied.attempts:
        out.append((b"x-verity-attempts", str(applied.attempts).encode()))
    return out


def _wants_detail(policy: Policy, x: ChatExchange) -> bool:
    return policy.spec.expose_detail and \
        x.info.headers.get("x-verity-detail", "").strip().lower() in ("true", "1", "yes")


def _detail(outcome: Outcome) -> dict[str, Any]:
    d = outcome.to_dict()
    keys = ("audit_id", "policy", "policy_version", "mode", "risk_level", "verdict", "score",
            "min_confidence", "action", "attempts", "reasons", "failed_claims", "layers")
    return {k: d[k] for k in keys}


def _conclude(engine: VerityEngine, x: ChatExchange, plan: Selection,
              completion: dict[str, Any], outcome: Outcome) -> None:
    """After the response: decision, metrics, candidates, audit."""
    engine.finish(outcome, x.trace, write=False)
    if not engine.submit_candidates(x, plan, completion, outcome):
        engine.audit.write(outcome)


async def _send_error(x: ChatExchange, applied: Applied, headers: Headers) -> None:
    err = applied.error
    assert err is not None
    x.status = err.status
    x.watcher.disarm()
    await send_error(x.send, err, headers)


# ---- non-stream ---------------------------------------------------------------------------

async def _non_stream(engine: VerityEngine, proxy: Proxy, x: ChatExchange,
                      plan: Selection) -> None:
    policy = plan.policy
    async with proxy.call_upstream(x, x.body, stream=False) as (resp, up):
        x.status = status = resp.status  # before reading: a failed read is audited with it
        data = await resp.read()
        parsed = _maybe_json(data)
        up.response(resp.status, parsed if isinstance(parsed, dict) else None)
        up_headers = resp.headers
    if status >= 400 or not is_completion(parsed):
        x.watcher.disarm()
        await send_bytes(x.send, status, data, up_headers + verity_headers(policy, "inline"),
                         content_type=None)
        return
    outcome = engine.new_outcome(policy, x, "inline")
    outcome.upstream_status = status
    applied = await _act(engine, proxy, x, policy, parsed, outcome)
    headers = _headers(policy, outcome, applied)
    if applied.error is not None:
        await _send_error(x, applied, headers)
    else:
        detail = _wants_detail(policy, x)
        if applied.modified or detail:
            body = dict(applied.completion or parsed)
            if detail:
                body["verity"] = _detail(outcome)
            data = orjson.dumps(body)
        x.watcher.disarm()
        await send_bytes(x.send, status, data, up_headers + headers, content_type=None)
    _conclude(engine, x, plan, parsed, outcome)


# ---- stream: buffer -----------------------------------------------------------------------

async def _buffer(engine: VerityEngine, proxy: Proxy, x: ChatExchange, plan: Selection) -> None:
    policy = plan.policy
    async with proxy.call_upstream(x, x.body, stream=True) as (resp, up):
        status, up_headers = resp.status, resp.headers
        x.status = status  # before reading: a cut stream is audited with it
        if status >= 400 or not is_sse(resp):
            data = await resp.read()
            up.response(status, None)
            x.watcher.disarm()
            await send_bytes(x.send, status, data, up_headers + verity_headers(policy, "inline"),
                             content_type=None)
            return
        raw, acc = await read_all(resp, up)
    completion = acc.completion()
    if acc.error is not None or not is_completion(completion):
        x.watcher.disarm()  # an in-band upstream error: relay it unverified
        await send_bytes(x.send, status, raw, up_headers + verity_headers(policy, "inline"),
                         content_type=None)
        return
    outcome = engine.new_outcome(policy, x, "inline")
    outcome.upstream_status = status
    applied = await _act(engine, proxy, x, policy, completion, outcome)
    headers = _headers(policy, outcome, applied)
    if applied.error is not None:
        await _send_error(x, applied, headers)
    else:
        if applied.modified:
            options = x.payload.get("stream_options")
            include_usage = isinstance(options, dict) and options.get("include_usage") is True
            raw = synthesize(applied.completion or completion, include_usage=include_usage)
        x.watcher.disarm()
        await send_bytes(x.send, status, raw, up_headers + headers, content_type=None)
    _conclude(engine, x, plan, completion, outcome)


# ---- stream: passthrough ------------------------------------------------------------------

async def _passthrough(engine: VerityEngine, proxy: Proxy, x: ChatExchange,
                       plan: Selection) -> None:
    policy = plan.policy
    outcome = engine.new_outcome(policy, x, "inline")
    async with proxy.call_upstream(x, x.body, stream=True) as (resp, up):
        x.status = status = resp.status
        if status >= 400 or not is_sse(resp):
            data = await resp.read()
            up.response(status, None)
            x.watcher.disarm()
            await send_bytes(x.send, status, data,
                             resp.headers + verity_headers(policy, "inline"), content_type=None)
            return
        hold = HoldBack(x)
        await hold.relay(resp, up, resp.headers + verity_headers(policy, "inline",
                                                                 outcome.audit_id))
    outcome.upstream_status = status
    completion = hold.completion()
    if hold.error is not None or hold.acc.error is not None or not is_completion(completion):
        outcome.note = "not verified: the upstream stream failed"
        if hold.error is not None:
            await hold.abort()
        else:
            await hold.finish(action="pass")
        engine.finish(outcome, x.trace)
        return
    applied = await _act(engine, proxy, x, policy, completion, outcome, allow_regenerate=False)
    signal = {"audit_id": outcome.audit_id, "policy": policy.name,
              "verdict": applied.verification.verdict, "action": applied.action,
              "score": applied.verification.score}
    if applied.error is not None:
        await hold.finish(action="block", error_body=applied.error.body())
    elif applied.action == "block":
        text = answer_text(applied.completion or {})
        await hold.finish(action="block", text="\n\n" + text, verity=signal)
    else:
        await hold.finish(action=applied.action, text=applied.appended, verity=signal)
    _conclude(engine, x, plan, completion, outcome)
