"""Fallback chains and per-request attempt plans (gateway.upstream.failover): pure, the
clock and random source injected. Includes the issue's two reliability targets as
simulations (no servers, no timing)."""

from __future__ import annotations

import random

import pytest

from gateway.upstream.balancer import Balancer, HealthPolicy, Member, PoolSpec
from gateway.upstream.failover import AttemptPlan, FallbackRule, Fallbacks, Target
from gateway.upstream.retry import Failure, RetryPolicy, RetryState


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def balancer(clock: Clock | None = None, **health: object) -> Balancer:
    return Balancer(
        ["a", "b", "c", "d"],
        {"main": PoolSpec((Member("a"), Member("b")))},
        health=HealthPolicy(**health),  # type: ignore[arg-type]
        clock=clock or Clock())


def plan(b: Balancer, targets: list[Target], **policy: object) -> AttemptPlan:
    retry = RetryState(RetryPolicy(**{"jitter": "none", **policy}),  # type: ignore[arg-type]
                       random.Random(0).random)
    return AttemptPlan(b, targets, "gpt-x", retry)


FAIL = Failure.from_status(503)


# ---- fallback rules ---------------------------------------------------------------------


def test_first_matching_rule_wins() -> None:
    fb = Fallbacks([
        FallbackRule("gpt-4o-mini*", (Target("c"),)),
        FallbackRule("gpt-4o*", (Target("c", "gpt-4o-mini"), Target("d"))),
    ])
    assert fb.chain("gpt-4o-mini-2024") == (Target("c"),)
    assert fb.chain("gpt-4o") == (Target("c", "gpt-4o-mini"), Target("d"))
    assert fb.chain("claude") == ()


def test_fallbacks_checked_against_the_balancer() -> None:
    with pytest.raises(ValueError, match="nowhere"):
        Fallbacks([FallbackRule("*", (Target("nowhere"),))], balancer())
    Fallbacks([FallbackRule("*", (Target("main"), Target("c")))], balancer())


# ---- plans ------------------------------------------------------------------------------


def test_first_attempt_goes_to_the_primary_pool() -> None:
    p = plan(balancer(), [Target("main"), Target("c")])
    first = p.first()
    assert first is not None
    assert (first.number, first.upstream, first.model, first.delay) == (1, "a", "gpt-x", 0)
    assert not first.fallback
    with pytest.raises(RuntimeError):
        p.first()


def test_retry_goes_to_the_other_member_at_once_then_to_the_fallback() -> None:
    p = plan(balancer(), [Target("main"), Target("c", "small")], max_attempts=5)
    first = p.first()
    assert first is not None
    second = p.failed(FAIL)
    assert second is not None and second.upstream == "b" and second.delay == 0
    third = p.failed(FAIL)
    assert third is not None
    assert (third.upstream, third.model, third.fallback, third.number) == ("c", "small", True, 3)
    assert p.tried == ["a", "b", "c"]


def test_when_every_upstream_was_tried_the_next_attempt_waits_the_backoff() -> None:
    p = plan(balancer(), [Target("c")], max_attempts=3, base_backoff=0.2)
    p.first()
    again = p.failed(FAIL)
    assert again is not None and again.upstream == "c" and again.delay == pytest.approx(0.2)
    again = p.failed(FAIL)
    assert again is not None and again.delay == pytest.approx(0.4)
    assert p.failed(FAIL) is None
    assert p.retry.reasons == ["retry", "retry", "attempts_exhausted"]
    assert p.retry.total_delay == pytest.approx(0.6)


def test_a_non_retryable_failure_ends_the_plan_and_releases_the_lease() -> None:
    b = balancer(failure_threshold=1)
    p = plan(b, [Target("main"), Target("c")])
    first = p.first()
    assert first is not None
    assert p.failed(Failure.from_status(400)) is None
    assert first.lease.settled and b.state("a") == "closed"  # a 400 is not a's fault
    snap = b.snapshot().as_dict()["upstreams"]["a"]
    assert snap["in_flight"] == 0 and snap["failures"] == 0
    with pytest.raises(RuntimeError):
        p.failed(FAIL)


def test_retryable_failures_count_against_health() -> None:
    b = balancer(failure_threshold=1)
    p = plan(b, [Target("main")])
    p.first()
    p.failed(FAIL)
    assert b.state("a") == "open"


def test_retry_after_over_the_cap_holds_the_upstream_off_and_moves_on() -> None:
    b = balancer(failure_threshold=5, max_cooldown=100)
    p = plan(b, [Target("c"), Target("d")], retry_after_cap=5)
    p.first()
    nxt = p.failed(Failure.from_status(429, retry_after=40))
    assert nxt is not None and nxt.upstream == "d" and nxt.delay == 0
    assert b.state("c") == "open"
    assert b.snapshot().as_dict()["upstreams"]["c"]["cooldown_remaining"] == 40
    # nothing untried is left, and revisits are not allowed after that decision
    assert p.failed(Failure.from_status(429, retry_after=40)) is None


def test_hold_off_can_be_left_to_the_client() -> None:
    b = balancer(failure_threshold=5)
    p = AttemptPlan(b, [Target("c"), Target("d")], "m",
                    RetryState(RetryPolicy(retry_after_cap=5), random.random), hold_off=False)
    p.first()
    nxt = p.failed(Failure.from_status(429, retry_after=40))
    assert nxt is not None and nxt.upstream == "d"
    assert b.state("c") == "closed"  # one client's rate limit, not the upstream's


def test_open_primary_is_skipped_for_the_fallback_without_an_attempt() -> None:
    b = balancer(failure_threshold=1)
    for up in ("a", "b"):
        lease = b.pick(up)
        assert lease is not None
        lease.failed()
    p = plan(b, [Target("main"), Target("c")])
    first = p.first()
    assert first is not None and first.upstream == "c" and first.number == 1
    assert not first.lease.panic


def test_everything_open_falls_back_to_a_panic_pick_or_nothing() -> None:
    b = balancer(failure_threshold=1)
    for up in ("a", "b", "c"):
        lease = b.pick(up)
        assert lease is not None
        lease.failed()
    first = plan(b, [Target("main"), Target("c")]).first()
    assert first is not None and first.lease.panic and first.target == 0
    b2 = balancer(failure_threshold=1, panic=False)
    lease = b2.pick("c")
    assert lease is not None
    lease.failed()
    assert plan(b2, [Target("c")]).first() is None


def test_a_revisit_takes_the_panic_pick_when_everything_is_open() -> None:
    b = balancer(failure_threshold=1)
    p = plan(b, [Target("c")])
    first = p.first()
    assert first is not None and not first.lease.panic
    again = p.failed(FAIL)  # c is open now, and alone: retried after the backoff
    assert again is not None and again.upstream == "c" and again.lease.panic
    assert again.delay > 0
    b2 = balancer(failure_threshold=1, panic=False)
    p2 = plan(b2, [Target("c")])
    assert p2.first() is not None
    assert p2.failed(FAIL) is None


def test_a_plan_needs_a_target() -> None:
    with pytest.raises(ValueError):
        plan(balancer(), [])


def test_client_bytes_sent_ends_the_plan() -> None:
    p = plan(balancer(), [Target("main")])
    p.first()
    assert p.failed(Failure("body", client_bytes_sent=True)) is None


# ---- the targets, simulated -----------------------------------------------------


def run(b: Balancer, targets: list[Target], down: dict[str, float], rng: random.Random,
        n: int, policy: RetryPolicy) -> tuple[int, int]:
    """``n`` sequential requests; upstream ``u`` fails with probability ``down[u]``.
    Returns (successes, calls made)."""
    ok = calls = 0
    for _ in range(n):
        p = AttemptPlan(b, targets, "m", RetryState(policy, rng.random))
        attempt = p.first()
        while attempt is not None:
            calls += 1
            if rng.random() < down.get(attempt.upstream, 0.0):
                attempt = p.failed(Failure.from_status(503))
            else:
                attempt.lease.succeeded()
                ok += 1
                break
    return ok, calls


def test_first_upstream_always_503_every_request_succeeds_via_the_second() -> None:
    b = Balancer(["a", "b"], {"m": PoolSpec((Member("a"), Member("b")))}, clock=Clock())
    ok, calls = run(b, [Target("m")], {"a": 1.0}, random.Random(1), 1000, RetryPolicy())
    assert ok == 1000
    # health takes "a" out after 3 failures; the clock never moves, so it stays out
    assert calls == 1000 + 3


def test_first_upstream_fails_30_percent_success_at_least_999_per_mille() -> None:
    clock = Clock()
    b = Balancer(["a", "b"], {"m": PoolSpec((Member("a"), Member("b")))}, clock=clock)
    rng = random.Random(7)
    ok, _ = run(b, [Target("m")], {"a": 0.3}, rng, 10_000, RetryPolicy())
    assert ok == 10_000
