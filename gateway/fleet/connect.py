"""The Redis client of fleet mode, from the settings.

``redis`` (redis-py, its asyncio client) is an optional dependency:
``pip install 'verity-gateway[redis]'``. Without it, fleet mode fails at start with
:class:`FleetUnavailable` saying so — never at the first job.

The password comes from the environment variable ``redis.password_env`` names, never
from the config file or the URL as written in it. Commands are bounded by
``redis.timeout`` (connect and each reply) and never retried by the client: a relay
sheds what it cannot publish at once, and a worker's loops retry on their own clock.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gateway.settings import RedisConfig

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["FleetUnavailable", "RedisError", "open_redis", "redis_errors"]


class FleetUnavailable(RuntimeError):
    """Fleet mode cannot start (the ``redis`` package is missing, no URL)."""


class RedisError(Exception):
    """Stand-in base when ``redis`` is not installed (nothing raises it)."""


def redis_errors() -> tuple[type[BaseException], ...]:
    """What a Redis call may raise for a connection, timeout or server error."""
    try:
        from redis.exceptions import RedisError as Base
    except ImportError:
        Base = RedisError  # type: ignore[assignment,misc]
    return (Base, OSError, TimeoutError)


def open_redis(config: RedisConfig, *, read_timeout: float | None = None,
               environ: Mapping[str, str] | None = None) -> Redis:
    """An asyncio Redis client for ``config`` (connections are opened on first use).

    ``read_timeout``: seconds to wait for a reply (default ``config.timeout``); a
    worker's blocking reads need more than their block time."""
    if not config.url:
        raise FleetUnavailable("redis.url is not set")
    try:
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
    except ImportError:
        raise FleetUnavailable(
            "shadow.runner: redis needs the redis package: "
            "pip install 'verity-gateway[redis]'") from None
    env = os.environ if environ is None else environ
    kwargs: dict[str, Any] = {}
    if config.password_env:
        password = env.get(config.password_env)
        if not password:
            raise FleetUnavailable(f"redis.password_env: environment variable "
                                   f"{config.password_env} is not set or empty")
        kwargs["password"] = password
    client: Redis = Redis.from_url(
        config.url, socket_timeout=read_timeout or config.timeout,
        socket_connect_timeout=config.timeout, retry=Retry(NoBackoff(), 0),
        decode_responses=False, client_name="verity-gateway", **kwargs)
    return client
