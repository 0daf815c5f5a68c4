"""Actions: what the gateway does with an answer, given its verdict band — a registry.

Per band the policy names one action (``actions.pass|marginal|fail``), looked up
by its ``type`` in :data:`ACTIONS` (applied to the answer at hand) or
:data:`UPSTREAM_ACTIONS` (they call the upstream again):

- ``pass`` — deliver unchanged.
- ``flag`` — deliver unchanged; the verdict travels only in ``x-verity-*`` headers.
- ``disclaimer`` — append the formatted template to the answer (chat: choice 0's
  content; Responses: the last ``output_text`` part).
- ``block`` — ``style: completion``: the front door's refusal (chat: a
  ``chat.completion`` whose only choice carries the formatted ``message`` with
  ``finish_reason: "content_filter"``; Responses: a ``refusal`` part; same id, model,
  created and usage); ``style: error``: :class:`VerificationBlocked` with the
  configured status and an OpenAI error body.
- ``regenerate`` — re-ask upstream (non-streaming) with the original conversation,
  the failed answer as an assistant message and a user message with repair feedback
  (the request's shape: :meth:`~gateway.wire.base.ResponseFormat.regenerate_body`)
  (seed 001's :func:`~gateway.scoring.binding.repair_feedback` over the failed
  claims, or the policy's ``feedback_template``); each attempt runs inside
  ``trace.attempt(n)`` and is re-verified. The first attempt whose band's action is
  not ``regenerate`` is accepted (and that action — pass, flag, disclaimer, block —
  is applied to it). After ``max_attempts`` failures ``fallback_model`` is tried
  once if set, then ``fallback`` is applied to the last answer received. No attempt
  starts once the verification time budget is spent (``fallback`` then, too); the
  attempts' upstream calls do not count against that budget.

- ``request-sources`` / ``decompose-and-retry`` — seed 000's claim-level mitigations
  (:mod:`gateway.verify.mitigations`): regenerate's loop with feedback naming the
  sources to cite; each failed claim re-asked alone and the answer assembled from
  what verifies.

Templates fill ``{reasons}``, ``{score}``, ``{verdict}``, ``{policy}`` and
``{failed_claims}`` (``gateway.policy.models.TEMPLATE_PLACEHOLDERS``, which the
policy loader checks templates against: another ``{word}`` is a load error); other
braces are left as written.

**What a template can show the client.** ``{reasons}`` is built from the layers'
explanations, which name what failed (rules, counts, scores) and never quote the
answer — the ``keyword`` layer names the rule that matched, not the text, so a
block message never echoes what it blocked. ``{failed_claims}`` *is* answer text
(the sentences a layer could not support; the keyword layer contributes none):
the operator who writes it into a ``block`` message chooses to show them. In
client-facing text (disclaimer, block message) both pass the default redaction
hook (API keys, bearer tokens, e-mail addresses). The regenerate feedback goes
to the upstream, not the client: it carries the failed claims as they are — the
model's own answer, sent back to it for repair.

**Usage after regenerate**: the delivered ``usage`` is the final answer's own usage,
as upstream reported it — not the sum over attempts (the audit record's
``attempt_history`` lists every attempt, and upstream bills each one).

Adding an action
----------------
1. Its policy model in ``gateway/policy/models.py``: a strict model with a
   ``type: Literal["my-action"]`` field, added to the ``Action`` union (the loader
   then validates it, and templates against :data:`TEMPLATE_PLACEHOLDERS`).
2. Its handler here, registered under that ``type``: in :data:`ACTIONS` when it
   rewrites the answer at hand (``(action, completion, verification, policy name,
   response format) -> Applied``; body shapes come from the
   :class:`~gateway.wire.base.ResponseFormat`, never built here), or in
   :data:`UPSTREAM_ACTIONS` when it needs the upstream again (``async (action,
   completion, verification, RegenContext) -> Applied``; such an action has a
   ``fallback`` — a static action — applied where it cannot run: once a passthrough
   stream has delivered the answer).
3. Tests in ``tests/verify/test_actions.py``; the inline modes need no change.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gateway.errors import GatewayError, VerificationBlocked
from gateway.policy.models import (
    TEMPLATE_PLACEHOLDERS,
    ActionSet,
    BlockAction,
    DecomposeAndRetryAction,
    DisclaimerAction,
    FlagAction,
    PassAction,
    RegenerateAction,
    RequestSourcesAction,
)
from gateway.redact import Redactor, redact_secrets
from gateway.scoring.binding import repair_feedback
from gateway.verify.mitigations import decompose_and_retry, request_sources_feedback
from gateway.verify.outcome import Verification
from gateway.wire.base import ResponseFormat
from gateway.wire.chat import CHAT_COMPLETIONS

__all__ = ["ACTIONS", "UPSTREAM_ACTIONS", "Applied", "RegenContext", "apply_action",
           "apply_static", "band_action", "feedback_message", "fill_template",
           "needs_upstream", "without_disclaimer"]

StaticAction = PassAction | FlagAction | DisclaimerAction | BlockAction
AnyAction = StaticAction | RegenerateAction | RequestSourcesAction | DecomposeAndRetryAction
CompleteFn = Callable[[dict[str, Any]], Awaitable[tuple[int, Any, bytes]]]
VerifyFn = Callable[[dict[str, Any]], Awaitable[Verification]]
StaticApply = Callable[[Any, dict[str, Any], Verification, str, ResponseFormat], "Applied"]
"""An action applied to the answer at hand: (action, completion, verification,
policy name, response format) -> what to deliver."""
UpstreamApply = Callable[[Any, dict[str, Any], Verification, "RegenContext"],
                         Awaitable["Applied"]]
"""An action that calls the upstream again (through ``RegenContext.complete``)."""

_PLACEHOLDER = re.compile(r"\{(" + "|".join(TEMPLATE_PLACEHOLDERS) + r")\}")


@dataclass(slots=True)
class Applied:
    """The result of applying a band's action to a completion."""

    action: str
    """``pass`` | ``flag`` | ``disclaimer`` | ``block`` | ``regenerate`` (a regenerated
    answer is delivered). After failed regeneration: the fallback's type."""
    completion: dict[str, Any] | None
    """What to deliver; ``None`` when blocked with ``style: error``."""
    verification: Verification
    """The delivered answer's verification (the last attempt's after regenerate)."""
    error: VerificationBlocked | None = None
    appended: str | None = None
    """The disclaimer text appended to the answer, if any."""
    message: str | None = None
    """The block message, when blocked (whatever the format made of it)."""
    modified: bool = False
    """True when ``completion`` is not the upstream answer as received."""
    attempts: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None


@dataclass(slots=True)
class RegenContext:
    """What ``regenerate`` needs from the engine (kept abstract for unit tests)."""

    policy: str
    messages: Sequence[Mapping[str, Any]]
    payload: Mapping[str, Any]
    """The client's request body; attempts reuse it (``stream`` removed)."""
    actions: ActionSet
    complete: CompleteFn
    """Non-streaming upstream call: payload -> (status, parsed JSON, raw bytes)."""
    verify: VerifyFn
    """Re-verify a completion dict."""
    attempt: Callable[[int], AbstractContextManager[None]]
    time_left: Callable[[], float] | None = None
    """Milliseconds of verification budget left; no attempt starts at 0 or below
    (its answer could not be verified: ``fail_open`` would deliver it unchecked)."""
    fmt: ResponseFormat = CHAT_COMPLETIONS
    """How answers of the request's front door are read and rewritten."""

    async def answer(self, payload: dict[str, Any], entry: dict[str, Any]) -> Any:
        """One attempt's upstream call: its answer, or None when it failed (``entry``,
        the attempt's history entry, gets the ``status`` and, on failure, the
        ``error``: the exception, or the status of a reply that is not an answer)."""
        try:
            status, parsed, _raw = await self.complete(payload)
        except GatewayError as err:
            entry["error"] = f"{type(err).__name__}: {err.message}"
            return None
        entry["status"] = status
        if status >= 400 or not self.fmt.is_answer(parsed):
            entry["error"] = f"upstream answered {status}"
            return None
        return parsed


def band_action(actions: ActionSet, band: str) -> AnyAction:
    action: AnyAction = actions.pass_ if band == "pass" else getattr(actions, band)
    return action


def without_disclaimer(actions: ActionSet) -> ActionSet:
    """``actions`` with every ``disclaimer`` (a band's, or an upstream action's
    ``fallback``) a ``flag``: for answers text must not be appended to (structured
    output: the client parses the answer as JSON)."""
    flag = FlagAction()

    def swap(action: AnyAction) -> AnyAction:
        if isinstance(action, DisclaimerAction):
            return flag
        if needs_upstream(action) and isinstance(getattr(action, "fallback", None),
                                                  DisclaimerAction):
            return action.model_copy(update={"fallback": flag})
        return action

    return actions.model_copy(update={"pass_": swap(actions.pass_),
                                      "marginal": swap(actions.marginal),
                                      "fail": swap(actions.fail)})


def _as_is(text: str) -> str:
    return text


def fill_template(template: str, v: Verification, policy: str,
                  redact: Redactor = redact_secrets) -> str:
    """``template`` with its placeholders filled; ``{reasons}`` and ``{failed_claims}``
    pass ``redact`` (the default hook: the text goes to the client)."""
    values = {
        "reasons": redact("; ".join(v.reasons)) or v.verdict,
        "score": "n/a" if v.score is None else f"{v.score:.4f}",  # as x-verity-score
        "verdict": v.verdict,
        "policy": policy,
        "failed_claims": redact("; ".join(v.failed_claims)) or "none",
    }
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def feedback_message(action: RegenerateAction, v: Verification, policy: str) -> str:
    """The repair message sent as the user turn of a regenerate attempt."""
    if action.feedback_template is not None:  # to the upstream: the claims as they are
        return fill_template(action.feedback_template, v, policy, _as_is)
    text = repair_feedback(v.failed_claims)
    if text:
        return text
    return ("Your previous answer failed verification (" + ("; ".join(v.reasons) or v.verdict)
            + "). Rewrite the answer so that it addresses these problems. Do not add new "
            "unsourced facts; if something cannot be supported, say so.")


def _deliver(action: PassAction | FlagAction, completion: dict[str, Any], v: Verification,
             policy: str, fmt: ResponseFormat) -> Applied:
    """``pass`` / ``flag``: the answer as it is (flag: the verdict in the headers)."""
    return Applied(action.type, completion, v)


def _disclaimer(action: DisclaimerAction, completion: dict[str, Any], v: Verification,
                policy: str, fmt: ResponseFormat) -> Applied:
    text = fill_template(action.template, v, policy)
    return Applied("disclaimer", fmt.with_disclaimer(completion, text), v, appended=text,
                   modified=True)


def _block(action: BlockAction, completion: dict[str, Any], v: Verification, policy: str,
           fmt: ResponseFormat) -> Applied:
    message = fill_template(action.message, v, policy)
    if action.style == "error":
        err = VerificationBlocked(message, status=action.status)
        return Applied("block", None, v, error=err, modified=True, message=message)
    return Applied("block", fmt.refusal(completion, message), v, modified=True,
                   message=message)


def apply_static(action: StaticAction, completion: dict[str, Any], v: Verification,
                 policy: str, fmt: ResponseFormat = CHAT_COMPLETIONS) -> Applied:
    """Apply an action of :data:`ACTIONS` (no upstream call)."""
    return ACTIONS[action.type](action, completion, v, policy, fmt)


def needs_upstream(action: AnyAction) -> bool:
    """Whether ``action`` calls the upstream again (:data:`UPSTREAM_ACTIONS`)."""
    return action.type in UPSTREAM_ACTIONS


async def apply_action(action: AnyAction, completion: dict[str, Any], v: Verification,
                       ctx: RegenContext) -> Applied:
    """Apply the band's action; one of :data:`UPSTREAM_ACTIONS` (``regenerate``) calls
    the upstream through ``ctx``."""
    run = UPSTREAM_ACTIONS.get(action.type)
    if run is not None:
        return await run(action, completion, v, ctx)
    return apply_static(action, completion, v, ctx.policy, ctx.fmt)  # type: ignore[arg-type]


async def _regenerate(action: RegenerateAction, completion: dict[str, Any], v: Verification,
                      ctx: RegenContext) -> Applied:
    return await _retry(action, completion, v, ctx,
                        lambda cur_v: feedback_message(action, cur_v, ctx.policy),
                        action.fallback_model)


async def _request_sources(action: RequestSourcesAction, completion: dict[str, Any],
                           v: Verification, ctx: RegenContext) -> Applied:
    sources = list(v.sources)
    if not sources and action.feedback_template is None:
        applied = apply_static(action.fallback, completion, v, ctx.policy, ctx.fmt)
        applied.history = [{"attempt": 0, "verdict": v.verdict, "score": v.score,
                            "failed_claims": list(v.failed_claims), **v.judge_usage()}]
        applied.note = (f"request-sources: the request offers no source to cite; "
                        f"fallback {action.fallback.type}")
        return applied
    return await _retry(action, completion, v, ctx,
                        lambda cur_v: request_sources_feedback(action, cur_v, ctx.policy,
                                                               sources), None)


async def _retry(action: RegenerateAction | RequestSourcesAction, completion: dict[str, Any],
                 v: Verification, ctx: RegenContext,
                 feedback_for: Callable[[Verification], str],
                 fallback_model: str | None) -> Applied:
    """The attempt loop of ``regenerate`` and ``request-sources`` (module docstring)."""
    current, cur_v = completion, v
    history: list[dict[str, Any]] = [{"attempt": 0, "verdict": v.verdict,
                                      "score": v.score, "failed_claims": list(v.failed_claims),
                                      **v.judge_usage()}]
    plan: list[str | None] = [None] * action.max_attempts
    if fallback_model:
        plan.append(fallback_model)
    made = 0
    stopped = False
    for n, model in enumerate(plan, 1):
        if ctx.time_left is not None and ctx.time_left() <= 0:
            stopped = True
            break
        feedback = feedback_for(cur_v)
        payload = ctx.fmt.regenerate_body(ctx.payload, list(ctx.messages),
                                          ctx.fmt.answer_text(current), feedback, model)
        entry: dict[str, Any] = {"attempt": n, "model": payload.get("model")}
        history.append(entry)
        with ctx.attempt(n):
            made = n
            parsed = await ctx.answer(payload, entry)
            if parsed is None:
                continue
            new_v = await ctx.verify(parsed)
        entry.update(verdict=new_v.verdict, score=new_v.score,
                     failed_claims=list(new_v.failed_claims), **new_v.judge_usage())
        current, cur_v = parsed, new_v
        next_action = band_action(ctx.actions, new_v.verdict)
        if not needs_upstream(next_action):
            applied = apply_static(next_action, parsed, new_v, ctx.policy,  # type: ignore[arg-type]
                                   ctx.fmt)
            entry["action"] = next_action.type
            if applied.error is None and next_action.type != "block":
                applied.action = action.type
            applied.modified, applied.attempts, applied.history = True, made, history
            return applied
    applied = apply_static(action.fallback, current, cur_v, ctx.policy, ctx.fmt)
    applied.modified = applied.modified or current is not completion
    applied.attempts, applied.history = made, history
    applied.note = f"{action.type} failed after {made} attempt(s); fallback {action.fallback.type}"
    if stopped:
        applied.note = (f"{action.type} stopped after {made} attempt(s): the verification "
                        f"time budget is spent; fallback {action.fallback.type}")
    return applied


ACTIONS: Mapping[str, StaticApply] = MappingProxyType({
    "pass": _deliver,
    "flag": _deliver,
    "disclaimer": _disclaimer,
    "block": _block,
})
"""Actions applied to the answer at hand, by policy ``type``."""

UPSTREAM_ACTIONS: Mapping[str, UpstreamApply] = MappingProxyType({
    "regenerate": _regenerate,
    "request-sources": _request_sources,
    "decompose-and-retry": decompose_and_retry,
})
"""Actions that call the upstream again, by policy ``type``; each has a ``fallback``."""
