"""``gateway serve`` as a process: configuration and startup errors are one clear
message on stderr and exit status 2, never a traceback (docs/configuration.md)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

UPSTREAM = 'upstreams: [{name: a, base_url: "http://127.0.0.1:9/v1"}]\n'


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OTEL_"))}
    env.update(extra)
    return env


def serve(*args: str, env: dict[str, str] | None = None,
          timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", "serve", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else _env())


def config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "gateway.yaml"
    path.write_text(UPSTREAM + f"audit: {{path: {tmp_path / 'audit.jsonl'}}}\n" + text,
                    encoding="utf-8")
    return str(path)


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_unset_key_env_is_a_config_error(tmp_path: Path) -> None:
    cfg = config(tmp_path, "auth: {keys: [{name: k, tenant: t, key_env: VERITY_UNSET_KEY_X}]}\n")
    r = serve("--config", cfg, "--port", "0", env=_env())
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith("gateway: invalid configuration (")
    assert f"  auth.keys.0.key_env: environment variable VERITY_UNSET_KEY_X (gateway key 'k') " \
           f"is not set or empty (in {cfg})" in r.stderr


@pytest.mark.parametrize("how, named", [
    ("file", "port: set in {cfg}"),
    ("env", "port: set by GATEWAY_PORT"),
    ("flag", "port: set by --port"),
])
def test_port_in_use_is_a_clear_error_before_ready(tmp_path: Path, busy_port: int, how: str,
                                                   named: str) -> None:
    cfg = config(tmp_path, f"port: {busy_port}\n" if how == "file" else "")
    env = _env(GATEWAY_PORT=str(busy_port)) if how == "env" else _env()
    flags = ["--port", str(busy_port)] if how == "flag" else []
    r = serve("--config", cfg, "--policies", str(tmp_path), *flags, env=env)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "gateway ready" not in r.stderr
    assert f"gateway: cannot listen on 127.0.0.1:{busy_port}: " in r.stderr
    assert named.format(cfg=cfg) in r.stderr
    assert "host: default" in r.stderr


def test_duplicate_key_in_config_is_an_error(tmp_path: Path) -> None:
    cfg = config(tmp_path, "port: 0\nport: 1\n")
    r = serve("--config", cfg)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert f"port: duplicate key (YAML would keep only the last one) (in {cfg}, line 4)" \
        in r.stderr


def test_list_item_env_var_says_lists_are_set_whole(tmp_path: Path) -> None:
    r = serve("--config", config(tmp_path, ""), env=_env(GATEWAY_UPSTREAMS__0__NAME="b"))
    assert r.returncode == 2, r.stderr
    assert "valid tuple" not in r.stderr
    assert "upstreams: a list is set whole" in r.stderr
    assert "(from GATEWAY_UPSTREAMS__0__NAME)" in r.stderr


def test_policies_that_is_a_file_is_reported_as_not_a_directory(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("", encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--config", config(tmp_path, "port: 0\n"),
         "--policies", str(afile)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=_env())
    lines: list[str] = []
    assert proc.stderr is not None
    stream = proc.stderr
    reader = threading.Thread(target=lambda: lines.extend(stream), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 20
        while not any("gateway ready" in line for line in lines):
            assert proc.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        reader.join(5)
        stream.close()
    text = "".join(lines)
    assert f"policies directory {afile} is not a directory" in text
    assert "does not exist" not in text
