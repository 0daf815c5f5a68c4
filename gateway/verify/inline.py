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

An upstream success (status < 400) that cannot be verified — a body that is not a
chat completion (not JSON, invalid UTF-8, trailing bytes, no ``choices``, a choice,
message or content of another shape: ``engine.is_completion``; an SSE answer to
``stream: false``), a stream whose events are not chat completion chunks or one of
whose events cannot be read or is of another shape (``StreamAccumulator.unreadable``)
— never goes out as if verified (:func:`_unverifiable`): with ``on_error: fail_closed`` the client gets a 502
``upstream_error`` (in passthrough, once the body has started: that error as the
last event), with ``fail_open`` the upstream body with ``x-verity-verdict: n/a``;
either way an audit record (``note: "not verified: …"``) and a warning log line.
A JSON chat completion answering a ``stream: true`` request is verified like any
answer and re-sent as a synthesized SSE stream (the SDK reads nothing from a JSON
body on a stream call).

A client that disconnects cancels verification (the proxy's disconnect watcher); the
record says so (``note: "not verified: client disconnected …"``: before the response
was sent, or after how many characters of a passthrough answer;
``VerityEngine._client_gone``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from gateway.asgi import send_bytes, send_error
from gateway.errors import UpstreamError, UpstreamTooLarge, UpstreamTruncated
from gateway.policy.models import RegenerateAction
from gateway.proxy import ChatExchange, _maybe_json
from gateway.sse import StreamAccumulator
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

log = logging.getLogger("gateway.engine")

Headers = list[tuple[bytes, bytes]]

_SSE_CT = (b"content-type", b"text/event-stream; charset=utf-8")
_NOT_COMPLETION = "the upstream body is not a chat completion"  # as shadow's note says
_NOT_CHUNKS = "the upstream stream is not a chat completion stream"


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

async def _verified(engine: VerityEngine, proxy: Proxy, x: ChatExchange, policy: Policy,
                    completion: dict[str, Any], status: int) -> tuple[Outcome, Applied]:
    """A new outcome for an upstream answer (``status``), verified and acted on."""
    outcome = engine.new_outcome(policy, x, "inline")
    outcome.upstream_status = status
    return outcome, await _act(engine, proxy, x, policy, completion, outcome)


async def _act(engine: VerityEngine, proxy: Proxy, x: ChatExchange, policy: Policy,
               completion: dict[str, Any], outcome: Outcome, *,
               allow_regenerate: bool = True) -> Applied:
    budget = Budget.for_policy(policy)
    spec = policy.spec
    outcome.response_id = completion.get("id")  # the delivered answer's, once acted on
    engine.track(x, outcome)  # a client that disconnects from here on gets this record
    calls: list[str | None] = []  # each regenerate call's response id

    async def verify(c: dict[str, Any]) -> Any:
        return await engine.verify(policy, x, c, x.trace, budget)

    async def complete(payload: dict[str, Any]) -> tuple[int, Any, bytes]:
        model = str(payload.get("model") or x.info.model)
        calls.append(None)
        outcome.attempts = len(calls)  # the attempt running, should the client disconnect
        t0 = time.monotonic()
        try:
            target = x if model == x.info.model else dataclasses.replace(
                x, upstream=proxy.route(model))
            status, parsed, raw = await proxy.complete(target, payload)
        finally:  # upstream time is not verification time (budget.total_ms)
            budget.exclude(time.monotonic() - t0)
        calls[-1] = parsed.get("id") if isinstance(parsed, dict) else None
        return status, parsed, raw

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
    delivered = applied.completion or completion
    # The id the client got (a regenerated answer's); each attempt's in attempt_history
    # (entry 0 is the answer first verified, then one per regenerate call).
    outcome.response_id = delivered.get("id")
    if calls and len(applied.history) == len(calls) + 1:
        for entry, rid in zip(applied.history, [completion.get("id"), *calls], strict=True):
            entry["response_id"] = rid
    engine.record_content(policy, outcome, x.trace, x.payload.get("messages") or [],
                          answer_text(delivered))
    return applied


def _headers(policy: Policy, outcome: Outcome, applied: Applied) -> Headers:
    v = applied.verification
    out = verity_headers(policy, "inline", outcome.audit_id)
    out += [
        (b"x-verity-verdict", v.verdict.encode()),
        (b"x-verity-score", (b"n/a" if v.score is None else f"{v.score:.4f}".encode())),
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


def _include_usage(x: ChatExchange) -> bool:
    options = x.payload.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _body_problem(data: bytes, parsed: Any) -> str:
    """Why ``data`` (a 2xx/3xx upstream body) is not a chat completion, for notes and errors."""
    if parsed is not None:
        choices = parsed.get("choices") if isinstance(parsed, dict) else None
        if isinstance(choices, list) and choices:  # is_completion refused their shape
            return ("a choice that is not an object with a message object whose content "
                    "is a string, null or a list of text parts")
        return "JSON without a non-empty 'choices' list"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "not valid UTF-8"
    head = text.lstrip()
    if head.startswith(("data:", "event:", ":")):
        return "a server-sent event stream, not JSON"
    if not head:
        return "empty"
    return "not valid JSON"


def _stream_problem(acc: StreamAccumulator) -> str:
    if acc.unreadable:
        return (f"{acc.unreadable} event(s) not valid JSON or UTF-8, or not chat "
                "completion chunks")
    return "no chat completion chunk with a choice"


def _unverified(engine: VerityEngine, x: ChatExchange, policy: Policy, status: int,
                what: str, why: str, outcome: Outcome | None = None, *,
                refused: str = "answered 502 upstream_error",
                ) -> tuple[Outcome, UpstreamError | None]:
    """The record (and, under ``fail_closed``, the error) for an upstream success the
    policy cannot verify: ``what`` names it, ``why`` says what is wrong with it,
    ``refused`` what the client gets instead under ``fail_closed``. Logs a warning."""
    outcome = outcome or engine.new_outcome(policy, x, "inline")
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


def _unverified_headers(policy: Policy, outcome: Outcome) -> Headers:
    """``fail_open``: the verdict headers of an answer nothing verified."""
    return verity_headers(policy, "inline", outcome.audit_id) + [
        (b"x-verity-verdict", b"n/a"), (b"x-verity-score", b"n/a"),
        (b"x-verity-action", b"pass"), (b"x-verity-layers", b"n/a")]


async def _unverifiable(engine: VerityEngine, x: ChatExchange, policy: Policy, status: int,
                        data: bytes, up_headers: Headers, what: str, why: str) -> None:
    """Nothing sent yet: a 502 (``fail_closed``) or the upstream bytes with verdict
    ``n/a`` (``fail_open``); audited either way."""
    outcome, err = _unverified(engine, x, policy, status, what, why)
    x.watcher.disarm()
    if err is not None:
        x.status = err.status
        await send_error(x.send, err, verity_headers(policy, "inline", outcome.audit_id))
    else:
        await send_bytes(x.send, status, data, up_headers + _unverified_headers(policy, outcome),
                         content_type=None)
    engine.finish(outcome, x.trace)


async def _json_for_stream(engine: VerityEngine, proxy: Proxy, x: ChatExchange,
                           plan: Selection, status: int, data: bytes, parsed: Any,
                           up_headers: Headers) -> None:
    """A ``stream: true`` request the upstream answered with a plain JSON body.

    A chat completion is verified like any answer (whatever ``streaming`` says: nothing
    has been sent, so every action is possible) and re-sent as a synthesized SSE stream,
    which is what a streaming client reads; anything else is unverifiable."""
    policy = plan.policy
    if not is_completion(parsed):
        await _unverifiable(engine, x, policy, status, data, up_headers, _NOT_COMPLETION,
                            _body_problem(data, parsed))
        return
    outcome, applied = await _verified(engine, proxy, x, policy, parsed, status)
    converted = "the upstream answered the stream request with a JSON completion; re-sent as SSE"
    outcome.note = f"{outcome.note}; {converted}" if outcome.note else converted
    headers = _headers(policy, outcome, applied)
    if applied.error is not None:
        await _send_error(x, applied, headers)
    else:
        raw = synthesize(applied.completion or parsed, include_usage=_include_usage(x))
        kept = [h for h in up_headers if h[0] != b"content-type"]
        x.watcher.disarm()
        await send_bytes(x.send, status, raw, kept + headers, content_type=_SSE_CT)
    _conclude(engine, x, plan, parsed, outcome)


def _sent(hold: HoldBack) -> Callable[[], tuple[str, str | None]]:
    """A passthrough stream cut by its client: how much (unverified) answer it was sent."""
    def progress() -> tuple[str, str | None]:
        n = len(answer_text(hold.completion()))
        return f"after {n} characters of the answer were sent", hold.acc.id
    return progress


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
    if status >= 400:
        x.watcher.disarm()
        await send_bytes(x.send, status, data, up_headers + verity_headers(policy, "inline"),
                         content_type=None)
        return
    if not is_completion(parsed):  # an SSE answer to stream: false included
        await _unverifiable(engine, x, policy, status, data, up_headers, _NOT_COMPLETION,
                            _body_problem(data, parsed))
        return
    outcome, applied = await _verified(engine, proxy, x, policy, parsed, status)
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
    acc: StreamAccumulator | None = None
    parsed: Any = None
    async with proxy.call_upstream(x, x.body, stream=True) as (resp, up):
        status, up_headers = resp.status, resp.headers
        x.status = status  # before reading: a cut stream is audited with it
        if status >= 400:
            data = await resp.read()
            up.response(status, None)
            x.watcher.disarm()
            await send_bytes(x.send, status, data, up_headers + verity_headers(policy, "inline"),
                             content_type=None)
            return
        if is_sse(resp):
            raw, acc = await read_all(resp, up)
        else:
            raw = await resp.read()
            parsed = _maybe_json(raw)
            up.response(status, parsed if isinstance(parsed, dict) else None)
    if acc is None:
        await _json_for_stream(engine, proxy, x, plan, status, raw, parsed, up_headers)
        return
    completion = acc.completion()
    if acc.error is not None:
        x.watcher.disarm()  # an in-band upstream error: relay it unverified
        await send_bytes(x.send, status, raw, up_headers + verity_headers(policy, "inline"),
                         content_type=None)
        return
    if acc.unreadable or not is_completion(completion):
        await _unverifiable(engine, x, policy, status, raw, up_headers, _NOT_CHUNKS,
                            _stream_problem(acc))
        return
    outcome, applied = await _verified(engine, proxy, x, policy, completion, status)
    headers = _headers(policy, outcome, applied)
    if applied.error is not None:
        await _send_error(x, applied, headers)
    else:
        if applied.modified:
            raw = synthesize(applied.completion or completion, include_usage=_include_usage(x))
        x.watcher.disarm()
        await send_bytes(x.send, status, raw, up_headers + headers, content_type=None)
    _conclude(engine, x, plan, completion, outcome)


# ---- stream: passthrough ------------------------------------------------------------------

async def _passthrough(engine: VerityEngine, proxy: Proxy, x: ChatExchange,
                       plan: Selection) -> None:
    policy = plan.policy
    outcome = engine.new_outcome(policy, x, "inline")
    hold: HoldBack | None = None
    data, parsed = b"", None
    async with proxy.call_upstream(x, x.body, stream=True) as (resp, up):
        x.status = status = resp.status
        up_headers = resp.headers
        if status < 400 and is_sse(resp):
            hold = HoldBack(x)
            engine.track(x, outcome, _sent(hold))
            await hold.relay(resp, up, up_headers + verity_headers(policy, "inline",
                                                                   outcome.audit_id))
        else:
            data = await resp.read()
            parsed = _maybe_json(data) if status < 400 else None
            up.response(status, parsed if isinstance(parsed, dict) else None)
    if hold is None:
        if status < 400:  # a JSON answer: nothing relayed yet, verified whole like buffer
            await _json_for_stream(engine, proxy, x, plan, status, data, parsed, up_headers)
            return
        x.watcher.disarm()
        await send_bytes(x.send, status, data, up_headers + verity_headers(policy, "inline"),
                         content_type=None)
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
    if hold.acc.unreadable or not is_completion(completion):
        # The held tail starts at the first unreadable event: fail_closed drops it and
        # ends with an error event (the SDK raises), fail_open sends it as it came.
        _, err = _unverified(engine, x, policy, status, _NOT_CHUNKS, _stream_problem(hold.acc),
                             outcome, refused="the stream ended with an upstream_error event")
        if err is not None:
            await hold.finish(action="block", error_body=err.body())
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
