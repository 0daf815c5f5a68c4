"""The fleet settings: ``server.workers``, ``shadow.runner`` and ``redis.*``."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.settings import ConfigError, load_settings


def test_defaults_are_one_process_and_the_local_runner() -> None:
    s = load_settings(environ={})
    assert (s.server.workers, s.shadow.runner, s.redis.url) == (1, "local", None)


def test_the_redis_runner_needs_a_url() -> None:
    with pytest.raises(ConfigError, match="shadow.runner is redis but redis.url is not set"):
        load_settings(environ={"GATEWAY_SHADOW__RUNNER": "redis"})
    s = load_settings(environ={"GATEWAY_SHADOW__RUNNER": "redis",
                               "GATEWAY_REDIS__URL": "redis://r:6379/0"})
    assert s.shadow.runner == "redis" and s.redis.url == "redis://r:6379/0"


@pytest.mark.parametrize(("redis", "message"), [
    ({"url": "http://r:6379"}, "must start with redis://"),
    ({"maxlen": 1000, "max_backlog": 1000}, "max_backlog"),
    ({"max_deliveries": 0}, "max_deliveries"),
])
def test_bad_redis_settings_name_the_key(redis: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(environ={}, overrides={"redis": redis})


def test_workers_are_bounded() -> None:
    with pytest.raises(ConfigError, match="server.workers"):
        load_settings(environ={}, overrides={"server": {"workers": 0}})


def test_the_redis_password_env_is_a_secret_not_config(tmp_path: Path) -> None:
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text('redis: {url: "redis://r/0", password_env: GATEWAY_REDIS_PASSWORD}\n',
                   encoding="utf-8")
    s = load_settings(cfg, environ={"GATEWAY_REDIS_PASSWORD": "s3cret: {"})
    assert s.redis.password_env == "GATEWAY_REDIS_PASSWORD"
