"""Which configured upstreams serve a model, and the attempt plan of one request.

:class:`Upstreams` holds the open clients of one gateway (configuration order) and the
``routing`` section made live: the :class:`~gateway.upstream.balancer.Balancer` (pools
and passive health), the :class:`~gateway.upstream.failover.Fallbacks` and the
:class:`~gateway.upstream.retry.RetryPolicy`.

A model is served by its **targets**: the first pool whose ``models`` globs match it,
else the first upstream whose ``models`` match it (a pool of one, as before pools
existed), then its fallback chain. :meth:`Upstreams.plan` gives one request's
:class:`~gateway.upstream.failover.AttemptPlan` over them; the HTTP side
(``gateway.http.attempts``) does the calls.
"""

from __future__ import annotations

import fnmatch
import random
import time
from collections.abc import Iterator, Sequence

from gateway.errors import ModelNotFound
from gateway.settings.routing import RoutingConfig
from gateway.upstream.balancer import (
    STATE_VALUES,
    Balancer,
    Clock,
    HealthPolicy,
    Member,
    PoolSpec,
    Snapshot,
)
from gateway.upstream.base import UpstreamClient
from gateway.upstream.failover import AttemptPlan, FallbackRule, Fallbacks, Target
from gateway.upstream.retry import Random, RetryPolicy, RetryState, retryable_request

__all__ = ["Upstreams", "retry_policy"]

_CACHE_LIMIT = 4096
"""Models whose targets are remembered (names come from clients: bounded)."""


def retry_policy(routing: RoutingConfig) -> RetryPolicy:
    r = routing.retries
    return RetryPolicy(max_attempts=r.max_attempts, base_backoff=r.base_backoff,
                       max_backoff=r.max_backoff, jitter=r.jitter,
                       statuses=frozenset(r.statuses), retry_after_cap=r.retry_after_cap,
                       max_total_delay=r.max_total_delay,
                       retry_non_idempotent=r.non_idempotent)


class Upstreams:
    """The open upstream clients, in configuration order, the routing over them, and
    how requests authenticate to them. One per app (its balancer is not thread-safe:
    it lives on the app's event loop)."""

    def __init__(self, clients: Sequence[UpstreamClient], *, use_own_key: bool,
                 routing: RoutingConfig | None = None, rng: Random | None = None,
                 clock: Clock = time.monotonic) -> None:
        routing = routing or RoutingConfig()
        self.clients = list(clients)
        self.use_own_key = use_own_key
        """Gateway-keys mode: each upstream's own key replaces the client's credentials."""
        self._by_name = {c.config.name: c for c in self.clients}
        h = routing.health
        self.balancer = Balancer(
            list(self._by_name),
            {name: PoolSpec(tuple(Member(m.upstream, m.weight) for m in p.members), p.strategy)
             for name, p in routing.pools.items()},
            health=HealthPolicy(failure_threshold=h.failure_threshold, cooldown=h.cooldown,
                                max_cooldown=h.max_cooldown, growth=h.growth, panic=h.panic),
            clock=clock)
        self._pools = [(name, p.models) for name, p in routing.pools.items()]
        self.fallbacks = Fallbacks(
            [FallbackRule(f.model, tuple(Target(t.name, t.model) for t in f.targets))
             for f in routing.fallbacks], self.balancer)
        self.retry = retry_policy(routing)
        self._rng: Random = rng or random.random
        self._targets: dict[str, tuple[Target, ...]] = {}

    def __iter__(self) -> Iterator[UpstreamClient]:
        return iter(self.clients)

    def __len__(self) -> int:
        return len(self.clients)

    def client(self, name: str) -> UpstreamClient:
        """The client of upstream ``name`` (a name the balancer handed out)."""
        return self._by_name[name]

    # ---- routing --------------------------------------------------------------------------

    def targets(self, model: str) -> tuple[Target, ...]:
        """The model's pool (or upstream), then its fallbacks; else :class:`ModelNotFound`."""
        found = self._targets.get(model)
        if found is not None:
            return found
        primary: str | None = None
        for name, globs in self._pools:
            if any(fnmatch.fnmatchcase(model, g) for g in globs):
                primary = name
                break
        else:
            for client in self.clients:
                if client.config.matches(model):
                    primary = client.config.name
                    break
        if primary is None:
            raise ModelNotFound(f"The model '{model}' does not exist or no upstream serves it.",
                                param="model")
        found = (Target(primary), *self.fallbacks.chain(model))
        if len(self._targets) >= _CACHE_LIMIT:
            self._targets.clear()
        self._targets[model] = found
        return found

    def route(self, model: str) -> UpstreamClient:
        """The first upstream serving ``model`` (of its pool, if it has one), else
        :class:`ModelNotFound` (404)."""
        return self._by_name[self.balancer.members(self.targets(model)[0].pool)[0].upstream]

    def routes_to(self, model: str, client: UpstreamClient) -> bool:
        """Whether ``client`` is one of the upstreams ``model`` is first sent to."""
        try:
            pool = self.targets(model)[0].pool
        except ModelNotFound:
            return False
        return any(m.upstream == client.config.name for m in self.balancer.members(pool))

    def default(self) -> UpstreamClient:
        """The first upstream (a request whose model is unknown goes there)."""
        if not self.clients:
            raise ModelNotFound("no upstream is configured")
        return self.clients[0]

    def model_blind(self) -> bool:
        """Whether every model routes to the first upstream (a ``*`` in its ``models``,
        and no pool that would take a model elsewhere)."""
        return bool(self.clients) and not self._pools and "*" in self.clients[0].config.models

    # ---- one request ----------------------------------------------------------------------

    def plan(self, model: str, *, method: str = "POST", path: str = "/chat/completions",
             replayable: bool = True, targets: Sequence[Target] | None = None,
             stateless: bool = False) -> AttemptPlan:
        """The attempt plan of one request for ``model`` (``path`` below ``/v1``).

        ``replayable``: its body can be sent twice (a streamed upload cannot: it is
        never retried). ``targets``: where to send it instead of the model's own.
        ``stateless``: the body asks the upstream to store nothing (``store: false``).
        A ``retry-after`` over the cap opens the circuit for everyone only when the
        gateway's own key was used (in forward mode it is one client's limit)."""
        state = RetryState(self.retry, self._rng,
                           retryable=replayable and retryable_request(
                               method, path, self.retry, stateless=stateless))
        return AttemptPlan(self.balancer, targets if targets is not None else self.targets(model),
                           model, state, hold_off=self.use_own_key)

    def single(self, client: UpstreamClient) -> tuple[Target, ...]:
        """The targets of a request that can only go to ``client`` (no model to route by)."""
        return (Target(client.config.name),)

    # ---- health ---------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        return self.balancer.snapshot()

    def health_gauges(self) -> list[tuple[str, int, int]]:
        """(upstream, state value — 0 closed, 1 half-open, 2 open — in flight) per upstream."""
        return [(u.upstream, STATE_VALUES[u.state], u.in_flight)
                for u in self.balancer.snapshot().upstreams]

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()
