"""The ``routing`` section: retries, passive health, pools and fallbacks (strict models).

What each value does is :mod:`gateway.upstream.retry` (retries),
:mod:`gateway.upstream.balancer` (pools, health) and :mod:`gateway.upstream.failover`
(fallbacks); ``docs/configuration.md`` has the keys with examples. Names that refer to
upstreams or pools are checked against the configuration by :func:`routing_errors`
(``load_settings`` reports them with their dotted keys).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["FallbackConfig", "HealthConfig", "MemberConfig", "PoolConfig", "RetryConfig",
           "RoutingConfig", "TargetConfig", "routing_errors"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetryConfig(_Strict):
    """How one client request's upstream calls are retried (times in seconds)."""

    max_attempts: int = Field(3, ge=1, le=10)
    """Upstream calls per client request, the first included, across its pool and its
    fallbacks (1: never retry, never fail over)."""
    base_backoff: float = Field(0.1, ge=0, le=60)
    """Delay before asking an upstream the request already asked, doubled each time."""
    max_backoff: float = Field(2.0, ge=0, le=300)
    jitter: Literal["full", "equal", "none"] = "full"
    statuses: tuple[int, ...] = (429, 500, 502, 503, 504, 529)
    """Upstream statuses that are retried (connect errors and timeouts before the
    response headers always are)."""
    retry_after_cap: float = Field(5.0, ge=0, le=300)
    """A ``retry-after`` up to this long is waited for; a longer one sends the retry to
    another upstream only."""
    max_total_delay: float = Field(10.0, ge=0, le=600)
    """Sleeping between attempts, summed over one request, stays under this."""
    non_idempotent: bool = False
    """Also retry forwarded POST/PATCH routes that are not inference calls (files,
    batches, ``/v1/responses`` …), which a repeat may do twice."""

    @field_validator("statuses", mode="before")
    @classmethod
    def _statuses(cls, value: Any) -> Any:
        if not isinstance(value, (list, tuple)):
            raise ValueError("expected a list of HTTP statuses, e.g. [429, 503]")
        for status in value:
            if not isinstance(status, int) or isinstance(status, bool) \
                    or not 400 <= status <= 599:
                raise ValueError(f"{status!r} is not an HTTP error status (400-599)")
        return value

    @model_validator(mode="after")
    def _order(self) -> RetryConfig:
        if self.max_backoff < self.base_backoff:
            raise ValueError("max_backoff must be >= base_backoff")
        return self


class HealthConfig(_Strict):
    """Passive health per upstream (times in seconds)."""

    failure_threshold: int = Field(3, ge=1, le=1000)
    """Consecutive failed calls (connect, timeout, cut body, 429, 5xx) that open it."""
    cooldown: float = Field(5.0, gt=0, le=3600)
    """How long an opened upstream is skipped before one probe call goes to it."""
    max_cooldown: float = Field(300.0, gt=0, le=86400)
    growth: float = Field(2.0, ge=1, le=100)
    """The cooldown grows this much each time the upstream opens again."""
    panic: bool = True
    """When every member of a pool is open, still call the one that recovers first
    (False: answer 503 at once)."""

    @model_validator(mode="after")
    def _order(self) -> HealthConfig:
        if self.max_cooldown < self.cooldown:
            raise ValueError("max_cooldown must be >= cooldown")
        return self


class MemberConfig(_Strict):
    upstream: str
    weight: int = Field(1, ge=1, le=1_000_000)


class PoolConfig(_Strict):
    """Upstreams that serve the same models, load-balanced."""

    models: tuple[str, ...]
    """Model-name globs this pool serves (checked before ``upstreams[].models``)."""
    members: tuple[MemberConfig, ...]
    strategy: Literal["weighted_round_robin", "least_in_flight"] = "weighted_round_robin"

    @field_validator("models", "members", mode="before")
    @classmethod
    def _list(cls, value: Any) -> Any:
        if not isinstance(value, (list, tuple)) or not value:
            raise ValueError("expected a non-empty list")
        return value

    @model_validator(mode="after")
    def _unique(self) -> PoolConfig:
        names = [m.upstream for m in self.members]
        if len(set(names)) != len(names):
            raise ValueError("members: a pool names each upstream once")
        return self


class TargetConfig(_Strict):
    """One fallback: an upstream or a pool, optionally asked for another model."""

    upstream: str | None = None
    pool: str | None = None
    model: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one(self) -> TargetConfig:
        if (self.upstream is None) == (self.pool is None):
            raise ValueError("give exactly one of 'upstream' or 'pool'")
        return self

    @property
    def name(self) -> str:
        return self.upstream or self.pool or ""


class FallbackConfig(_Strict):
    model: str
    """A model-name glob; the first rule matching a request's model applies."""
    targets: tuple[TargetConfig, ...]
    """Tried in order once the model's own upstreams failed or are unhealthy."""

    @field_validator("targets", mode="before")
    @classmethod
    def _list(cls, value: Any) -> Any:
        if not isinstance(value, (list, tuple)) or not value:
            raise ValueError("expected a non-empty list, e.g. [{upstream: backup}]")
        return value


class RoutingConfig(_Strict):
    retries: RetryConfig = RetryConfig()
    health: HealthConfig = HealthConfig()
    pools: dict[str, PoolConfig] = Field(default_factory=dict)
    """Named pools; a model matching a pool's ``models`` is balanced over its members."""
    fallbacks: tuple[FallbackConfig, ...] = ()

    @field_validator("fallbacks", mode="before")
    @classmethod
    def _list(cls, value: Any) -> Any:
        if not isinstance(value, (list, tuple)):
            raise ValueError('expected a list, e.g. [{model: "gpt-4o*", targets: '
                             '[{upstream: backup}]}]')
        return value


def routing_errors(routing: RoutingConfig, upstreams: Sequence[str]) -> list[str]:
    """Names in ``routing`` that refer to nothing, as ``dotted.key: problem`` lines."""
    known = set(upstreams)
    out: list[str] = []
    for name, pool in routing.pools.items():
        if name in known and [m.upstream for m in pool.members] != [name]:
            out.append(f"routing.pools.{name}: a pool may not take the name of an upstream")
        for i, member in enumerate(pool.members):
            if member.upstream not in known:
                out.append(f"routing.pools.{name}.members.{i}.upstream: no upstream named "
                           f"{member.upstream!r} (known: {', '.join(upstreams) or 'none'})")
    for i, rule in enumerate(routing.fallbacks):
        for j, target in enumerate(rule.targets):
            key = f"routing.fallbacks.{i}.targets.{j}"
            if target.upstream is not None and target.upstream not in known:
                out.append(f"{key}.upstream: no upstream named {target.upstream!r} "
                           f"(known: {', '.join(upstreams) or 'none'})")
            if target.pool is not None and target.pool not in routing.pools:
                out.append(f"{key}.pool: no pool named {target.pool!r} "
                           f"(known: {', '.join(routing.pools) or 'none'})")
    return out
