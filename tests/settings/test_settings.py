"""Configuration: file, GATEWAY_* environment and overrides; strict, errors name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.settings import ConfigError, Settings, load_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults() -> None:
    s = load_settings(environ={})
    assert s == Settings()
    assert (s.host, s.port, s.upstreams, s.auth.keys) == ("127.0.0.1", 8080, (), ())
    assert s.max_body_bytes == 16 * 1024 * 1024


def test_file_then_env_then_overrides(tmp_path: Path) -> None:
    cfg = write(tmp_path, """
host: 0.0.0.0
port: 9000
log_level: debug
shadow: {queue_size: 50, concurrency: 2}
upstreams:
  - {name: a, base_url: "http://a.test/v1/", models: ["gpt-*"], timeouts: {read: 30}}
""")
    s = load_settings(cfg, environ={"GATEWAY_PORT": "9100", "GATEWAY_SHADOW__QUEUE_SIZE": "7"})
    assert (s.host, s.port, s.log_level) == ("0.0.0.0", 9100, "debug")
    assert (s.shadow.queue_size, s.shadow.concurrency) == (7, 2)  # merged, not replaced
    (up,) = s.upstreams
    assert (up.base_url, up.models, up.timeouts.read, up.timeouts.connect) == \
        ("http://a.test/v1", ("gpt-*",), 30.0, 10.0)
    s = load_settings(cfg, environ={"GATEWAY_PORT": "9100"}, overrides={"port": 9200,
                                                                         "host": None})
    assert (s.host, s.port) == ("0.0.0.0", 9200)


def test_config_file_from_env(tmp_path: Path) -> None:
    cfg = write(tmp_path, "port: 9300\n")
    assert load_settings(environ={"GATEWAY_CONFIG": str(cfg)}).port == 9300


def test_env_upstream_shortcut_and_flow_list() -> None:
    s = load_settings(environ={"GATEWAY_UPSTREAM": "http://one.test/v1"})
    assert [(u.name, u.base_url, u.models) for u in s.upstreams] == \
        [("default", "http://one.test/v1", ("*",))]
    s = load_settings(environ={"GATEWAY_UPSTREAMS":
                               "[{name: a, base_url: 'http://a/v1', models: [x-*]},"
                               " {name: b, base_url: 'http://b/v1'}]"})
    assert [u.name for u in s.upstreams] == ["a", "b"]
    assert s.route("x-1") is s.upstreams[0] and s.route("y") is s.upstreams[1]


def test_file_error_names_dotted_key_and_file(tmp_path: Path) -> None:
    cfg = write(tmp_path, """
upstreams:
  - name: a
    base_url: http://a/v1
    timeouts: {read: -1, bogus: 2}
""")
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, environ={})
    msg = str(info.value)
    assert f"upstreams.0.timeouts.read: Input should be greater than 0 (in {cfg})" in msg
    assert f"upstreams.0.timeouts.bogus: unknown key (in {cfg})" in msg


def test_env_error_names_key_and_variable(tmp_path: Path) -> None:
    cfg = write(tmp_path, "port: 9000\n")
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, environ={"GATEWAY_PORT": "eighty", "GATEWAY_SHADOW__QUEUE_SIZE": "0",
                                    "GATEWAY_PROT": "1"})
    msg = str(info.value)
    assert "GATEWAY_* environment" in msg
    assert "port: Input should be a valid integer" in msg and "(from GATEWAY_PORT)" in msg
    assert "shadow.queue_size: Input should be greater than or equal to 1 " \
           "(from GATEWAY_SHADOW__QUEUE_SIZE)" in msg
    assert "prot: unknown key (from GATEWAY_PROT)" in msg


@pytest.mark.parametrize("environ", [
    {"GATEWAY_SHADOW": "{queue_size: 5}", "GATEWAY_SHADOW__CONCURRENCY": "2"},
    {"GATEWAY_SHADOW__CONCURRENCY": "2", "GATEWAY_SHADOW": "{queue_size: 5}"},
    {"GATEWAY_UPSTREAM": "http://a/v1", "GATEWAY_UPSTREAMS": "[{name: b, base_url: 'http://b/v1'}]"},
    {"GATEWAY_UPSTREAMS": "[{name: b, base_url: 'http://b/v1'}]", "GATEWAY_UPSTREAM": "http://a/v1"},
])
def test_env_variables_setting_the_same_key_are_an_error(environ: dict[str, str]) -> None:
    # Whichever came last in the environment used to win silently, or (a section set
    # whole, then one of its keys) crash with a TypeError instead of a ConfigError.
    with pytest.raises(ConfigError) as info:
        load_settings(environ=environ)
    msg = str(info.value)
    assert all(name in msg for name in environ), msg


@pytest.mark.parametrize("text, needle", [
    ("upstreams: [{name: a, base_url: 'ftp://a'}]", "upstreams.0.base_url: Value error, must "
                                                    "start with http:// or https://"),
    ("upstreams: [{name: a}]", "upstreams.0.base_url: Field required"),
    ("max_body_bytes: 10", "max_body_bytes: Input should be greater than or equal to 1024"),
    ("log_level: loud", "log_level: Input should be"),
    ("auth: {keys: [{name: k, tenant: t}]}", "auth.keys.0: Value error, give exactly one of"),
    ("colour: blue", "colour: unknown key"),
])
def test_validation_errors(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match="invalid configuration") as info:
        load_settings(write(tmp_path, text), environ={})
    assert needle in str(info.value)


def test_duplicate_upstream_names(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="names must be unique"):
        load_settings(write(tmp_path, "upstreams: [{name: a, base_url: 'http://a'}, "
                                      "{name: a, base_url: 'http://b'}]"), environ={})


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(tmp_path / "missing.yaml", environ={})
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(write(tmp_path, "port: [1,"), environ={})
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_settings(write(tmp_path, "- 1\n"), environ={})
    with pytest.raises(ConfigError, match="environment GATEWAY_PORT: not a valid value"):
        load_settings(environ={"GATEWAY_PORT": "[1,"})


def test_secret_env_vars_named_by_the_config_are_not_config(tmp_path: Path) -> None:
    cfg = write(tmp_path, """
auth: {keys: [{name: team-a, tenant: a, key_env: GATEWAY_KEY_TEAM_A}]}
upstreams: [{name: u, base_url: "http://u/v1", api_key_env: GATEWAY_UPSTREAM_KEY}]
""")
    env = {"GATEWAY_KEY_TEAM_A": "gw-secret", "GATEWAY_UPSTREAM_KEY": "sk-up: not yaml: {"}
    s = load_settings(cfg, environ=env)
    assert s.auth.keys[0].key_env == "GATEWAY_KEY_TEAM_A"
    assert s.upstreams[0].api_key_env == "GATEWAY_UPSTREAM_KEY"


def test_secret_values_never_appear_in_errors(tmp_path: Path) -> None:
    cfg = write(tmp_path, "auth: {keys: [{name: k, tenant: t, key: gw-inline-secret}]}\n"
                          "port: -1\n")
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, environ={})
    assert "gw-inline-secret" not in str(info.value)
    assert "gw-inline-secret" not in repr(load_settings(
        write(tmp_path, "auth: {keys: [{name: k, tenant: t, key: gw-inline-secret}]}\n"),
        environ={}))


# ---- QA: messages that say what is expected; duplicate keys; key_env at load ------------


@pytest.mark.parametrize("text, needle", [
    ("upstreams: [{name: a, base_url: 'http://a/v1', models: gpt-*}]",
     'upstreams.0.models: expected a list of globs, e.g. ["gpt-*"]'),
    ("upstreams: http://a/v1", "upstreams: expected a list of upstreams, e.g. "),
    ("auth: {keys: {name: k}}", "auth.keys: expected a list of keys, e.g. "),
])
def test_list_keys_say_a_list_is_expected(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, text), environ={})
    assert needle in str(info.value)
    assert "valid tuple" not in str(info.value)


@pytest.mark.parametrize("name, key", [
    ("GATEWAY_UPSTREAMS__0__NAME", "upstreams"),
    ("GATEWAY_UPSTREAMS__NAME", "upstreams"),
    ("GATEWAY_AUTH__KEYS__0__KEY_ENV", "auth.keys"),
])
def test_env_list_items_say_lists_are_set_whole(name: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(environ={name: "x"})
    msg = str(info.value)
    assert msg.startswith("invalid configuration (GATEWAY_* environment):")
    assert f"  {key}: a list is set whole, as one YAML value" in msg
    assert f"(from {name})" in msg and "valid tuple" not in msg


def test_duplicate_keys_in_the_file_are_an_error(tmp_path: Path) -> None:
    cfg = write(tmp_path, "port: 9000\nshadow: {queue_size: 1, queue_size: 2}\nport: 9001\n")
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, environ={})
    msg = str(info.value)
    assert msg.startswith(f"invalid configuration ({cfg}):")
    assert f"  shadow.queue_size: duplicate key (YAML would keep only the last one) " \
           f"(in {cfg}, line 2)" in msg
    assert f"  port: duplicate key (YAML would keep only the last one) (in {cfg}, line 3)" in msg


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not valid YAML: line 2: "):
        load_settings(write(tmp_path, "port: 1\nhost: a: b\n"), environ={})


def test_check_secrets_requires_key_env_set(tmp_path: Path) -> None:
    cfg = write(tmp_path, "auth: {keys: [{name: a, tenant: t, key: inline},"
                          " {name: b, tenant: t, key_env: UNSET_KEY_X}]}\n")
    load_settings(cfg, environ={})  # not checked unless asked (tests, tools)
    for environ in ({}, {"UNSET_KEY_X": ""}):
        with pytest.raises(ConfigError) as info:
            load_settings(cfg, environ=environ, check_secrets=True)
        assert str(info.value) == (
            f"invalid configuration (defaults < {cfg}):\n"
            f"  auth.keys.1.key_env: environment variable UNSET_KEY_X (gateway key 'b') "
            f"is not set or empty (in {cfg})")
    s = load_settings(cfg, environ={"UNSET_KEY_X": "gw-x"}, check_secrets=True)
    assert s.auth.keys[1].key_env == "UNSET_KEY_X"


def test_origins_of_top_level_keys(tmp_path: Path) -> None:
    cfg = write(tmp_path, "port: 9000\nhost: 0.0.0.0\n")
    origins: dict[str, str] = {}
    load_settings(cfg, environ={"GATEWAY_HOST": "localhost"}, overrides={"policies_dir": "p"},
                  origins=origins)
    assert origins == {"port": f"in {cfg}", "host": "from GATEWAY_HOST",
                       "policies_dir": "from the command line"}
