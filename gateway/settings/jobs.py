"""Where verification jobs run: the shadow queue (:class:`ShadowConfig`), the relay's
worker processes (:class:`PoolConfig`, ``gateway.pool``) and the Redis Stream to
``gateway worker`` s (:class:`RedisConfig`, ``gateway.fleet``). Part of the schema:
re-exported by :mod:`gateway.settings.schema` and :mod:`gateway.settings`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["PoolConfig", "RedisConfig", "ShadowConfig"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ShadowConfig(_Strict):
    queue_size: int = Field(1000, ge=1)
    concurrency: int = Field(4, ge=1)
    """Background jobs running at once (with worker processes: jobs handed to the
    pool at once, at least ``pool.workers``)."""
    drain_seconds: float = Field(10.0, ge=0)
    runner: Literal["local", "redis"] = "local"
    """Where shadow and candidate jobs run: ``local`` in this gateway; ``redis``
    published to the ``redis.stream`` for ``gateway worker`` s (``gateway.fleet``)."""


class RedisConfig(_Strict):
    """The Redis Stream that carries verification jobs to ``gateway worker`` s
    (``shadow.runner: redis``; ``gateway.fleet``)."""

    url: str | None = None
    """``redis://host:6379/0`` (``rediss://`` for TLS); no password in it: see
    ``password_env``."""
    password_env: str | None = None
    """Environment variable holding the Redis password (AUTH)."""
    stream: str = Field("verity:jobs", min_length=1, max_length=200)
    group: str = Field("verity-workers", min_length=1, max_length=200)
    maxlen: int = Field(100_000, ge=100)
    """Entries the stream keeps at most (approximate trim on publish): the memory bound.
    Workers trim what every consumer acknowledged well before it."""
    max_backlog: int = Field(50_000, ge=1)
    """Jobs published but not yet acknowledged above which a relay sheds new jobs (checked
    every second); below ``maxlen``, so trimming never drops a job not yet verified."""
    buffer: int = Field(1000, ge=1)
    """Jobs a relay holds while publishing; more are shed (counted) — never a wait."""
    timeout: float = Field(1.0, gt=0)
    """Seconds per Redis command (connect, publish); a relay past it sheds the batch."""
    max_job_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    """Largest encoded job published; a larger one is shed (counted) and recorded."""
    claim_idle_seconds: float = Field(30.0, gt=0)
    """A job delivered to a worker and not acknowledged for this long is claimed by
    another (its worker is presumed dead)."""
    max_deliveries: int = Field(5, ge=1)
    """Deliveries of one job at most; then it is recorded as failed (a poison job)."""
    job_timeout: float = Field(60.0, gt=0)
    """Seconds a worker spends on one job at most; then it is recorded as failed."""

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return v

    @model_validator(mode="after")
    def _backlog_below_maxlen(self) -> RedisConfig:
        if self.max_backlog >= self.maxlen:
            raise ValueError(f"max_backlog ({self.max_backlog}) must be below maxlen "
                             f"({self.maxlen}): trimming must never reach unverified jobs")
        return self


class PoolConfig(_Strict):
    """Where verification runs (``gateway.pool``): worker processes, or the relay's
    own event loop."""

    workers: int | None = Field(None, ge=0, le=256)
    """Verification worker processes. None: the cores the relay does not need,
    ``max(1, cpus - 1)`` (the CPUs this process may run on); 0: none — every job
    runs on the relay's event loop, as before the pool (tests, embedding)."""
    nice: int = Field(10, ge=0, le=19)
    """Added to the workers' niceness: under CPU contention the relay goes first, and
    the shadow sample sheds instead of clients slowing down."""
    sched_idle: bool = True
    """Background jobs (shadow, candidates) run in the ``SCHED_IDLE`` scheduling class
    (Linux): on CPU time no normal process wants, so verification never takes a core
    from the relay, nor from an upstream or clients sharing the box; under full CPU
    load the sample waits in the queue and sheds (``full``) instead. Calls a request
    awaits (inline verification, a body parse) stay in the normal class at ``nice``.
    Where the OS lacks the class, or the worker may not leave it again (no
    ``CAP_SYS_NICE`` / ``RLIMIT_NICE``): ``nice`` alone (``gateway.pool.sched.Scheduling``)."""
    inline_min_bytes: int | None = Field(65536, ge=0)
    """An inline verification whose request messages plus answer are at least this
    large (characters) runs in a worker, the request awaiting it; smaller ones stay on
    the event loop (cheaper than the round trip). 0: every one; None: never."""
    grace_ms: int = Field(250, ge=0)
    """A job still running ``budget.total_ms`` + this after it started is abandoned by
    the relay (recorded so) even if its worker could not stop it (a long C call)."""
    parse_min_bytes: int | None = Field(4 * 1024 * 1024, ge=0)
    """A request body at least this large (bytes) is parsed, and scanned for duplicate
    keys, in an idle worker process, the request awaiting the parsed object: the relay's
    event loop then only unpickles it instead of holding other clients for the parse
    (tens of ms for 10 MB). Smaller bodies, or every worker busy, or no pool
    (``workers: 0``): parsed in the relay. None: never in a worker."""
    relay_busy: float | None = Field(0.9, gt=0, le=1)
    """The relay is saturated when its event loop's thread was running or waiting for
    a CPU this share of the last second or more (``gateway.pool.relay_load``): shadow
    jobs are then handed to the workers at most ``busy_jobs_per_second``, the rest
    shed (``reason: relay_busy``) — handing off costs the relay CPU its clients would
    wait for. None: never (only a full queue sheds)."""
    busy_jobs_per_second: float = Field(10.0, ge=0)
    """Shadow jobs handed off per second at most while the relay is saturated (the
    sample it keeps then); 0: none."""
