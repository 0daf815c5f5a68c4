"""Load balancing and passive health (gateway.upstream.balancer): pure, the clock injected."""

from __future__ import annotations

from collections import Counter

import pytest

from gateway.upstream.balancer import (
    STATE_VALUES,
    Balancer,
    HealthPolicy,
    Lease,
    Member,
    PoolSpec,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds


def make(weights: dict[str, int], strategy: str = "weighted_round_robin",
         clock: Clock | None = None, **health: object) -> Balancer:
    spec = PoolSpec(tuple(Member(n, w) for n, w in weights.items()),
                    strategy)  # type: ignore[arg-type]
    return Balancer(list(weights), {"pool": spec}, health=HealthPolicy(**health),  # type: ignore[arg-type]
                    clock=clock or Clock())


def take(b: Balancer, pool: str = "pool", **kw: object) -> Lease:
    lease = b.pick(pool, **kw)  # type: ignore[arg-type]
    assert lease is not None
    return lease


def order(b: Balancer, n: int) -> str:
    out = []
    for _ in range(n):
        lease = take(b)
        out.append(lease.upstream)
        lease.succeeded()
    return "".join(out)


# ---- weighted round-robin ---------------------------------------------------------------


def test_smooth_weighted_round_robin_matches_nginx() -> None:
    # nginx's documented example: weights 5, 1, 1 -> a a b a c a a (no burst of five)
    assert order(make({"a": 5, "b": 1, "c": 1}), 14) == "aabacaa" * 2


def test_equal_weights_alternate() -> None:
    assert order(make({"a": 1, "b": 1, "c": 1}), 6) == "abcabc"


@pytest.mark.parametrize("weights", [{"a": 3, "b": 1}, {"a": 2, "b": 5, "c": 3}])
def test_shares_follow_weights_exactly_per_cycle(weights: dict[str, int]) -> None:
    b = make(weights)
    cycle = sum(weights.values())
    counts = Counter(order(b, cycle * 10))
    assert counts == {k: w * 10 for k, w in weights.items()}


def test_an_open_member_is_skipped_and_the_rest_keep_their_ratio() -> None:
    clock = Clock()
    b = make({"a": 1, "b": 2, "c": 1}, clock=clock, failure_threshold=1)
    for _ in range(4):
        lease = take(b)
        if lease.upstream == "b":
            lease.failed()
            break
        lease.succeeded()
    assert b.state("b") == "open"
    assert Counter(order(b, 20)) == {"a": 10, "c": 10}


# ---- least in flight --------------------------------------------------------------------


def test_least_in_flight_picks_the_least_loaded() -> None:
    b = make({"a": 1, "b": 1, "c": 1}, "least_in_flight")
    held = [take(b) for _ in range(3)]
    assert sorted(x.upstream for x in held) == ["a", "b", "c"]
    held[1].succeeded()  # its upstream now has 0 in flight, the others 1
    nxt = take(b)
    assert nxt.upstream == held[1].upstream


def test_least_in_flight_is_per_unit_of_weight() -> None:
    b = make({"a": 3, "b": 1}, "least_in_flight")
    leases = [take(b) for _ in range(8)]
    # never settled: a ends with 3x b's load (6 vs 2)
    assert Counter(x.upstream for x in leases) == {"a": 6, "b": 2}


def test_least_in_flight_breaks_ties_by_round_robin() -> None:
    b = make({"a": 1, "b": 1}, "least_in_flight")
    assert order(b, 4) == "abab"


def test_in_flight_is_shared_across_pools() -> None:
    spec = {"p1": PoolSpec((Member("a"), Member("b")), "least_in_flight"),
            "p2": PoolSpec((Member("a"), Member("b")), "least_in_flight")}
    b = Balancer(["a", "b"], spec, clock=Clock())
    first = take(b, "p1")
    assert take(b, "p2").upstream != first.upstream


def test_settling_twice_counts_once() -> None:
    b = make({"a": 1})
    lease = take(b)
    lease.succeeded()
    lease.failed()
    lease.released()
    s = b.snapshot().as_dict()["upstreams"]["a"]
    assert s["in_flight"] == 0 and s["failures"] == 0 and s["requests"] == 1


# ---- passive health ---------------------------------------------------------------------


def fail(b: Balancer, n: int, pool: str = "pool", **kw: object) -> None:
    for _ in range(n):
        take(b, pool).failed(**kw)  # type: ignore[arg-type]


def test_consecutive_failures_open_and_a_success_resets_the_count() -> None:
    clock = Clock()
    b = make({"a": 1}, clock=clock, failure_threshold=3)
    fail(b, 2)
    take(b).succeeded()
    fail(b, 2)
    assert b.state("a") == "closed"
    fail(b, 1)
    assert b.state("a") == "open"
    assert b.pick("pool", allow_panic=False) is None


def test_cooldown_then_a_single_probe_whose_success_closes() -> None:
    clock = Clock()
    b = make({"a": 1}, clock=clock, failure_threshold=1, cooldown=5)
    fail(b, 1)
    clock.tick(4.9)
    assert b.state("a") == "open" and b.pick("pool", allow_panic=False) is None
    clock.tick(0.1)
    assert b.state("a") == "half_open"
    probe = take(b, allow_panic=False)
    assert probe.probe and not probe.panic
    assert b.pick("pool", allow_panic=False) is None  # one probe at a time
    probe.succeeded()
    assert b.state("a") == "closed"
    assert not take(b).probe


def test_a_failed_probe_reopens_for_longer_up_to_the_cap() -> None:
    clock = Clock()
    b = make({"a": 1}, clock=clock, failure_threshold=1, cooldown=5, growth=2,
             max_cooldown=30)
    fail(b, 1)
    cooldowns = []
    for _ in range(5):
        cooldowns.append(b.snapshot().upstreams[0].cooldown_remaining)
        clock.tick(cooldowns[-1])
        take(b, allow_panic=False).failed()
    assert cooldowns == [5, 10, 20, 30, 30]
    assert b.snapshot().upstreams[0].opened == 6


def test_a_released_probe_lets_another_probe_go() -> None:
    clock = Clock()
    b = make({"a": 1}, clock=clock, failure_threshold=1, cooldown=1)
    fail(b, 1)
    clock.tick(1)
    take(b, allow_panic=False).released()
    assert b.state("a") == "half_open"
    assert take(b, allow_panic=False).probe


def test_growth_starts_over_after_staying_closed_long_enough() -> None:
    clock = Clock()
    b = make({"a": 1}, clock=clock, failure_threshold=1, cooldown=5, max_cooldown=60)

    def trip_and_recover() -> float:
        fail(b, 1)
        wait = b.snapshot().upstreams[0].cooldown_remaining
        clock.tick(wait)
        take(b, allow_panic=False).succeeded()
        return wait

    assert trip_and_recover() == 5
    assert trip_and_recover() == 10  # flapping: it grows
    clock.tick(59)
    assert trip_and_recover() == 20
    clock.tick(60)
    assert trip_and_recover() == 5  # stayed up for max_cooldown: starts over


def test_outcomes_of_calls_started_before_opening_change_nothing() -> None:
    clock = Clock()
    b = make({"a": 1}, clock=clock, failure_threshold=2, cooldown=5)
    old = [take(b) for _ in range(4)]
    old[0].failed()
    old[1].failed()
    assert b.state("a") == "open"
    old[2].failed()  # late failure: does not extend the cooldown
    assert b.snapshot().upstreams[0].cooldown_remaining == 5
    old[3].succeeded()  # late success: does not close it
    assert b.state("a") == "open"
    clock.tick(5)
    probe = take(b, allow_panic=False)
    late = take(b)  # panic pick while the probe is out
    late.succeeded()
    assert b.state("a") == "closed"  # a panic call's success closes, like a probe's
    probe.failed()  # the probe's failure, after it closed: counts as a first failure
    assert b.state("a") == "closed"


def test_hold_off_opens_at_once_for_that_long_capped() -> None:
    clock = Clock()
    b = make({"a": 1, "b": 1}, clock=clock, failure_threshold=5, max_cooldown=60)
    lease = take(b)
    lease.failed(hold_off=30)
    assert b.state(lease.upstream) == "open"
    assert b.snapshot().as_dict()["upstreams"][lease.upstream]["cooldown_remaining"] == 30
    other = take(b)
    other.failed(hold_off=600)
    assert b.snapshot().as_dict()["upstreams"][other.upstream]["cooldown_remaining"] == 60


@pytest.mark.parametrize("bad", [0.0, -5.0, float("nan"), float("inf")])
def test_a_nonsense_hold_off_is_an_ordinary_failure(bad: float) -> None:
    b = make({"a": 1}, failure_threshold=2)
    take(b).failed(hold_off=bad)
    assert b.state("a") == "closed"


# ---- panic ------------------------------------------------------------------------------


def test_panic_picks_the_member_whose_cooldown_ends_first() -> None:
    clock = Clock()
    b = make({"a": 1, "b": 1}, clock=clock, failure_threshold=1, cooldown=10)
    take(b).failed()  # a opens until +10
    clock.tick(3)
    take(b).failed()  # b opens until +13
    lease = take(b)
    assert lease.panic and lease.upstream == "a"
    assert b.pick("pool", allow_panic=False) is None


def test_panic_can_be_turned_off() -> None:
    b = make({"a": 1}, failure_threshold=1, panic=False)
    fail(b, 1)
    assert b.pick("pool") is None


def test_exclude_is_honoured_even_in_panic() -> None:
    b = make({"a": 1, "b": 1}, failure_threshold=1)
    fail(b, 2)
    assert take(b, exclude={"a"}).upstream == "b"
    assert b.pick("pool", exclude={"a", "b"}) is None


# ---- pools, names, snapshot -------------------------------------------------------------


def test_every_upstream_is_a_pool_of_one() -> None:
    b = Balancer(["a", "b"], {"both": PoolSpec((Member("a"), Member("b")))}, clock=Clock())
    assert take(b, "b").upstream == "b"
    assert "a" in b and "both" in b and "c" not in b
    with pytest.raises(KeyError):
        b.pick("c")


@pytest.mark.parametrize("upstreams, pools", [
    (["a", "a"], {}),
    (["a"], {"p": PoolSpec((Member("zz"),))}),
    (["a", "b"], {"a": PoolSpec((Member("a"), Member("b")))}),
])
def test_bad_pools_are_rejected(upstreams: list[str], pools: dict[str, PoolSpec]) -> None:
    with pytest.raises(ValueError):
        Balancer(upstreams, pools)


@pytest.mark.parametrize("make_spec", [
    lambda: PoolSpec(()), lambda: PoolSpec((Member("a"), Member("a"))),
    lambda: PoolSpec((Member("a"),), "random"),  # type: ignore[arg-type]
    lambda: Member("a", 0), lambda: Member("a", True), lambda: Member("a", 1.5),  # type: ignore[arg-type]
    lambda: HealthPolicy(failure_threshold=0), lambda: HealthPolicy(cooldown=0),
    lambda: HealthPolicy(cooldown=10, max_cooldown=5), lambda: HealthPolicy(growth=0.5),
])
def test_bad_values_are_rejected(make_spec: object) -> None:
    with pytest.raises(ValueError):
        make_spec()  # type: ignore[operator]


def test_snapshot_for_readyz_and_metrics() -> None:
    clock = Clock()
    b = Balancer(["a", "b"], {"chat": PoolSpec((Member("a", 2), Member("b")),
                                               "least_in_flight")},
                 health=HealthPolicy(failure_threshold=1, cooldown=5), clock=clock)
    held = take(b, "chat")
    take(b, "chat").failed()
    clock.tick(2)
    snap = b.snapshot()
    d = snap.as_dict()
    bad = next(u for u in snap.upstreams if u.state == "open")
    assert d["upstreams"][bad.upstream] == {
        "state": "open", "in_flight": 0, "consecutive_failures": 0,
        "cooldown_remaining": 3.0, "requests": 1, "failures": 1, "opened": 1}
    assert d["upstreams"][held.upstream]["in_flight"] == 1
    assert d["pools"]["chat"] == {
        "strategy": "least_in_flight", "available": 1,
        "members": [{"upstream": "a", "weight": 2}, {"upstream": "b", "weight": 1}]}
    assert d["pools"]["a"]["available"] + d["pools"]["b"]["available"] == 1
    assert b.available("chat") == 1
    assert STATE_VALUES[bad.state] == 2
