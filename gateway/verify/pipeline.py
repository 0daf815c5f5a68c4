"""The verification pipeline: risk → layers (concurrent, timed) → calibration → decision.

For one answer and one policy (:func:`run_pipeline`):

1. **Risk level** — the policy's fixed ``risk.level``, or ``assess``: the seed 000
   model-free assessor (:func:`gateway.verify.risk.assess_risk`) on the answer.
2. **Layers** — the level's profile (``risk.profiles.<level>.layers``), else every
   layer of the policy. They run **concurrently**, each inside ``trace.layer(key)``
   and under ``min(timeout_ms, remaining budget.total_ms, profile max_latency_ms)``.
   Past ``budget.max_cost`` or the level profile's ``max_cost`` (judge USD already
   spent by this request, failed layers' calls included) layers are not run: an
   error outcome (``cost budget exhausted``), like an exhausted time budget.
   When every selected layer is ``cpu_only`` (``gateway.layers.base``)
   they run one after the other in the calling task instead — no task and no
   ``asyncio.timeout`` per layer, which could not interrupt synchronous work
   anyway (concurrent tasks of such layers run one after the other too). The
   budget is still checked before each layer and each layer's latency recorded.
3. **Errors** — a layer that raises, times out, is :class:`LayerUnavailable` or
   finds no time left in the budget gets an error outcome. ``on_error: fail_open``
   leaves it out of the decision (counted as ``fail_open``); ``fail_closed`` makes
   the verdict ``fail`` (counted as ``fail_closed``). The error names the failure
   and never quotes model text (``gateway.redact``); the judge calls the
   layer made before it failed are still counted (:func:`~gateway.layers.base.metered`),
   with their cost, which the budget sees.
4. **Calibration** — Platt scaling with the layer spec's ``calibration``; without
   one, the seed defaults for the seed's layer names, identity otherwise.
   With a :class:`~gateway.verify.scope.JobScope` (one job's policy and its
   candidates), a ``cpu_only`` layer configured as one that already ran on the same
   context and answer takes that result (``cache_hit``) instead of running again.
5. **Decision** (:func:`decide`) — seed 000 ``all_passed``: pass when every counted
   layer passed and the weighted mean ≥ ``min_confidence`` (the decision's, else the
   policy's profile for the level, else seed 000's profile); else ``marginal`` when
   the mean ≥ ``marginal_at``; else ``fail``. ``mean``: bands from the mean alone.
   Layers reporting a seed 002 credit score map through ``decision.zones``; the
   worse band wins. Skipped layers (``result.skipped``) and report-only layers
   (``weight: 0``) are not counted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gateway.layers.base import (
    JudgeError,
    JudgeUsage,
    Layer,
    LayerResult,
    LayerUnavailable,
    VerifyInput,
    metered,
    uncache_on_error,
)
from gateway.policy.models import Calibration, DecisionSpec
from gateway.policy.profiles import RISK_PROFILES
from gateway.redact import exception_summary
from gateway.scoring.credit import zone
from gateway.telemetry import RequestTrace, Telemetry
from gateway.verify.calibration import Calibrator, PlattParams, platt
from gateway.verify.outcome import BAND_ORDER, Band, LayerOutcome, Verification
from gateway.verify.risk import assess_risk

if TYPE_CHECKING:
    from gateway.policy.loader import Policy, ResolvedLayer
    from gateway.verify.scope import JobScope

__all__ = ["Budget", "LayerFactory", "PlanCache", "decide", "run_pipeline", "select_layers"]

LayerFactory = Callable[["ResolvedLayer"], Layer]
"""Returns the (cached) layer instance for a resolved layer of a policy."""

_CALIBRATOR = Calibrator()


@dataclass(slots=True)
class Budget:
    """One request's verification budget, shared by every attempt (regenerate)."""

    total_ms: float
    max_cost: float | None = None
    spent_cost: float = 0.0
    _t0: float = field(default_factory=time.monotonic)

    @classmethod
    def for_policy(cls, policy: Policy) -> Budget:
        b = policy.spec.budget
        return cls(total_ms=float(b.total_ms), max_cost=b.max_cost)

    def remaining_ms(self) -> float:
        return self.total_ms - (time.monotonic() - self._t0) * 1000

    def exclude(self, seconds: float) -> None:
        """Give back ``seconds`` spent on something other than verification (the
        upstream call of a regenerate attempt)."""
        self._t0 += seconds

    def cost_exhausted(self) -> bool:
        return self.max_cost is not None and self.spent_cost >= self.max_cost


def select_layers(policy: Policy, level: str) -> tuple[ResolvedLayer, ...]:
    """The layers the risk level's profile runs (every layer when there is no profile)."""
    profile = policy.spec.risk.profiles.get(level)  # type: ignore[call-overload]
    if profile is None:
        return tuple(policy.layers)
    wanted = set(profile.layers)
    return tuple(rl for rl in policy.layers if rl.key in wanted)


def min_confidence_for(policy: Policy, level: str) -> float:
    spec = policy.spec
    if spec.decision.min_confidence is not None:
        return spec.decision.min_confidence
    profile = spec.risk.profiles.get(level)  # type: ignore[call-overload]
    if profile is not None:
        return float(profile.min_confidence)
    return RISK_PROFILES[level].min_confidence


@dataclass(frozen=True, slots=True)
class _LevelPlan:
    """What a policy runs at one risk level (see :class:`PlanCache`)."""

    layers: tuple[ResolvedLayer, ...]
    cap_ms: float | None
    max_cost: float | None
    """The profile's ``max_cost`` (judge USD) for this level, if any."""
    min_confidence: float
    inline: bool
    """Every layer is ``cpu_only``: run them in the calling task, untimed."""


def _plan(policy: Policy, level: str) -> _LevelPlan:
    profile = policy.spec.risk.profiles.get(level)  # type: ignore[call-overload]
    layers = select_layers(policy, level)
    return _LevelPlan(
        layers=layers,
        cap_ms=float(profile.max_latency_ms) if profile and profile.max_latency_ms else None,
        max_cost=profile.max_cost if profile else None,
        min_confidence=min_confidence_for(policy, level),
        inline=all(getattr(rl.cls, "cpu_only", False) is True for rl in layers))


class PlanCache:
    """What each policy version runs at each risk level, computed once (one per
    verification runtime; :meth:`keep` drops the versions no longer live)."""

    MAX_POLICIES = 256

    def __init__(self) -> None:
        self._plans: dict[tuple[str, str], dict[str, _LevelPlan]] = {}

    def plan(self, policy: Policy, level: str) -> _LevelPlan:
        key = (policy.name, policy.version)
        levels = self._plans.get(key)
        if levels is None:
            if len(self._plans) >= self.MAX_POLICIES:  # stay bounded whatever happens
                self._plans.clear()
            levels = self._plans[key] = {}
        plan = levels.get(level)
        if plan is None:
            plan = levels[level] = _plan(policy, level)
        return plan

    def keep(self, live: set[tuple[str, str]]) -> None:
        """Forget the plans of every (name, version) not in ``live``."""
        for key in [k for k in self._plans if k not in live]:
            del self._plans[key]


async def run_pipeline(policy: Policy, inp: VerifyInput, *, layer_for: LayerFactory,
                       trace: RequestTrace, telemetry: Telemetry,
                       budget: Budget | None = None,
                       plans: PlanCache | None = None,
                       scope: JobScope | None = None) -> Verification:
    """Verify ``inp.response_text`` with ``policy``; see the module docstring.

    ``plans`` keeps what each policy runs per risk level (the runtime's); without it
    the plan is worked out for this call. ``scope``: the job's shared work (model-free
    layer results reused across its policies)."""
    spec = policy.spec
    budget = budget or Budget.for_policy(policy)
    level = spec.risk.level if spec.risk.level != "assess" else assess_risk(inp.response_text)
    plan = plans.plan(policy, level) if plans is not None else _plan(policy, level)
    cap_ms, max_cost = plan.cap_ms, plan.max_cost
    if plan.inline:
        outcomes = [await _run_layer(rl, inp, layer_for, trace, budget, cap_ms, max_cost,
                                     timed=False, scope=scope)
                    for rl in plan.layers]
    else:
        outcomes = list(await asyncio.gather(*(
            _run_layer(rl, inp, layer_for, trace, budget, cap_ms, max_cost, scope=scope)
            for rl in plan.layers)))
    budget.spent_cost += sum(o.cost for o in outcomes)
    errors = [o for o in outcomes if o.error is not None]
    if errors:
        name = "fail_closed" if spec.on_error == "fail_closed" else "fail_open"
        for o in errors:
            telemetry.count(name, 1, {"policy": policy.name, "layer": o.key})
    min_conf = plan.min_confidence
    verdict, score, reasons = decide(outcomes, decision=spec.decision, min_confidence=min_conf,
                                     fail_closed=spec.on_error == "fail_closed")
    claims: list[str] = []
    for o in outcomes:
        if o.counted and not o.passed:
            claims.extend(c for c in o.failed_claims if c not in claims)
    return Verification(
        risk_level=level, layers=outcomes, verdict=verdict, score=score,
        min_confidence=min_conf, reasons=reasons, failed_claims=claims, errors=len(errors),
        fail_closed=bool(errors) and spec.on_error == "fail_closed")


def decide(outcomes: Sequence[LayerOutcome], *, decision: DecisionSpec, min_confidence: float,
           fail_closed: bool = False) -> tuple[Band, float | None, list[str]]:
    """(band, weighted mean score, reasons) for the layer outcomes; pure."""
    counted = [o for o in outcomes if o.counted]
    reasons = [f"{o.key}: {o.explanation or o.label or 'failed'}"
               for o in counted if not o.passed]
    score: float | None = None
    band: Band = "pass"
    if counted:  # every counted outcome has weight > 0
        total_w = sum(o.weight for o in counted)
        score = sum((o.score or 0.0) * o.weight for o in counted) / total_w
        ok = score >= min_confidence
        if decision.combine == "all_passed":
            ok = ok and all(o.passed for o in counted)
        if ok:  # noqa: SIM108 (the ternary would nest: three bands read better as blocks)
            band = "pass"
        else:
            band = "marginal" if score >= decision.marginal_at else "fail"
        if score < min_confidence and not reasons:
            reasons.append(f"confidence {score:.2f} below {min_confidence:.2f}")
    for o in counted:
        if o.credit_score is None:
            continue
        z = zone(o.credit_score)
        zb: Band = decision.zones.get(z, "pass")
        if BAND_ORDER[zb] > BAND_ORDER[band]:
            band = zb
        if zb != "pass":
            reasons.append(f"{o.key}: credit score {o.credit_score} ({z})")
    if fail_closed:
        errored = [o for o in outcomes if o.error is not None]
        if errored:
            band = "fail"
            reasons.extend(f"{o.key}: error ({o.error})" for o in errored)
    return band, score, reasons


async def _run_layer(rl: ResolvedLayer, inp: VerifyInput, layer_for: LayerFactory,
                     trace: RequestTrace, budget: Budget, cap_ms: float | None,
                     max_cost: float | None = None, *, timed: bool = True,
                     scope: JobScope | None = None) -> LayerOutcome:
    spec = rl.spec
    cpu_only = getattr(rl.cls, "cpu_only", False) is True
    if scope is not None and not cpu_only:
        scope = None  # only model-free results are shared
    out = LayerOutcome(key=rl.key, name=rl.name, weight=spec.weight)
    with trace.layer(rl.key) as span:
        t0 = time.perf_counter()
        usage: JudgeUsage | None = None
        timeout_ms = min(float(spec.timeout_ms), budget.remaining_ms())
        if cap_ms is not None:
            timeout_ms = min(timeout_ms, cap_ms)
        try:
            if budget.cost_exhausted() or (max_cost is not None
                                           and budget.spent_cost >= max_cost):
                # Not verified, like an exhausted time budget: on_error decides. (A skip
                # would pass a fail_closed policy's regenerate attempt unverified.)
                out.error, out.error_type = "cost budget exhausted", "budget"
            elif timeout_ms <= 0:
                out.error, out.error_type = "time budget exhausted", "timeout"
            elif scope is not None and (shared := scope.result(
                    rl.cls, rl.config, inp.context, inp.response_text)) is not None:
                _fill(out, shared, spec.calibration)
                out.cache_hit = True
            else:
                layer = layer_for(rl)
                if cpu_only and not timed:
                    # Model-free and never awaiting: no judge call to meter or uncache
                    # (the outcome's judge fields keep their zeros), no timeout to set.
                    result = await layer.verify(inp)
                else:
                    # A reply that broke the layer is not kept; the calls it made are
                    # counted.
                    with uncache_on_error(), metered(_allowance(budget, max_cost)) as usage:
                        if timed:
                            async with asyncio.timeout(timeout_ms / 1000):
                                result = await layer.verify(inp)
                        else:
                            result = await layer.verify(inp)
                _fill(out, result, spec.calibration)
                if scope is not None:
                    scope.keep(rl.cls, rl.config, inp.context, inp.response_text, result)
        except TimeoutError:
            out.error, out.error_type = f"timeout after {timeout_ms:.0f} ms", "timeout"
        except LayerUnavailable as exc:  # its message is the gateway's own (NO_JUDGE)
            out.error, out.error_type = f"unavailable: {exc}", "unavailable"
        except JudgeError as exc:  # named failures, never the reply itself (see JudgeError)
            out.error, out.error_type = f"JudgeError: {exc}", "JudgeError"
        except Exception as exc:  # a broken layer is an outcome, not a crash
            # Not ours: the message may quote its input (float('<the answer>')).
            out.error, out.error_type = exception_summary(exc), type(exc).__name__
        if usage is not None:
            out.judge_input_tokens, out.judge_output_tokens = (usage.input_tokens,
                                                               usage.output_tokens)
            if out.error is not None:  # the layer's own accounting never came back
                out.judge_calls, out.cost = usage.calls, usage.cost
        out.latency_ms = (time.perf_counter() - t0) * 1000
        if span.recording:  # the no-op span: skip building the dict
            span.result(out.to_dict())
    return out


def _allowance(budget: Budget, max_cost: float | None) -> float | None:
    """Judge USD a layer starting now may spend (None: no cost budget)."""
    caps = [c for c in (budget.max_cost, max_cost) if c is not None]
    return min(caps) - budget.spent_cost if caps else None


def _fill(out: LayerOutcome, result: LayerResult, calibration: Calibration | None) -> None:
    raw = float(result.score)
    out.raw_score = raw
    if calibration is not None:
        out.score = platt(raw, PlattParams(calibration.a, calibration.b))
    else:
        out.score = _CALIBRATOR.calibrate(out.name, raw)
    out.passed = bool(result.passed)
    out.label = result.label
    out.explanation = result.explanation
    out.cache_hit = result.cache_hit
    out.judge_calls = result.judge_calls
    out.cost = result.cost
    out.failed_claims = list(result.failed_claims)
    out.skipped = result.skipped
    out.credit_score = result.credit_score
