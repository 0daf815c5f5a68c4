"""Fleet mode against a real Redis: relays publish shadow jobs to a stream, ``gateway
worker`` processes verify and record them. Every job ends verified exactly once or
recorded as failed — counted, never silently lost, even when a worker is SIGKILLed
mid-load (its pending jobs are claimed by the next one)."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
from serving import GatewayFactory, ServedGateway

from gateway.fleet.codec import encode_job
from gateway.settings import default_policies_dir
from gateway.verify.job import PolicyRef, VerificationJob

redis = pytest.importorskip("redis", reason="the redis package is not installed")

GROUP = "verity-workers"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OTEL_"))}


class Workers:
    """``gateway worker`` processes of one test, sharing its config and audit file."""

    def __init__(self, tmp_path: Path, redis_url: str, stream: str, **redis_extra: Any) -> None:
        self.audit = tmp_path / "worker-audit.jsonl"
        self.stream = stream
        extra = "".join(f", {k}: {v}" for k, v in redis_extra.items())
        self.config = tmp_path / "worker.yaml"
        self.config.write_text(
            f'redis: {{url: "{redis_url}", stream: "{stream}", claim_idle_seconds: 1{extra}}}\n'
            f"audit: {{path: {self.audit}}}\npolicies_dir: {default_policies_dir()}\n"
            "shadow: {concurrency: 2, drain_seconds: 5}\nlog_level: warning\n",
            encoding="utf-8")
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-m", "gateway", "worker", "--config",
                                 str(self.config), "--name", name], env=_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def records(self) -> list[dict[str, Any]]:
        if not self.audit.exists():
            return []
        return [orjson.loads(line) for line in self.audit.read_bytes().splitlines()]

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def stream(request: pytest.FixtureRequest) -> str:
    return f"verity:test:{request.node.name}"


@pytest.fixture
def workers(tmp_path: Path, redis_url: str, stream: str) -> Iterator[Workers]:
    w = Workers(tmp_path, redis_url, stream)
    yield w
    w.stop_all()


@pytest.fixture
def client_redis(redis_url: str) -> Iterator[Any]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def _relay(make_gateway: GatewayFactory, redis_url: str, stream: str) -> ServedGateway:
    # A generous command timeout: on a loaded test box a 1 s publish can time out, and the
    # relay would (correctly) shed the batch; these tests want the jobs on the stream.
    return make_gateway(policies_dir=str(default_policies_dir()),
                        shadow={"runner": "redis"},
                        redis={"url": redis_url, "stream": stream, "timeout": 15},
                        readyz_detail="public")


def _relay_records(relay: ServedGateway) -> list[dict[str, Any]]:
    """What the relay recorded itself: the jobs it shed (none expected)."""
    audit = Path(relay.settings.audit.path or "")
    if not audit.exists():
        return []
    return [orjson.loads(line) for line in audit.read_bytes().splitlines()]


def _accounted(relay: ServedGateway, n: int) -> bool:
    """All ``n`` jobs published or shed (a shed job is recorded by the relay)."""
    status: dict[str, Any] = relay.app.proxy.engine.runner.status()  # type: ignore[union-attr]
    return int(status["published"]) + int(status["dropped"]) == n


def _wait(what: Callable[[], Any], timeout: float = 120.0, message: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} did not happen within {timeout}s")
        time.sleep(0.1)


def _client(relay: ServedGateway) -> openai.OpenAI:
    """The SDK client of a test. Close it only once the relay has accounted for every job:
    a connection closed while the relay still finishes the last request cancels that
    request, and its record then says ``client disconnected`` instead of being a job."""
    return openai.OpenAI(base_url=relay.base_url, api_key="sk-test", max_retries=0)


def _send(client: openai.OpenAI, n: int) -> list[str]:
    """``n`` chat completions through the relay with the openai SDK (every third one
    streamed); their audit ids."""
    ids = []
    rag = ("<context>The Eiffel Tower is in Paris. It was finished in 1889 and is 330 metres "
           "tall.</context>")
    for i in range(n):
        messages = [{"role": "system", "content": rag},
                    {"role": "user", "content": f"When was the Eiffel Tower finished? {i}"}]
        if i % 3 == 2:
            with client.chat.completions.with_streaming_response.create(
                    model="m", messages=messages, stream=True) as got:
                ids.append(got.headers["x-verity-audit-id"])
                assert "".join(c.choices[0].delta.content or "" for c in got.parse()
                               if c.choices)
        else:
            raw = client.chat.completions.with_raw_response.create(model="m",
                                                                   messages=messages)
            ids.append(raw.headers["x-verity-audit-id"])
            assert raw.parse().choices[0].message.content
    return ids


def _settled(client: Any, stream: str) -> bool:
    """Nothing left for the group: every entry delivered and acknowledged."""
    group = next(g for g in client.xinfo_groups(stream) if g["name"] == GROUP.encode())
    return group["pending"] == 0 and group["lag"] == 0


def test_relay_to_redis_to_worker(make_gateway: GatewayFactory, redis_url: str,
                                  stream: str, workers: Workers, client_redis: Any) -> None:
    relay = _relay(make_gateway, redis_url, stream)
    with _client(relay) as client:
        ids = _send(client, 12)
        _wait(lambda: _accounted(relay, 12), message="12 jobs published")
    shadow = relay.app.proxy.engine.runner.status()  # type: ignore[union-attr]
    assert shadow["runner"] == "redis"
    assert _relay_records(relay) == [], "nothing was shed"
    assert client_redis.xlen(stream) == 12
    proc = workers.start("w1")
    _wait(lambda: len(workers.records()) >= 12 and _settled(client_redis, stream),
          message="the worker recorded 12 jobs")
    records = {r["audit_id"]: r for r in workers.records()}
    assert sorted(records) == sorted(ids) and len(workers.records()) == 12
    for r in records.values():
        assert r["mode"] == "shadow" and r["policy"] == "default"
        assert r["verdict"] in ("pass", "warn", "fail"), r
        assert [c["name"] for c in r["candidates"]] == ["grounding"]
        # The JobRunner contract, as the process pool keeps it: the shadow field.
        assert r["shadow"]["result"] in ("verified", "abandoned"), r
        assert r["shadow"]["worker"] == proc.pid, r
        assert r["shadow"]["queue_ms"] >= 0
    assert shadow["sample"]["total"]["dropped"] == 0 and shadow["accepting"] is True
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0


def test_a_worker_killed_mid_load_loses_no_job(make_gateway: GatewayFactory, redis_url: str,
                                               stream: str, workers: Workers,
                                               client_redis: Any) -> None:
    relay = _relay(make_gateway, redis_url, stream)
    n = 150
    with _client(relay) as client:
        ids = _send(client, n)
        _wait(lambda: _accounted(relay, n), message=f"{n} jobs published or shed")
    shed = {r["audit_id"] for r in _relay_records(relay)}
    assert len(shed) < n - 40, "most jobs reached the stream"
    first = workers.start("w1")
    _wait(lambda: len(workers.records()) >= 20, message="20 records")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    done_by_first = len(workers.records())
    left = client_redis.xpending(stream, GROUP)
    assert left["pending"] > 0, "the dead worker left jobs pending (to be claimed)"
    assert done_by_first < n, "killed mid-load"
    second = workers.start("w2")
    _wait(lambda: _settled(client_redis, stream), message="every job acknowledged")
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=30) == 0
    counts = collections.Counter(r["audit_id"] for r in workers.records())
    assert not shed & set(counts), "a shed job is not published"
    assert set(counts) | shed == set(ids), "no job lost"
    for r in _relay_records(relay):  # shed by the relay: the shadow field says so
        assert r["shadow"] == {"result": "dropped", "queue_ms": None, "worker": None}, r
    assert {r["shadow"]["result"] for r in workers.records()} <= {"verified", "failed",
                                                                 "abandoned"}
    assert max(counts.values()) == 1, "no job recorded twice"
    failed = [r for r in workers.records() if "not verified" in (r.get("note") or "")]
    verified = [r for r in workers.records() if r.get("verdict")]
    assert len(failed) + len(verified) + len(shed) == n


def _job(audit_id: str) -> VerificationJob:
    return VerificationJob(
        messages=[{"role": "user", "content": "hi"}],
        answer={"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]},
        policy=PolicyRef("default", "no-such-version"), audit_id=audit_id, mode="shadow")


def test_poison_and_unreadable_jobs_are_recorded_not_lost(tmp_path: Path, redis_url: str,
                                                         stream: str,
                                                         client_redis: Any) -> None:
    workers = Workers(tmp_path, redis_url, stream, max_deliveries=1)
    try:
        client_redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
        client_redis.xadd(stream, {b"job": encode_job(_job("a" * 32))})
        # A worker that took it and died: delivered once, never acknowledged.
        client_redis.xreadgroup(GROUP, "dead", {stream: ">"}, count=1)
        raw = orjson.loads(encode_job(_job("b" * 32)))
        raw["v"] = 99
        client_redis.xadd(stream, {b"job": orjson.dumps(raw)})
        client_redis.xadd(stream, {b"job": b"\x80 not a job"})
        workers.start("w1")
        _wait(lambda: _settled(client_redis, stream) and len(workers.records()) == 2,
              message="both recorded")
        notes = {r["audit_id"]: r.get("note") or "" for r in workers.records()}
        assert "recorded as failed" in notes["a" * 32]
        assert "unreadable job" in notes["b" * 32]
    finally:
        workers.stop_all()


def test_without_redis_the_relay_serves_and_records_what_it_shed(
        make_gateway: GatewayFactory, wait_until: Callable[..., Any]) -> None:
    from gateway.testing.servers import free_port

    relay = make_gateway(policies_dir=str(default_policies_dir()), shadow={"runner": "redis"},
                         redis={"url": f"redis://127.0.0.1:{free_port()}/0", "timeout": 0.5})
    with _client(relay) as client:
        ids = _send(client, 3)  # the clients are served as ever
        wait_until(lambda: _accounted(relay, 3), timeout=30, message="3 jobs shed")
    audit = Path(relay.settings.audit.path or "")

    def records() -> list[dict[str, Any]]:
        if not audit.exists():
            return []
        return [orjson.loads(line) for line in audit.read_bytes().splitlines()]

    wait_until(lambda: len(records()) == 3, timeout=30, message="3 shed records")
    assert sorted(r["audit_id"] for r in records()) == sorted(ids)
    assert [r["note"] for r in records()] == ["not verified: Redis was unreachable"] * 3
    status = relay.app.proxy.engine.runner.status()  # type: ignore[union-attr]
    assert status["redis"] == "down" and status["dropped_by_reason"] == {"redis_down": 3}


def test_an_inline_policys_candidates_are_evaluated_by_the_worker(
        make_gateway: GatewayFactory, redis_url: str, stream: str, tmp_path: Path,
        client_redis: Any) -> None:
    policies = tmp_path / "inline-policies"
    policies.mkdir()
    (policies / "live.yaml").write_text(
        "mode: inline\ndefault: true\ncandidates: [strict]\n"
        "layers: [{name: keyword, config: {block: [zzz]}}]\n", encoding="utf-8")
    (policies / "strict.yaml").write_text(
        'mode: inline\nmatch: {models: ["never-*"]}\n'
        "layers: [{name: length, config: {max_chars: 5}}]\nactions: {fail: {type: block}}\n",
        encoding="utf-8")
    relay = make_gateway(policies_dir=str(policies), shadow={"runner": "redis"},
                         redis={"url": redis_url, "stream": stream, "timeout": 15})
    workers = Workers(tmp_path, redis_url, stream)
    workers.config.write_text(workers.config.read_text(encoding="utf-8").replace(
        f"policies_dir: {default_policies_dir()}", f"policies_dir: {policies}"),
        encoding="utf-8")
    try:
        with _client(relay) as c:
            raw = c.chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": "hello"}])
            _wait(lambda: _accounted(relay, 1), message="the candidates job published")
        assert raw.headers["x-verity-verdict"] == "pass"  # the live verdict, inline
        audit_id = raw.headers["x-verity-audit-id"]
        workers.start("w1")
        _wait(lambda: _settled(client_redis, stream) and workers.records(),
              message="the candidates recorded")
        (rec,) = workers.records()
        assert rec["audit_id"] == audit_id and rec["policy"] == "live"
        assert rec["verdict"] == "pass" and rec["mode"] == "inline"
        (cand,) = rec["candidates"]
        assert cand["name"] == "strict" and cand["verdict"] == "fail"
        assert _relay_records(relay) == []
    finally:
        workers.stop_all()
