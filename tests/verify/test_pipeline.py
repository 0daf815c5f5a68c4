"""The pipeline: risk → layers (concurrent, timed) → calibration → decision."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import pytest
from modes import support

from gateway.sources.context import GroundingContext
from gateway.policy.loader import ResolvedLayer, load_policy_text
from gateway.policy.models import DecisionSpec
from gateway.telemetry import LayerSpan, RequestTrace
from gateway.layers.registry import LayerRegistry
from gateway.layers.base import Layer, LayerResources, LayerResult, LayerUnavailable, VerifyInput
from gateway.verify.outcome import LayerOutcome, Verification
from gateway.verify.pipeline import Budget, decide, run_pipeline


LAYERS: LayerRegistry = support.REGISTRY.with_layers({
    name: f"{__name__}:{attr}" for name, attr in (
        ("barrier", "BarrierLayer"), ("unavailable", "UnavailableLayer"), ("cpu", "CpuLayer"),
        ("picky", "PickyJudgedLayer"))})
"""The engine tests' layers and this module's."""


class BarrierLayer(support.SleepLayer):
    """Passes only once two barrier layers are running at the same time."""

    name = "barrier"
    started: asyncio.Event | None = None
    count = 0

    async def verify(self, inp: VerifyInput) -> Any:
        cls = BarrierLayer
        cls.count += 1
        assert cls.started is not None
        if cls.count == 2:
            cls.started.set()
        await asyncio.wait_for(cls.started.wait(), 5)  # deadlock guard only
        return await super().verify(inp)


class UnavailableLayer(support.SkipLayer):
    name = "unavailable"

    async def verify(self, inp: VerifyInput) -> Any:
        raise LayerUnavailable("no judge configured")


class RecordingTrace(RequestTrace):
    def __init__(self) -> None:
        self.layers: list[tuple[str, dict[str, Any]]] = []

    @contextmanager
    def layer(self, name: str) -> Iterator[LayerSpan]:
        trace = self

        class Span(LayerSpan):
            recording = True

            def result(self, outcome: Mapping[str, Any]) -> None:
                trace.layers.append((name, dict(outcome)))
        yield Span()


def _factory(rl: ResolvedLayer) -> Layer:
    return rl.cls(rl.config, LayerResources())  # type: ignore[call-arg]


def verify(policy_yaml: str, answer: str = "A short answer.",
           telemetry: support.RecordingTelemetry | None = None,
           trace: RequestTrace | None = None, budget: Budget | None = None) -> Verification:
    policy = load_policy_text(policy_yaml, name="p", layers=LAYERS)
    inp = VerifyInput(messages=[{"role": "user", "content": "q"}], response_text=answer,
                      context=GroundingContext())
    return asyncio.run(run_pipeline(policy, inp, layer_for=_factory,
                                    trace=trace or RequestTrace(),
                                    telemetry=telemetry or support.RecordingTelemetry(),
                                    budget=budget))


def test_layers_run_concurrently() -> None:
    BarrierLayer.started, BarrierLayer.count = None, 0

    async def go() -> Verification:
        BarrierLayer.started = asyncio.Event()
        policy = load_policy_text("""
layers: [{name: barrier, id: a}, {name: barrier, id: b}]
""", name="p", layers=LAYERS)
        inp = VerifyInput(messages=[], response_text="x", context=GroundingContext())
        return await run_pipeline(policy, inp, layer_for=_factory, trace=RequestTrace(),
                                  telemetry=support.RecordingTelemetry())

    v = asyncio.run(go())
    assert [o.key for o in v.layers] == ["a", "b"] and all(o.passed for o in v.layers)


def test_each_layer_runs_inside_its_span_with_its_outcome() -> None:
    trace = RecordingTrace()
    verify("layers: [{name: keyword, config: {block: [zzz]}}, {name: length}]", trace=trace)
    assert sorted(name for name, _ in trace.layers) == ["keyword", "length"]
    outcome = dict(trace.layers)["keyword"]
    assert outcome["name"] == "keyword" and outcome["score"] == 1.0 and outcome["passed"]
    assert outcome["latency_ms"] >= 0 and outcome["error"] is None


# A layer's own exception is recorded by type and origin, never by its message (which
# may quote model text: float('<the answer>')); "kaboom" is not in the record.
BOOM = (f"RuntimeError raised at support.py:"
        f"{inspect.getsourcelines(support.BoomLayer.verify)[1] + 1}")


@pytest.mark.parametrize("on_error", ["fail_open", "fail_closed"])
@pytest.mark.parametrize("layer,error", [
    ("{name: boom}", BOOM),
    ("{name: sleep, config: {ms: 10000}, timeout_ms: 20}", "timeout after 20 ms"),
    ("{name: unavailable}", "unavailable: no judge configured"),
])
def test_errors_fail_open_or_closed(on_error: str, layer: str, error: str) -> None:
    tel = support.RecordingTelemetry()
    v = verify(f"on_error: {on_error}\nlayers: [{{name: length}}, {layer}]", telemetry=tel)
    assert v.layers[1].error == error and v.layers[1].score is None and v.errors == 1
    if on_error == "fail_open":
        assert v.verdict == "pass" and v.score == 1.0  # the error is left out
        assert tel.total("fail_open") == 1
    else:
        assert v.verdict == "fail" and v.fail_closed and tel.total("fail_closed") == 1
        assert v.reasons[-1].endswith(f"error ({error})")


def test_budget_caps_the_layer_timeout() -> None:
    v = verify("budget: {total_ms: 30}\nlayers: [{name: sleep, config: {ms: 10000}}]")
    assert v.layers[0].error is not None and v.layers[0].error.startswith("timeout after")
    assert float(v.layers[0].error.split()[2]) <= 30


def test_exhausted_budget_is_an_error_without_running() -> None:
    budget = Budget(total_ms=0)
    v = verify("layers: [{name: length}]", budget=budget)
    assert v.layers[0].error == "time budget exhausted"


# A layer the cost budget stops is not verified: an error outcome, which on_error decides
# like an exhausted time budget (it was a skip, which passed a fail_closed policy).
@pytest.mark.parametrize("on_error,verdict", [("fail_open", "pass"), ("fail_closed", "fail")])
def test_cost_budget_stops_layers_as_an_error(on_error: str, verdict: str) -> None:
    budget = Budget(total_ms=1000, max_cost=0.01, spent_cost=0.02)
    v = verify(f"on_error: {on_error}\nlayers: [{{name: length}}]", budget=budget)
    assert v.layers[0].error == "cost budget exhausted" and not v.layers[0].skipped
    assert v.score is None and v.verdict == verdict


def test_the_risk_profiles_max_cost_stops_layers_too() -> None:
    policy = """
risk:
  level: high
  profiles: {high: {layers: [length], min_confidence: 0.5, max_cost: 0.01}}
layers: [{name: length}]
"""
    v = verify(policy, budget=Budget(total_ms=1000, spent_cost=0.02))  # no policy max_cost
    assert v.layers[0].error == "cost budget exhausted" and v.verdict == "pass"
    assert verify(policy, budget=Budget(total_ms=1000, spent_cost=0.005)).layers[0].error is None


def test_platt_calibration_from_the_layer_spec() -> None:
    v = verify("layers: [{name: length, calibration: {a: -2.0, b: 0.0}}]")
    (o,) = v.layers
    assert o.raw_score == 1.0 and o.score == pytest.approx(1 / (1 + 2.718281828459045 ** -2))


def test_skipped_layers_do_not_count_toward_the_mean() -> None:
    v = verify("layers: [{name: skip}, {name: sleep, config: {score: 0.9}}]\n"
               "decision: {min_confidence: 0.85}")
    assert v.score == pytest.approx(0.9) and v.verdict == "pass"


def test_weighted_mean_and_min_confidence_bands() -> None:
    policy = """
decision: {combine: mean, min_confidence: 0.8, marginal_at: 0.5}
layers:
  - {name: sleep, id: hi, config: {score: 1.0}, weight: 3}
  - {name: sleep, id: lo, config: {score: %s}, weight: 1}
"""
    assert verify(policy % "0.2").score == pytest.approx(0.8)
    assert verify(policy % "0.2").verdict == "pass"
    assert verify(policy % "0.0").verdict == "marginal"  # 0.75


def test_all_passed_needs_every_layer_to_pass() -> None:
    v = verify("layers: [{name: length, config: {min_chars: 20}}, {name: sleep}]\n"
               "decision: {min_confidence: 0.5}", answer="fifteen chars!!")
    assert v.score == pytest.approx((0.75 + 1.0) / 2)
    assert v.verdict == "marginal" and v.reasons == [
        "length: answer has 15 chars, fewer than min_chars=20"]


def test_risk_profile_selects_layers_and_min_confidence() -> None:
    policy = """
risk:
  level: assess
  profiles:
    critical: {layers: [kw], min_confidence: 0.99}
    low: {layers: [len], min_confidence: 0.1}
layers: [{name: keyword, id: kw, config: {block: [zzz]}}, {name: length, id: len}]
"""
    critical = verify(policy, answer="Your diagnosis and treatment plan look fine.")
    assert critical.risk_level == "critical" and [o.key for o in critical.layers] == ["kw"]
    assert critical.min_confidence == 0.99
    low = verify(policy, answer="ok")
    assert low.risk_level == "low" and [o.key for o in low.layers] == ["len"]
    medium = verify(policy, answer="x" * 150 + " 42")
    assert medium.risk_level == "medium" and len(medium.layers) == 2  # no profile: all
    assert medium.min_confidence == 0.8  # seed 000's medium profile


def test_fixed_risk_level() -> None:
    v = verify("risk: {level: high}\nlayers: [{name: length}]",
               answer="Your diagnosis and treatment plan look fine.")
    assert v.risk_level == "high" and v.min_confidence == 0.9


@pytest.mark.parametrize("credit,band", [(5, "pass"), (4, "pass"), (3, "marginal"),
                                         (2, "fail"), (1, "fail")])
def test_credit_score_zones_worse_band_wins(credit: int, band: str) -> None:
    v = verify(f"layers: [{{name: credit, config: {{credit: {credit}}}}}]")
    assert v.score == 1.0 and v.verdict == band


def test_zone_mapping_is_configurable() -> None:
    v = verify("layers: [{name: credit, config: {credit: 3}}]\n"
               "decision: {zones: {MID: fail}}")
    assert v.verdict == "fail" and v.reasons == ["credit: credit score 3 (MID)"]


def test_failed_claims_are_collected_from_failing_layers() -> None:
    v = verify("layers: [{name: wordclaims, config: {word: moon}}]",
               answer="The sun is hot. The moon is cheese. The moon is far.")
    assert v.failed_claims == ["The moon is cheese.", "The moon is far."]


def test_decide_with_nothing_counted_passes() -> None:
    outcome = LayerOutcome(key="x", name="x", error="boom")
    assert decide([outcome], decision=DecisionSpec(), min_confidence=0.8) == ("pass", None, [])


def test_outcome_layer_header_value() -> None:
    assert LayerOutcome("g", "g", score=0.912, passed=True).header_value() == "g=0.9120:pass"
    assert LayerOutcome("g", "g", error="x").header_value() == "g=error"


class CpuLayer(support.SkipLayer):
    """A ``cpu_only`` layer that notes the task it ran in and burns ``ms`` synchronously."""

    name = "cpu"
    cpu_only = True
    tasks: ClassVar[list[asyncio.Task[Any] | None]] = []
    work_s: ClassVar[float] = 0.005

    async def verify(self, inp: VerifyInput) -> Any:
        CpuLayer.tasks.append(asyncio.current_task())
        time.sleep(CpuLayer.work_s)  # noqa: ASYNC251 -- synchronous work
        return LayerResult(score=1.0, passed=True)


def _run_in_task(policy_yaml: str, budget: Budget | None = None,
                 trace: RequestTrace | None = None) -> tuple[Verification, Any]:
    CpuLayer.tasks = []

    async def go() -> tuple[Verification, Any]:
        policy = load_policy_text(policy_yaml, name="p", layers=LAYERS)
        inp = VerifyInput(messages=[], response_text="x", context=GroundingContext())
        if budget is not None:  # the clock starts here, not while the policy was parsed
            budget._t0 = time.monotonic()
        v = await run_pipeline(policy, inp, layer_for=_factory, trace=trace or RequestTrace(),
                               telemetry=support.RecordingTelemetry(), budget=budget)
        return v, asyncio.current_task()

    return asyncio.run(go())


def test_cpu_only_layers_run_in_the_calling_task_inside_their_spans(
        monkeypatch: pytest.MonkeyPatch) -> None:
    trace = RecordingTrace()
    v, caller = _run_in_task("layers: [{name: cpu, id: a}, {name: cpu, id: b}]", trace=trace)
    assert CpuLayer.tasks == [caller, caller]
    assert [o.key for o in v.layers] == ["a", "b"] and v.verdict == "pass"
    assert [name for name, _ in trace.layers] == ["a", "b"]
    assert all(o.latency_ms > 0 for o in v.layers)


def test_cpu_only_layers_check_the_budget_before_each_layer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The first layer starts with (nearly) the whole minute and uses it all up: it moves
    # the budget's clock instead of burning it, so this is ordering, not timing (a
    # loaded box can stall longer than a 100 ms budget before the first layer starts).
    budget = Budget(total_ms=60_000.0)
    work = CpuLayer.verify

    async def use_it_all(self: CpuLayer, inp: VerifyInput) -> Any:
        result = await work(self, inp)
        budget._t0 -= 120.0  # as if it had run for two minutes
        return result

    monkeypatch.setattr(CpuLayer, "verify", use_it_all)
    v, _ = _run_in_task("layers: [{name: cpu, id: a}, {name: cpu, id: b}]", budget=budget)
    assert v.layers[0].passed and v.layers[0].error is None
    assert v.layers[1].error == "time budget exhausted"


def test_a_layer_without_cpu_only_keeps_every_layer_in_its_own_task(
        monkeypatch: pytest.MonkeyPatch) -> None:
    v, caller = _run_in_task("layers: [{name: cpu}, {name: sleep, config: {ms: 1}}]")
    assert len(CpuLayer.tasks) == 1 and CpuLayer.tasks[0] is not caller
    assert v.verdict == "pass"


def test_layers_header_marks_report_only_layers() -> None:
    from gateway.verify.outcome import LayerOutcome

    scored = LayerOutcome(key="grounding", name="grounding", score=0.91, passed=True)
    report = LayerOutcome(key="claims", name="claims", score=0.0, passed=True, weight=0.0)
    failed = LayerOutcome(key="len", name="length", score=0.2, passed=False)
    assert [o.header_value() for o in (scored, report, failed)] == [
        "grounding=0.9100:pass", "claims=0.0000:report", "len=0.2000:fail"]
    assert not report.counted and scored.counted


class PickyJudgedLayer(support.SkipLayer):
    """Asks the judge (temperature 0, cached) and raises unless it says "good"."""

    name = "picky"

    def __init__(self, config: Any, resources: LayerResources | None = None) -> None:
        self.resources = resources or LayerResources()

    async def verify(self, inp: VerifyInput) -> Any:
        judge: Any = self.resources.judge
        text = (await judge.complete([{"role": "user", "content": "x"}], model="m")).texts[0]
        if text != "good":
            from gateway.layers.base import JudgeError
            raise JudgeError(f"unusable reply {text!r}")
        return LayerResult(score=1.0, passed=True)


def test_a_layer_that_fails_on_a_judge_reply_does_not_keep_it_cached(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    from gateway.upstream.judge import OpenAIJudge
    from gateway.settings import JudgeConfig

    replies = iter(["bad", "good"])

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"model": "m", "choices": [
            {"message": {"content": next(replies)}}]})

    async def go() -> list[Verification]:
        judge = OpenAIJudge(JudgeConfig(), "http://judge.test/v1", None,
                            client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))
        policy = load_policy_text("layers: [{name: picky}]\n", name="p", layers=LAYERS)
        inp = VerifyInput(messages=[], response_text="x", context=GroundingContext())

        def factory(rl: ResolvedLayer) -> Layer:
            return rl.cls(rl.config, LayerResources(judge=judge))  # type: ignore[call-arg]

        try:
            return [await run_pipeline(policy, inp, layer_for=factory, trace=RequestTrace(),
                                       telemetry=support.RecordingTelemetry())
                    for _ in range(2)]
        finally:
            await judge.aclose()

    first, second = asyncio.run(go())
    assert first.layers[0].error and not second.layers[0].error
