"""A real ``gateway serve`` process for the fault suite: black box, config file in, HTTP out.

``serve_gateway(directory, config, policies=…, env=…)`` writes ``config`` (JSON, which
is YAML) and the policy files into ``directory``, starts ``python -m gateway serve
--config FILE`` on a port the kernel picks (``port: 0``; the gateway logs where it
listens), waits until it logs ``gateway ready``, and yields a :class:`GatewayProcess`.
Its log (stdout and stderr) is a file, its audit file is ``directory/audit.jsonl``
unless the config says otherwise. On exit the process gets SIGTERM (SIGKILL if it
does not exit within 20 s). ``start_gateway`` + :meth:`GatewayProcess.ready` do the
same in two steps (several processes boot in parallel; the test stops them).
Nothing of the gateway is imported.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = ["GatewayProcess", "free_port", "openai_error", "serve_gateway", "start_gateway"]

_LISTENING = re.compile(rb"listening on ([0-9.]+):([0-9]+)")


def free_port() -> int:
    """A loopback port nothing listens on (an upstream that refuses connections)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def openai_error(body: Any, status: int | None = None) -> dict[str, Any]:
    """``body``'s ``error`` object, checked to be exactly the OpenAI error shape."""
    if isinstance(body, bytes | str):
        body = orjson.loads(body)
    assert isinstance(body, dict) and set(body) == {"error"}, body
    err: dict[str, Any] = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"], err
    assert isinstance(err["type"], str) and err["type"], err
    return err


@dataclass
class GatewayProcess:
    proc: subprocess.Popen[bytes]
    port: int
    directory: Path
    log: Path
    audit_path: Path | None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def connect(self, timeout: float = 15.0) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def audit_bytes(self) -> bytes:
        return self.audit_path.read_bytes() if self.audit_path and self.audit_path.exists() \
            else b""

    def audit(self, expect: int = 0, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Every record in the audit file, once it holds at least ``expect`` (bounded
        wait: records are written by a thread, after the response)."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [line for line in self.audit_bytes().split(b"\n") if line]
            if len(lines) >= expect or time.monotonic() > deadline:
                return [orjson.loads(line) for line in lines]
            time.sleep(0.02)

    def ready(self, timeout: float = 60.0) -> GatewayProcess:
        """Wait until the log says where it listens and that it is ready."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.log.read_bytes()
            listening = _LISTENING.search(text)
            if listening and b"gateway ready" in text:
                self.port = int(listening.group(2))
                return self
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("gateway did not start:\n" + text.decode(errors="replace"))
            time.sleep(0.05)

    def record(self, audit_id: str, timeout: float = 10.0) -> dict[str, Any]:
        """The audit record ``audit_id`` (bounded wait until it is written)."""
        deadline = time.monotonic() + timeout
        while True:
            found = [r for r in self.audit() if r.get("audit_id") == audit_id]
            if found or time.monotonic() > deadline:
                assert len(found) == 1, f"{len(found)} audit records {audit_id}"
                return found[0]
            time.sleep(0.02)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> int:
        """SIGTERM, then the exit status (SIGKILL if it does not exit within 20 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def _env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OTEL_"))}
    env.update(extra)
    return env


def start_gateway(directory: Path, config: Mapping[str, Any], *,
                  policies: Mapping[str, str] | None = None,
                  env: Mapping[str, str] | None = None) -> GatewayProcess:
    """Spawn the process (not waiting for it: :meth:`GatewayProcess.ready`); the caller
    stops it (:meth:`GatewayProcess.stop`). Several started at once boot in parallel."""
    directory.mkdir(parents=True, exist_ok=True)
    policy_dir = directory / "policies"
    policy_dir.mkdir(exist_ok=True)
    for name, text in (policies or {}).items():
        (policy_dir / f"{name}.yaml").write_text(text, encoding="utf-8")
    full: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "policies_dir": str(policy_dir),
                            "reload_policies": False, "log_level": "info",
                            "audit": {"path": str(directory / "audit.jsonl")}, **config}
    path = directory / "gateway.yaml"
    path.write_bytes(orjson.dumps(full))
    log = directory / "gateway.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--config", str(path)],
                                stdout=out, stderr=subprocess.STDOUT, env=_env(env or {}))
    audit = (full.get("audit") or {}).get("path")
    return GatewayProcess(proc, 0, directory, log, Path(audit) if audit else None)


@contextmanager
def serve_gateway(directory: Path, config: Mapping[str, Any], *,
                  policies: Mapping[str, str] | None = None,
                  env: Mapping[str, str] | None = None) -> Iterator[GatewayProcess]:
    """A started and ready gateway, stopped (SIGTERM) on exit."""
    gw = start_gateway(directory, config, policies=policies, env=env)
    try:
        yield gw.ready()
    finally:
        gw.stop()
