"""Fallback chains and the per-request attempt plan: retries × pools × fallbacks. Pure.

- :class:`Target` — a pool (or a single upstream: each is a pool of one) with an
  optional model rewrite.
- :class:`Fallbacks` — ordered fallback targets per model-name glob (first matching
  rule wins; ``fnmatchcase``, like ``upstreams[].models``).
- :class:`AttemptPlan` — one request's walk over ``[primary, *fallbacks]``: which
  upstream each attempt goes to, with which model, after how long a wait. It applies
  the rules of :mod:`gateway.upstream.retry` and settles each attempt's
  :class:`~gateway.upstream.balancer.Lease` with the balancer.

How the next upstream is chosen after a retryable failure:

1. an upstream this request has not asked yet, and that is available (closed, or
   half-open with no probe out), searching the targets in order — the rest of the
   primary pool first, then each fallback — asked at once, with no delay;
2. else, if the decision allows revisits, an available upstream already asked
   (targets in order), after the backoff delay (or the ``retry-after``, if longer) —
   the panic pick when none is available (every one open: a lone upstream that has
   just opened is still retried, as it would be without health checks);
3. else none: the caller answers with the last failure.

The first attempt takes the first available upstream in target order; when none is
(every one open), the panic pick of the first target that has one
(:meth:`Balancer.pick`), else there is no attempt (answer 503).

Usage (the wiring; ``send`` and ``sleep`` are the caller's)::

    plan = AttemptPlan(balancer, [primary, *fallbacks.chain(model)], model,
                       RetryState(policy, rng, retryable=retryable_request(m, path, policy)))
    attempt = plan.first()            # None: nothing to call (503)
    while attempt is not None:
        await sleep(attempt.delay)
        ... send to attempt.upstream with attempt.model ...
        on success: attempt.lease.succeeded() (a stream: when it ends); done
        on failure: attempt = plan.failed(failure)   # None: give the client this failure
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.upstream.balancer import Balancer, Lease
from gateway.upstream.retry import Decision, Failure, RetryState

__all__ = ["Attempt", "AttemptPlan", "FallbackRule", "Fallbacks", "Target"]


@dataclass(frozen=True, slots=True)
class Target:
    pool: str
    """A pool name, or an upstream name (a pool of one)."""
    model: str | None = None
    """The model to ask it for instead of the requested one."""


@dataclass(frozen=True, slots=True)
class FallbackRule:
    pattern: str
    """A model-name glob."""
    targets: tuple[Target, ...]


class Fallbacks:
    """Ordered fallback chains per model pattern; the first rule matching wins."""

    def __init__(self, rules: Sequence[FallbackRule], balancer: Balancer | None = None) -> None:
        """``balancer``: check now that every target names a known pool (a config error
        at load time, not a KeyError on the first failure)."""
        if balancer is not None:
            for rule in rules:
                for t in rule.targets:
                    if t.pool not in balancer:
                        raise ValueError(f"fallback for {rule.pattern!r} names unknown "
                                         f"upstream or pool {t.pool!r}")
        self._rules = tuple(rules)

    def chain(self, model: str) -> tuple[Target, ...]:
        for rule in self._rules:
            if fnmatch.fnmatchcase(model, rule.pattern):
                return rule.targets
        return ()


@dataclass(frozen=True, slots=True)
class Attempt:
    number: int
    """1 for the first call of the request."""
    lease: Lease
    model: str
    target: int
    """Index in the plan's targets: 0 the primary, >0 a fallback."""
    delay: float = 0.0
    """Seconds to wait before sending."""

    @property
    def upstream(self) -> str:
        return self.lease.upstream

    @property
    def fallback(self) -> bool:
        return self.target > 0


class AttemptPlan:
    """One request's attempts over ``targets`` (primary first). Not shared."""

    def __init__(self, balancer: Balancer, targets: Sequence[Target], model: str,
                 retry: RetryState, *, hold_off: bool = True) -> None:
        """``hold_off``: let a ``retry-after`` over the cap open that upstream's circuit
        for everyone (right when the gateway's own key was used; in forward mode a 429
        is one client's, so pass False)."""
        if not targets:
            raise ValueError("a plan needs at least one target")
        self.balancer = balancer
        self.targets = tuple(targets)
        self.model = model
        self.retry = retry
        self.hold_off = hold_off
        self.tried: list[str] = []
        """Upstreams asked, in order (repeats included)."""
        self.current: Attempt | None = None
        self.decisions: list[Decision] = []

    def first(self) -> Attempt | None:
        """The first attempt, or None when no upstream can be asked (all open and no
        panic pick)."""
        if self.current is not None:
            raise RuntimeError("first() was already called")
        found = self._find(exclude=(), allow_panic=False)
        if found is None:
            for i, t in enumerate(self.targets):
                lease = self.balancer.pick(t.pool, allow_panic=True)
                if lease is not None:
                    found = (i, lease)
                    break
        return self._attempt(found, 0.0)

    def failed(self, failure: Failure) -> Attempt | None:
        """Settle the current attempt as ``failure`` and return the next, or None."""
        cur = self.current
        if cur is None:
            raise RuntimeError("no attempt in progress")
        decision = self.retry.after(failure)
        self.decisions.append(decision)
        if failure.upstream_fault:
            cur.lease.failed(hold_off=decision.hold_off if self.hold_off else None)
        else:
            cur.lease.released()
        self.current = None
        if not decision.retry:
            return None
        found = self._find(exclude=set(self.tried), allow_panic=False)
        if found is not None:
            return self._attempt(found, 0.0)
        if not decision.revisit:
            return None
        # Going back may take the panic pick: an upstream alone in its pool that has just
        # opened is still retried after the backoff, as it is without health checks.
        found = self._find(exclude=(), allow_panic=True)
        if found is None:
            return None
        self.retry.revisit(decision.delay)
        return self._attempt(found, decision.delay)

    def _find(self, *, exclude: Sequence[str] | set[str],
              allow_panic: bool) -> tuple[int, Lease] | None:
        for i, t in enumerate(self.targets):
            lease = self.balancer.pick(t.pool, exclude=exclude, allow_panic=allow_panic)
            if lease is not None:
                return i, lease
        return None

    def _attempt(self, found: tuple[int, Lease] | None, delay: float) -> Attempt | None:
        if found is None:
            return None
        i, lease = found
        number = self.retry.started()
        self.tried.append(lease.upstream)
        self.current = Attempt(number, lease, self.targets[i].model or self.model, i, delay)
        return self.current
