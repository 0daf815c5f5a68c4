"""``gateway serve --workers N``: N processes on one port, one audit file with one whole
record per request, policy reloads seen by every process, a clean stop on SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from serving import ServedUpstream

from gateway.settings import default_policies_dir
from gateway.testing.servers import free_port

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="serve --workers needs SO_REUSEPORT load balancing")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OTEL_"))}


def _readyz(url: str) -> dict[str, Any]:
    # A new connection each time: SO_REUSEPORT spreads connections, not requests.
    with httpx.Client(timeout=5) as http:
        body: dict[str, Any] = http.get(url + "/readyz").json()
        return body


def _wait(what: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = what()
        except (httpx.HTTPError, KeyError, ValueError):
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.1)


@pytest.fixture
def served(tmp_path: Path, upstream: ServedUpstream) -> Iterator[tuple[str, Path, Path,
                                                                     subprocess.Popen[str]]]:
    policies = tmp_path / "policies"
    policies.mkdir()
    shutil.copy(default_policies_dir() / "default.yaml", policies / "default.yaml")
    audit = tmp_path / "audit.jsonl"
    port = free_port()
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text(f'upstreams: [{{name: a, base_url: "{upstream.base_url}"}}]\n'
                   f"audit: {{path: {audit}}}\npolicies_dir: {policies}\n"
                   "readyz_detail: public\nlog_level: warning\n", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--config", str(cfg),
                             "--port", str(port), "--workers", "2"],
                            env=_env(), text=True, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: _readyz(url)["status"] == "ready")
        yield url, audit, policies, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.kill()
                proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()


def _pids(url: str, n: int = 60) -> dict[int, dict[str, Any]]:
    seen: dict[int, dict[str, Any]] = {}
    for _ in range(n):
        body = _readyz(url)
        seen[body["worker"]["pid"]] = body
        if len(seen) == 2:
            break
    return seen


def test_two_workers_share_the_port_and_one_audit_file(served: tuple[str, Path, Path, Any]
                                                       ) -> None:
    url, audit, _, proc = served
    seen = _pids(url)
    assert len(seen) == 2, "both workers accept connections"
    assert sorted(b["worker"]["index"] for b in seen.values()) == [0, 1]
    assert all(b["worker"]["of"] == 2 for b in seen.values())
    n = 40
    ids = set()
    for i in range(n):  # one client per request: new connections, spread over both
        with openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0) as client:
            got = client.chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": f"hello {i}"}])
            assert got.parse().choices[0].message.content
            ids.add(got.headers["x-verity-audit-id"])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    records = [orjson.loads(line) for line in audit.read_bytes().splitlines()]
    assert sorted(r["audit_id"] for r in records) == sorted(ids)
    assert len(ids) == n


def test_a_policy_edit_reaches_every_worker(served: tuple[str, Path, Path, Any]) -> None:
    url, _, policies, _ = served
    before = {b["policies"]["default"]["version"] for b in _pids(url).values()}
    assert len(before) == 1
    path = policies / "default.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace(
        "Catch-all shadow audit", "Edited catch-all shadow audit"), encoding="utf-8")

    def both_reloaded() -> bool:
        seen = _pids(url)
        return len(seen) == 2 and all(b["policies"]["default"]["version"] not in before
                                      for b in seen.values())

    assert _wait(both_reloaded)


def test_a_dead_worker_is_replaced_and_no_connection_is_stranded(
        served: tuple[str, Path, Path, Any]) -> None:
    url, _, _, proc = served
    seen = _pids(url)
    assert len(seen) == 2
    victim = next(pid for pid, b in seen.items() if b["worker"]["index"] == 1)
    os.kill(victim, signal.SIGKILL)

    def replaced() -> bool:
        now = _pids(url)
        return len(now) == 2 and victim not in now

    assert _wait(replaced)
    # Every new connection is accepted: the dead worker's socket left the group (no other
    # process kept a copy of it, where the kernel would keep queueing connections).
    for _ in range(40):
        with httpx.Client(timeout=5) as fresh:
            assert fresh.get(url + "/healthz").status_code == 200
    assert proc.poll() is None
