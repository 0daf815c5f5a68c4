"""Shadow mode: exactly the upstream bytes, then a bounded background audit."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from modes import support
from modes.conftest import PolicyGateway, StartGateway
from modes.support import FIXED_JSON, FIXED_STREAM, FixedUpstream
from gateway.testing.servers import ServerThread

SHADOW = """
mode: shadow
default: true
layers: [{name: keyword, config: {block: [forbidden]}}]
actions: {fail: {type: block}}
"""
GATED = """
mode: shadow
default: true
layers: [{name: gate, timeout_ms: 60000}]
budget: {total_ms: 60000}
"""
BODY = {"model": "fixed-model", "messages": [{"role": "user", "content": "hi"}]}
VOLATILE = {"date", "server", "content-length"}


@pytest.fixture(scope="module")
def fixed_upstream() -> Iterator[ServerThread]:
    with ServerThread(FixedUpstream()) as server:
        yield server


def _headers(resp: httpx.Response) -> list[tuple[str, str]]:
    return sorted((k, v) for k, v in resp.headers.multi_items() if k not in VOLATILE)


def _submitted(gw: PolicyGateway, n: int, wait_until: Callable[..., Any]) -> None:
    """Wait until the runner has taken or shed ``n`` shadow jobs in all. Shadow mode
    relays the answer first and submits its job after: a client holding its response
    does not yet know whether the job was queued (on a loaded box it may not be)."""
    wait_until(lambda: gw.telemetry.total("shadow.enqueued")
               + gw.telemetry.total("shadow.dropped") >= n,
               message=f"{n} shadow jobs submitted")


@pytest.mark.parametrize("stream", [False, True])
def test_shadow_body_is_byte_identical_to_upstream(start_gateway: StartGateway,
                                                   fixed_upstream: ServerThread,
                                                   wait_until: Callable[..., Any],
                                                   stream: bool) -> None:
    gw = start_gateway({"shadow": SHADOW},
                       upstreams=[{"name": "fixed", "base_url": fixed_upstream.url + "/v1"}])
    body = {**BODY, "stream": True} if stream else BODY
    with httpx.Client(timeout=10) as http:
        direct = http.post(fixed_upstream.url + "/v1/chat/completions", json=body)
        via = http.post(gw.url + "/v1/chat/completions", json=body,
                        headers={"authorization": "Bearer sk-test-123456789"})
    assert via.status_code == direct.status_code == 200
    assert via.content == direct.content  # the exact bytes, not a re-serialization
    assert via.content == (b"".join(FIXED_STREAM) if stream else FIXED_JSON)
    added = [h for h in _headers(via) if h not in _headers(direct)]
    assert sorted(k for k, _ in added) == ["x-verity-audit-id", "x-verity-mode",
                                           "x-verity-policy"]
    assert [h for h in _headers(direct) if h not in _headers(via)] == []
    audit_id = via.headers["x-verity-audit-id"]
    rec = wait_until(lambda: next(iter(gw.audit()), None), message="shadow audit record")
    assert rec["audit_id"] == audit_id and rec["mode"] == "shadow"
    assert rec["verdict"] == "fail" and rec["action"] == "block" and rec["applied"] is False
    assert rec["response_id"] == ("c1" if stream else "chatcmpl-fixed")
    assert "sk-test-123456789" not in str(gw.audit())


@pytest.mark.usefixtures("test_layers")
def test_shadow_overflow_is_counted_and_never_blocks(start_gateway: StartGateway,
                                                     upstream: Any,
                                                     wait_until: Callable[..., Any]) -> None:
    gw = start_gateway({"gated": GATED}, shadow={"queue_size": 1, "concurrency": 1},
                       readyz_detail="public")  # forward mode: the detail is off by default
    with httpx.Client(base_url=gw.url, timeout=30) as http:
        def ask(i: int) -> httpx.Response:
            return http.post("/v1/chat/completions", json={
                "model": "scripted-small", "messages": [{"role": "user", "content": f"q{i}"}]})

        assert ask(0).status_code == 200
        wait_until(lambda: support.GATE_ENTERED, message="first shadow job running")
        # The worker is held by the gate: one more job fits in the queue, the rest drop.
        for i in range(1, 4):
            r = ask(i)
            assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == \
                f"You said: q{i}"
        _submitted(gw, 4, wait_until)  # each after its answer went out
        ready = http.get("/readyz").json()
        assert ready["shadow"]["depth"] == 1 and ready["shadow"]["dropped"] == 2
        assert gw.telemetry.total("shadow.dropped") == 2
        assert gw.telemetry.total("shadow.enqueued") == 2
        support.GATE.set()
    wait_until(lambda: len(gw.audit()) == 4, message="4 audit records")
    records = gw.audit()
    notes = sorted(str(r["note"]) for r in records)
    assert notes == ["None", "None", "not verified: shadow queue full",
                     "not verified: shadow queue full"]


@pytest.mark.usefixtures("test_layers")
def test_a_job_shed_before_it_is_built_keeps_the_whole_record(
        start_gateway: StartGateway, upstream: Any, wait_until: Callable[..., Any]) -> None:
    # The runner is asked first; a shed job is never built and its record is written
    # from the request's own outcome: the same fields as a verified job's record.
    gw = start_gateway({"gated": GATED + "candidates: [cand]\n", "cand": """
mode: shadow
match: {models: ["never-*"]}
layers: [{name: length, config: {max_chars: 5}}]
"""}, shadow={"queue_size": 1, "concurrency": 1})
    with httpx.Client(base_url=gw.url, timeout=30) as http:
        def ask(i: int) -> httpx.Response:
            return http.post("/v1/chat/completions", json={
                "model": "scripted-small", "messages": [{"role": "user", "content": f"q{i}"}]})

        ids = [ask(0).headers["x-verity-audit-id"]]
        wait_until(lambda: support.GATE_ENTERED, message="first shadow job running")
        for i in (1, 2):  # queued, then shed (each submitted after its answer went out)
            ids.append(ask(i).headers["x-verity-audit-id"])
            _submitted(gw, i + 1, wait_until)
        assert gw.telemetry.total("shadow.enqueued") == 2  # the shed one never was
        assert gw.telemetry.total("shadow.dropped") == 1
        assert gw.telemetry.total("shadow.settled") == 1
        support.GATE.set()
    wait_until(lambda: len(gw.audit()) == 3, message="3 audit records")
    by_id = {r["audit_id"]: r for r in gw.audit()}
    verified, shed = by_id[ids[1]], by_id[ids[2]]
    assert shed.keys() == verified.keys()
    for key in ("policy", "policy_version", "mode", "model", "tenant", "stream",
                "streaming", "upstream_status", "upstream"):
        assert shed[key] == verified[key], key
    assert shed["upstream"] and shed["upstream_status"] == 200
    assert shed["response_id"] and shed["response_id"] != verified["response_id"]
    assert shed["started_at"] <= shed["finished_at"] and shed["duration_ms"] > 0
    assert shed["note"] == "not verified: shadow queue full" and shed["verdict"] is None
    assert shed["shadow"] == {"result": "dropped", "queue_ms": None, "worker": None}
    assert [(c["name"], c["error"]) for c in shed["candidates"]] == [("cand", "dropped")]
    assert shed["candidates"][0]["version"] == verified["candidates"][0]["version"]


@pytest.mark.usefixtures("test_layers")
def test_shutdown_cancels_what_the_drain_deadline_leaves(start_gateway: StartGateway,
                                                         upstream: Any,
                                                         wait_until: Callable[..., Any]) -> None:
    gw = start_gateway({"gated": GATED},
                       shadow={"queue_size": 5, "concurrency": 1, "drain_seconds": 0})
    with httpx.Client(base_url=gw.url, timeout=30) as http:
        http.post("/v1/chat/completions", json={"model": "scripted-small", "messages": [
            {"role": "user", "content": "one"}]})
        wait_until(lambda: support.GATE_ENTERED, message="first shadow job running")
        http.post("/v1/chat/completions", json={"model": "scripted-small", "messages": [
            {"role": "user", "content": "two"}]})
    gw.stop()  # the gate is still closed: the running job is cancelled, the queued one too
    assert gw.telemetry.total("shadow.cancelled") == 2
    notes = sorted(r["note"] for r in gw.audit())
    assert notes == ["not verified: still queued at shutdown",
                     "shadow verification cancelled at shutdown"]
