"""Which upstream serves the next call: load balancing and passive health. Pure, no I/O.

- A **pool** is a named set of upstreams serving the same models, each with a weight,
  and a strategy: ``weighted_round_robin`` (nginx's smooth weighted round-robin: with
  weights 5/1/1 the order is ``a a b a c a a``, never a burst of one member) or
  ``least_in_flight`` (fewest calls in flight per unit of weight, nginx's
  ``least_conn``; ties broken by smooth WRR among the tied). Every upstream is also a
  pool of one under its own name, so a fallback may name either.
- **Passive health**, per upstream (shared by every pool it is in): after
  ``failure_threshold`` consecutive failures it is *open* (skipped) for a cooldown
  that grows ``growth``-fold each time it opens again, up to ``max_cooldown``; once the
  cooldown is over it is *half-open*: one call (the probe) goes to it, and its
  success *closes* it (a failure opens it again, for longer). The growth starts over
  once an upstream has stayed closed for ``max_cooldown``. A ``hold_off`` (a
  ``retry-after`` the caller chose to honour) opens it at once for that long.
- Outcomes that arrive while an upstream is open (calls started before it opened)
  change nothing but the counters; while half-open only the probe's counts.
- **Panic**: when every member of a pool is open, :meth:`Balancer.pick` with
  ``allow_panic`` picks the one whose cooldown ends first instead of none (Envoy's
  panic routing): a gateway with one upstream keeps sending it calls rather than
  answering 503 itself. ``HealthPolicy.panic = False`` fails fast instead.
- :meth:`Balancer.snapshot` — state, in-flight and counters per upstream and the
  members available per pool, for ``/readyz`` and metrics.

Every call is a :class:`Lease`: the balancer counts it in flight until the caller
settles it with :meth:`Lease.succeeded`, :meth:`Lease.failed` or :meth:`Lease.released`
(neither: cancelled by the client, or a 4xx that says nothing about the upstream). Settle
a stream when it ends, so in-flight counts cover it.

Time comes from the injected ``clock`` (``time.monotonic`` by default).

**Concurrency.** Not thread-safe, by design: one instance per event loop, used only
from that loop's thread. No method awaits, so each call is atomic with respect to the
loop's other tasks; nothing needs a lock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "STATE_VALUES", "Balancer", "Clock", "HealthPolicy", "Lease", "Member", "PoolSpec",
    "PoolStatus", "Snapshot", "State", "Strategy", "UpstreamStatus",
]

Clock = Callable[[], float]
Strategy = Literal["weighted_round_robin", "least_in_flight"]
State = Literal["closed", "open", "half_open"]

STATE_VALUES: Mapping[State, int] = {"closed": 0, "half_open": 1, "open": 2}
"""A gauge value per state (metrics)."""


@dataclass(frozen=True, slots=True)
class HealthPolicy:
    """Passive health. Times in seconds."""

    failure_threshold: int = 3
    cooldown: float = 5.0
    max_cooldown: float = 300.0
    growth: float = 2.0
    panic: bool = True

    def __post_init__(self) -> None:
        if self.failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        if not (math.isfinite(self.cooldown) and self.cooldown > 0):
            raise ValueError("cooldown must be a finite number > 0")
        if not (math.isfinite(self.max_cooldown) and self.max_cooldown >= self.cooldown):
            raise ValueError("max_cooldown must be finite and >= cooldown")
        if not (math.isfinite(self.growth) and self.growth >= 1):
            raise ValueError("growth must be a finite number >= 1")


@dataclass(frozen=True, slots=True)
class Member:
    upstream: str
    weight: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.weight, int) or isinstance(self.weight, bool) \
                or not 1 <= self.weight <= 1_000_000:
            raise ValueError(f"weight of {self.upstream!r} must be an integer 1..1000000")


@dataclass(frozen=True, slots=True)
class PoolSpec:
    members: tuple[Member, ...]
    strategy: Strategy = "weighted_round_robin"

    def __post_init__(self) -> None:
        if not self.members:
            raise ValueError("a pool needs at least one member")
        names = [m.upstream for m in self.members]
        if len(set(names)) != len(names):
            raise ValueError("a pool names each upstream once")
        if self.strategy not in ("weighted_round_robin", "least_in_flight"):
            raise ValueError("strategy must be 'weighted_round_robin' or 'least_in_flight'")


@dataclass(slots=True)
class _Health:
    name: str
    state: State = "closed"
    consecutive: int = 0
    trips: int = 0
    open_until: float = 0.0
    closed_at: float | None = None
    probing: bool = False
    in_flight: int = 0
    requests: int = 0
    failures: int = 0
    opened: int = 0


@dataclass(slots=True)
class _Pool:
    name: str
    spec: PoolSpec
    current: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UpstreamStatus:
    upstream: str
    state: State
    in_flight: int
    consecutive_failures: int
    cooldown_remaining: float
    """Seconds until an open upstream turns half-open (0 otherwise)."""
    requests: int
    """Calls leased, ever (a counter)."""
    failures: int
    """Failed calls, ever (a counter)."""
    opened: int
    """Times it was opened, ever (a counter)."""


@dataclass(frozen=True, slots=True)
class PoolStatus:
    pool: str
    strategy: Strategy
    members: tuple[Member, ...]
    available: int
    """Members a call could go to now (closed, or half-open with no probe out)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    upstreams: tuple[UpstreamStatus, ...]
    pools: tuple[PoolStatus, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"upstreams": {name: {...}}, "pools": {name: {...}}}``."""
        return {
            "upstreams": {u.upstream: {
                "state": u.state, "in_flight": u.in_flight,
                "consecutive_failures": u.consecutive_failures,
                "cooldown_remaining": round(u.cooldown_remaining, 3),
                "requests": u.requests, "failures": u.failures, "opened": u.opened,
            } for u in self.upstreams},
            "pools": {p.pool: {
                "strategy": p.strategy, "available": p.available,
                "members": [{"upstream": m.upstream, "weight": m.weight} for m in p.members],
            } for p in self.pools},
        }


class Lease:
    """One call to :attr:`upstream`. Settle it exactly once; later calls are ignored."""

    __slots__ = ("_balancer", "_health", "panic", "probe", "settled", "upstream")

    def __init__(self, balancer: Balancer, health: _Health, *, probe: bool,
                 panic: bool) -> None:
        self._balancer = balancer
        self._health = health
        self.upstream = health.name
        self.probe = probe
        """The half-open upstream's one trial call."""
        self.panic = panic
        """Picked although open (every member of the pool was)."""
        self.settled = False

    def succeeded(self) -> None:
        if self._settle():
            self._balancer._success(self._health, self)

    def failed(self, *, hold_off: float | None = None) -> None:
        """A failure that says something about the upstream (``Failure.upstream_fault``).
        ``hold_off``: seconds it asked to be left alone (opens it at once for that long,
        at most ``max_cooldown``). Only pass it when the upstream's answer applies to
        every caller (its own key, not a client's forwarded one)."""
        if self._settle():
            self._balancer._failure(self._health, self, hold_off)

    def released(self) -> None:
        """Neither success nor failure (the client went away; a 4xx)."""
        if self._settle() and self.probe:
            self._health.probing = False

    def _settle(self) -> bool:
        if self.settled:
            return False
        self.settled = True
        self._health.in_flight -= 1
        return True


class Balancer:
    """Pools over named upstreams, with per-upstream passive health.

    ``upstreams``: every configured upstream name (each is a pool of one under its own
    name); ``pools``: named pools of them. A pool may not take an upstream's name
    unless it is that upstream alone.
    """

    def __init__(self, upstreams: Sequence[str], pools: Mapping[str, PoolSpec] | None = None,
                 *, health: HealthPolicy | None = None, clock: Clock = time.monotonic) -> None:
        self.health = health or HealthPolicy()
        self._clock = clock
        self._upstreams = {name: _Health(name) for name in upstreams}
        if len(self._upstreams) != len(upstreams):
            raise ValueError("upstream names must be unique")
        self._pools: dict[str, _Pool] = {
            name: _Pool(name, PoolSpec((Member(name),))) for name in upstreams}
        for name, spec in (pools or {}).items():
            unknown = [m.upstream for m in spec.members if m.upstream not in self._upstreams]
            if unknown:
                raise ValueError(f"pool {name!r} names unknown upstreams: {unknown}")
            if name in self._upstreams and [m.upstream for m in spec.members] != [name]:
                raise ValueError(f"pool {name!r} has the name of an upstream")
            self._pools[name] = _Pool(name, spec)

    def __contains__(self, pool: str) -> bool:
        return pool in self._pools

    def members(self, pool: str) -> tuple[Member, ...]:
        return self._pools[pool].spec.members

    # ---- picking ----------------------------------------------------------------------------

    def pick(self, pool: str, *, exclude: Collection[str] = (),
             allow_panic: bool = True) -> Lease | None:
        """A lease on the member of ``pool`` the strategy picks among the available ones
        not in ``exclude``; with none available, the panic pick (when allowed by both
        ``allow_panic`` and the policy), else None. Raises KeyError for an unknown pool."""
        p = self._pools[pool]
        now = self._clock()
        members = [m for m in p.spec.members if m.upstream not in exclude]
        ready = [m for m in members if self._available(self._upstreams[m.upstream], now)]
        if ready:
            if p.spec.strategy == "least_in_flight":
                ready = self._least_loaded(ready)
            chosen = self._smooth_wrr(p, ready)
            h = self._upstreams[chosen.upstream]
            probe = h.state == "half_open"
            if probe:
                h.probing = True
            return self._lease(h, probe=probe, panic=False)
        if not members or not allow_panic or not self.health.panic:
            return None
        soonest = min(members, key=lambda m: self._upstreams[m.upstream].open_until)
        return self._lease(self._upstreams[soonest.upstream], probe=False, panic=True)

    def _lease(self, h: _Health, *, probe: bool, panic: bool) -> Lease:
        h.in_flight += 1
        h.requests += 1
        return Lease(self, h, probe=probe, panic=panic)

    def _least_loaded(self, ready: list[Member]) -> list[Member]:
        """The members with the fewest in flight per unit of weight (exact: a/w < b/v
        compared as a*v < b*w)."""
        best = ready[0]
        tied = [best]
        for m in ready[1:]:
            lhs = self._upstreams[m.upstream].in_flight * best.weight
            rhs = self._upstreams[best.upstream].in_flight * m.weight
            if lhs < rhs:
                best, tied = m, [m]
            elif lhs == rhs:
                tied.append(m)
        return tied

    @staticmethod
    def _smooth_wrr(p: _Pool, ready: list[Member]) -> Member:
        """nginx's smooth weighted round-robin over ``ready`` (first of equals wins)."""
        if len(ready) == 1:
            return ready[0]
        total = 0
        best: Member | None = None
        current = p.current
        for m in ready:
            current[m.upstream] = current.get(m.upstream, 0) + m.weight
            total += m.weight
            if best is None or current[m.upstream] > current[best.upstream]:
                best = m
        assert best is not None
        current[best.upstream] -= total
        return best

    # ---- health -----------------------------------------------------------------------------

    def _state(self, h: _Health, now: float) -> State:
        if h.state == "open" and now >= h.open_until:
            h.state = "half_open"
            h.probing = False
        return h.state

    def _available(self, h: _Health, now: float) -> bool:
        state = self._state(h, now)
        return state == "closed" or (state == "half_open" and not h.probing)

    def _open(self, h: _Health, now: float, hold_off: float | None) -> None:
        hp = self.health
        if hold_off is not None:
            cooldown = min(hold_off, hp.max_cooldown)
        else:
            if h.state == "closed" and h.closed_at is not None \
                    and now - h.closed_at >= hp.max_cooldown:
                h.trips = 0  # it held up long enough: start the growth over
            h.trips += 1
            cooldown = min(hp.cooldown * hp.growth ** min(h.trips - 1, 64), hp.max_cooldown)
        h.state = "open"
        h.open_until = now + cooldown
        h.consecutive = 0
        h.probing = False
        h.opened += 1

    def _failure(self, h: _Health, lease: Lease, hold_off: float | None) -> None:
        h.failures += 1
        now = self._clock()
        state = self._state(h, now)
        if hold_off is not None and not (math.isfinite(hold_off) and hold_off > 0):
            hold_off = None
        if lease.probe and state == "half_open":
            self._open(h, now, hold_off)
        elif state == "closed":
            h.consecutive += 1
            if hold_off is not None or h.consecutive >= self.health.failure_threshold:
                self._open(h, now, hold_off)
        elif lease.probe:
            h.probing = False

    def _success(self, h: _Health, lease: Lease) -> None:
        state = self._state(h, self._clock())
        if state == "closed":
            h.consecutive = 0
        elif (lease.probe and state == "half_open") or lease.panic:
            h.state = "closed"
            h.consecutive = 0
            h.probing = False
            h.closed_at = self._clock()

    # ---- reading ----------------------------------------------------------------------------

    def state(self, upstream: str) -> State:
        return self._state(self._upstreams[upstream], self._clock())

    def available(self, pool: str) -> int:
        """Members of ``pool`` a call could go to now."""
        now = self._clock()
        return sum(self._available(self._upstreams[m.upstream], now)
                   for m in self._pools[pool].spec.members)

    def snapshot(self) -> Snapshot:
        now = self._clock()
        ups = tuple(UpstreamStatus(
            upstream=h.name, state=self._state(h, now), in_flight=h.in_flight,
            consecutive_failures=h.consecutive,
            cooldown_remaining=max(0.0, h.open_until - now) if h.state == "open" else 0.0,
            requests=h.requests, failures=h.failures, opened=h.opened,
        ) for h in self._upstreams.values())
        pools = tuple(PoolStatus(pool=p.name, strategy=p.spec.strategy,
                                 members=p.spec.members, available=self.available(p.name))
                      for p in self._pools.values())
        return Snapshot(ups, pools)
