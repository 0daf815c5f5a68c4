"""The Redis client from the settings, and ``gateway worker``'s refusals: nothing here
talks to a server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from gateway.fleet.connect import FleetUnavailable, open_redis
from gateway.settings import RedisConfig

pytest.importorskip("redis", reason="the redis package is not installed")


def test_the_password_comes_from_the_named_environment_variable() -> None:
    config = RedisConfig(url="redis://r:6379/0", password_env="REDIS_PW")
    with pytest.raises(FleetUnavailable, match="REDIS_PW is not set"):
        open_redis(config, environ={})
    client = open_redis(config, environ={"REDIS_PW": "pw"})
    try:
        kwargs = client.connection_pool.connection_kwargs
        assert kwargs["password"] == "pw" and kwargs["socket_timeout"] == config.timeout
    finally:
        asyncio.run(client.aclose())


def test_no_url_is_refused() -> None:
    with pytest.raises(FleetUnavailable, match="redis.url"):
        open_redis(RedisConfig())


def test_gateway_worker_without_redis_is_a_usage_error() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OTEL_"))}
    done = subprocess.run([sys.executable, "-m", "gateway", "worker"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "no Redis to read jobs from" in done.stderr and "Traceback" not in done.stderr
