"""``--upstream-key-env`` in forward mode (issue 10, item 8).

Forward mode (no gateway keys) sends each client's own key upstream; the flag was
silently ignored there, so an operator who passed it believed the gateway used its
key. Honouring it would be worse: anyone who can reach the port would spend the
operator's key. ``gateway serve`` (a real process) refuses the flag there — one clear
line on stderr, exit status 2, nothing started — and honours it with gateway keys.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest

UPSTREAM_KEY = "sk-upstream-operator-key-7731"
GATEWAY_KEY = "gw-tenant-a-key-0042"
KEY_ENV = "VERITY_TEST_UPSTREAM_KEY"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OTEL_"))}
    env.update(extra)
    return env


@contextmanager
def serve(*args: str, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[str], list[str],
                                                              str | None]]:
    """``gateway serve`` as a process: yields (process, stderr lines, base URL or None
    when it exited before listening)."""
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--port", "0", *args],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            env=env)
    assert proc.stderr is not None
    stream = proc.stderr
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(stream), daemon=True)
    reader.start()
    url = None
    try:
        deadline = time.monotonic() + 30
        while proc.poll() is None and not any("gateway ready" in line for line in lines):
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.05)
        if proc.poll() is None:
            listening = next(line for line in lines if "listening on " in line)
            url = "http://" + listening.rsplit("listening on ", 1)[1].strip() + "/v1"
        yield proc, lines, url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        reader.join(5)
        stream.close()


def test_forward_mode_refuses_the_flag(upstream: Any, tmp_path: Path,
                                       make_client: Callable[..., openai.OpenAI]) -> None:
    env = _env(**{KEY_ENV: UPSTREAM_KEY})
    with serve("--upstream", upstream.base_url, "--upstream-key-env", KEY_ENV,
               "--policies", str(tmp_path), env=env) as (proc, lines, url):
        if url is not None:  # it started: what would a client's request carry upstream?
            make_client(url).models.list()
            sent = upstream.last("/v1/models")["headers"].get("authorization")
            pytest.fail(f"gateway started in forward mode with --upstream-key-env; "
                        f"upstream got {sent!r}")
    text = "".join(lines)
    assert proc.returncode == 2, text
    assert "Traceback" not in text and "gateway ready" not in text
    assert text.startswith("gateway: --upstream-key-env")
    assert "forward mode" in text and "auth.keys" in text
    assert UPSTREAM_KEY not in text
    assert upstream.requests == []


@pytest.mark.parametrize("args, why", [
    (["--upstream-key-env", KEY_ENV], "needs --upstream"),  # it was ignored silently
    (["--upstream", "http://127.0.0.1:9/v1", "--upstream-key-env", "VERITY_UNSET_X"],
     "environment variable VERITY_UNSET_X is not set or empty"),
])
def test_a_flag_that_would_do_nothing_is_an_error(tmp_path: Path, args: list[str],
                                                   why: str) -> None:
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text('upstreams: [{name: a, base_url: "http://127.0.0.1:9/v1"}]\n'
                   f"audit: {{path: {tmp_path / 'audit.jsonl'}}}\n"
                   "auth: {keys: [{name: a, tenant: a, key: " + GATEWAY_KEY + "}]}\n")
    with serve("--config", str(cfg), *args, env=_env(**{KEY_ENV: UPSTREAM_KEY})) as (
            proc, lines, url):
        assert url is None, "".join(lines)
    text = "".join(lines)
    assert proc.returncode == 2 and "Traceback" not in text, text
    assert text.startswith("gateway: --upstream-key-env") and why in text, text


def test_gateway_keys_mode_sends_the_flags_key(upstream: Any, tmp_path: Path,
                                               make_client: Callable[..., openai.OpenAI]
                                               ) -> None:
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text(f"audit: {{path: {tmp_path / 'audit.jsonl'}}}\n"
                   "auth: {keys: [{name: a, tenant: a, key: " + GATEWAY_KEY + "}]}\n")
    with serve("--config", str(cfg), "--upstream", upstream.base_url,
               "--upstream-key-env", KEY_ENV, "--policies", str(tmp_path),
               env=_env(**{KEY_ENV: UPSTREAM_KEY})) as (proc, lines, url):
        assert url is not None, "".join(lines)
        answer = make_client(url, api_key=GATEWAY_KEY).chat.completions.create(
            model="scripted-small", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content == "You said: hi"
    assert upstream.last("/v1/chat/completions")["headers"]["authorization"] == \
        f"Bearer {UPSTREAM_KEY}"
    assert UPSTREAM_KEY not in "".join(lines)
