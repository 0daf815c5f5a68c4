"""Fault suite, SIGTERM under load: a real ``gateway serve`` process drains and stops.

One scenario, run once for the module: clients keep sending verified requests (inline
and shadow policies); three more — pass-through JSON, inline JSON, a shadow stream
that has started — are held open by the upstream. The process gets SIGTERM. While they
are still held, a new connection must be refused and an idle kept-alive connection
closed; once the upstream lets them go, the held requests complete with their whole
answers, the process exits, and its audit file holds exactly one valid JSON line per
verified request a client completed (load and held), none torn, none twice.

The in-process variant (``ServerThread.stop``, no signal, no audit) is
``tests/core/test_lifecycle.py``.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
import orjson
import pytest

from security.hostile import ANSWER, HostileUpstream
from security.load import Load
from security.process import serve_gateway

USER: Any = [{"role": "user", "content": "What is the capital of France?"}]
POLICIES = {
    "guard": """
mode: inline
match: {models: ["*-inline"]}
layers: [{name: keyword, config: {block: [zzz]}}]
""",
    "watch": """
mode: shadow
match: {models: ["*-shadow"]}
layers: [{name: keyword, config: {block: [zzz]}}]
""",
}


@dataclass
class Terminated:
    held: dict[str, Any] = field(default_factory=dict)
    """What each held request ended with (its answer text, or the exception)."""
    held_ids: list[str] = field(default_factory=list)
    new_connection: BaseException | None = None
    kept_alive: BaseException | None = None
    status: int | None = None
    load: Load | None = None
    audit: bytes = b""
    log: str = ""


def _background(fn: Callable[[], Any], out: dict[str, Any], name: str) -> threading.Thread:
    def run() -> None:
        try:
            out[name] = fn()
        except BaseException as exc:  # reported by the tests
            out[name] = exc

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def _refused(port: int, timeout: float = 15.0) -> BaseException:
    """Poll until a connection to ``port`` fails (bounded); that failure."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                pass
        except OSError as exc:
            return exc
        assert time.monotonic() < deadline, "new connections still accepted after SIGTERM"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def terminated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Terminated]:
    result = Terminated()
    with HostileUpstream() as up:
        config = {"upstreams": [
            {"name": "hold", "base_url": up.base_url("hold"), "models": ["hold*"]},
            {"name": "ok", "base_url": up.base_url("ok")}]}
        with serve_gateway(tmp_path_factory.mktemp("sigterm"), config,
                           policies=POLICIES) as gw, \
                httpx.Client(base_url=gw.url, timeout=10) as idle, \
                openai.OpenAI(base_url=gw.base_url, api_key="sk-x", max_retries=0,
                              timeout=60) as client:
            assert idle.get("/healthz").status_code == 200  # a kept-alive connection
            result.load = load = Load([gw.url], ["ok-inline", "ok-shadow"], threads=4)
            load.wait_for(60)

            def stream() -> str:
                raw = client.chat.completions.with_streaming_response.create(
                    model="hold-shadow", messages=USER, stream=True)
                resp: Any
                with raw as resp:
                    result.held_ids.append(resp.headers["x-verity-audit-id"])
                    return "".join(c.choices[0].delta.content or "" for c in resp.parse()
                                   if c.choices)

            def answer(model: str) -> Callable[[], str]:
                def call() -> str:
                    raw = client.chat.completions.with_raw_response.create(model=model,
                                                                           messages=USER)
                    if "x-verity-audit-id" in raw.headers:
                        result.held_ids.append(raw.headers["x-verity-audit-id"])
                    return raw.parse().choices[0].message.content or ""
                return call

            threads = [_background(answer("hold"), result.held, "pass-through"),
                       _background(answer("hold-inline"), result.held, "inline"),
                       _background(stream, result.held, "shadow stream")]
            deadline = time.monotonic() + 15
            while up.holding < 3:
                assert time.monotonic() < deadline, f"{up.holding} of 3 requests held"
                time.sleep(0.02)

            gw.signal(signal.SIGTERM)
            result.new_connection = _refused(gw.port)
            try:
                idle.get("/healthz")
            except httpx.HTTPError as exc:
                result.kept_alive = exc
            up.release()
            for t in threads:
                t.join(30)
            try:
                result.status = gw.wait(30)
            finally:
                load.stop()
            result.audit = gw.audit_bytes()
            result.log = gw.log_text()
        yield result


def test_requests_in_flight_complete(terminated: Terminated) -> None:
    assert terminated.held == {"pass-through": ANSWER, "inline": ANSWER,
                               "shadow stream": ANSWER}


def test_new_connections_are_refused_and_idle_ones_closed(terminated: Terminated) -> None:
    assert isinstance(terminated.new_connection, ConnectionRefusedError), \
        terminated.new_connection
    assert isinstance(terminated.kept_alive, httpx.TransportError), terminated.kept_alive


def test_the_clients_under_load_saw_answers_then_a_refusal(terminated: Terminated) -> None:
    load = terminated.load
    assert load is not None and load.count() >= 60
    assert set(load.statuses) == {200}
    assert all(isinstance(e, httpx.TransportError) for e in load.errors), load.errors


def test_the_audit_is_flushed_one_line_per_completed_request(terminated: Terminated) -> None:
    assert terminated.audit.endswith(b"\n")
    records = [orjson.loads(line) for line in terminated.audit.split(b"\n")[:-1]]
    ids = [r["audit_id"] for r in records]
    assert len(ids) == len(set(ids)), "an audit record written twice"
    assert terminated.load is not None
    completed = set(terminated.load.completed) | set(terminated.held_ids)
    assert len(terminated.held_ids) == 2  # inline and shadow; pass-through has no policy
    assert set(ids) == completed
    assert {r["mode"] for r in records} == {"inline", "shadow"}


def test_the_process_exits_after_a_clean_shutdown(terminated: Terminated) -> None:
    assert terminated.status == 0, terminated.log[-2000:]
    assert "Finished server process" in terminated.log
    assert "Traceback" not in terminated.log and "ERROR" not in terminated.log
