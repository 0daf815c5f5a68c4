"""Verification in worker processes (``pool.workers``), through a real gateway.

The gateway runs in this process (uvicorn in a thread); its pool's workers are
spawned processes. A record's ``shadow.worker`` is the pid that verified it, so a
record written by the pool's result path names another process than this one.
No timing is asserted: what runs where, and in which order things complete.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from modes.support import FIXED_JSON, FixedUpstream
from serving import CLIENT_KEY, GatewayFactory, ServedGateway

from gateway.testing.servers import ServerThread

SHADOW = """\
mode: shadow
default: true
candidates: [cand]
context: {sources: [system]}
layers: [{name: grounding}, {name: keyword, config: {block: [forbidden]}}]
actions: {fail: {type: block}}
"""
CAND = """\
mode: shadow
match: {models: [candidate-only]}
context: {sources: [system]}
layers: [{name: grounding}]
"""
SLOW = """\
mode: shadow
default: true
context: {sources: [system], max_chars: null}
layers: [{name: grounding}, {name: claims}]
budget: {total_ms: 1500}
"""
"""Verifies whatever context it gets (no max_chars): megabytes take seconds."""
ARTICLE = ("The bridge opened in 1932 after six years of work. It carries 4,200 vehicles "
           "an hour across the river, and its main span is 503 metres long. ")
ANSWER_WORDS = "The bridge opened in 1932 and its main span is 503 metres long."


@pytest.fixture(scope="module")
def fixed_upstream() -> Iterator[ServerThread]:
    with ServerThread(FixedUpstream()) as server:
        yield server


@pytest.fixture
def pooled(make_gateway: GatewayFactory, tmp_path: Path,
           fixed_upstream: ServerThread) -> Callable[..., ServedGateway]:
    """A gateway with one worker process and the given policies."""
    def start(policies: dict[str, str], **overrides: Any) -> ServedGateway:
        directory = tmp_path / "policies"
        directory.mkdir()
        for name, text in policies.items():
            (directory / f"{name}.yaml").write_text(text, encoding="utf-8")
        # These tests are about the workers, not the relay's own load: a loaded CI box must
        # not make the relay read as saturated and shed (test_relay_load.py covers that).
        overrides.setdefault("pool", {"workers": 1}).setdefault("relay_busy", None)
        overrides.setdefault("reload_policies", False)
        return make_gateway(policies_dir=str(directory), readyz_detail="public",
                            audit={"path": str(tmp_path / "audit.jsonl")},
                            upstreams=[{"name": "fixed",
                                        "base_url": fixed_upstream.url + "/v1"}],
                            **overrides)
    return start


def _records(gw: ServedGateway) -> list[dict[str, Any]]:
    import json
    path = Path(gw.settings.audit.path or "")
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _record(gw: ServedGateway, audit_id: str,
            wait_until: Callable[..., Any]) -> dict[str, Any]:
    return wait_until(lambda: next((r for r in _records(gw) if r["audit_id"] == audit_id),
                                   None), timeout=60.0, message=f"the record of {audit_id}")


def _shadow(gw: ServedGateway) -> dict[str, Any]:
    detail = httpx.get(gw.url + "/readyz", timeout=30).json()
    assert detail["shadow"]["runner"] == "process"
    return detail["shadow"]


def _ask(client: openai.OpenAI, context: str) -> Any:
    return client.chat.completions.with_raw_response.create(
        model="fixed-model", messages=[{"role": "system", "content": context},
                                       {"role": "user", "content": "Tell me about it."}])


def test_shadow_in_a_worker_relays_the_upstream_bytes_and_the_pool_writes_the_record(
        pooled: Callable[..., ServedGateway], make_client: Callable[..., openai.OpenAI],
        wait_until: Callable[..., Any]) -> None:
    gw = pooled({"shadow": SHADOW, "cand": CAND})
    raw = _ask(make_client(gw), ARTICLE * 3)
    assert raw.http_response.content == FIXED_JSON  # the exact bytes
    assert raw.headers["x-verity-mode"] == "shadow"
    rec = _record(gw, raw.headers["x-verity-audit-id"], wait_until)
    assert rec["shadow"]["result"] == "verified"
    assert rec["shadow"]["worker"] not in (None, os.getpid())  # verified in a worker
    assert rec["shadow"]["queue_ms"] is not None
    assert {layer["key"] for layer in rec["layers"]} == {"grounding", "keyword"}
    assert rec["verdict"] == "fail" and rec["action"] == "block" and rec["applied"] is False
    (cand,) = rec["candidates"]
    assert cand["name"] == "cand" and cand["error"] is None
    # The candidate's grounding is the live policy's, configured alike: computed once.
    assert [layer.get("cache_hit") for layer in cand["layers"]] == [True]
    status = _shadow(gw)
    assert status["sample"]["total"]["verified"] == 1 and status["pool"]["workers"] == 1


def test_the_workers_run_at_a_lower_priority_than_the_relay(
        pooled: Callable[..., ServedGateway], wait_until: Callable[..., Any]) -> None:
    # pool.nice (default 10): under CPU contention the relay goes first, the sample sheds.
    gw = pooled({"shadow": SHADOW, "cand": CAND})
    wait_until(lambda: _shadow(gw)["pool"]["pids"], timeout=60.0, message="the pool")
    relay = os.getpriority(os.PRIO_PROCESS, 0)
    for pid in _shadow(gw)["pool"]["pids"]:
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, relay + 10), pid


INLINE_BY_MODEL = """\
mode: inline
match: {models: [inline-*]}
context: {sources: [system]}
layers: [{name: grounding}]
"""


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no SCHED_IDLE on this OS")
def test_background_jobs_run_in_the_idle_class_and_awaited_calls_do_not(
        pooled: Callable[..., ServedGateway], make_client: Callable[..., openai.OpenAI],
        wait_until: Callable[..., Any]) -> None:
    # pool.sched_idle (default true): a shadow job gets only CPU nobody else wants; an
    # inline verification the client awaits runs in the normal class (at pool.nice).
    from gateway.pool.sched import can_return_from_idle
    if not can_return_from_idle():
        pytest.skip("this process may not leave SCHED_IDLE (no CAP_SYS_NICE / RLIMIT_NICE)")
    gw = pooled({"shadow": SHADOW, "inline": INLINE_BY_MODEL},
                pool={"workers": 1, "inline_min_bytes": 1000})
    (pid,) = wait_until(lambda: _shadow(gw)["pool"]["pids"], timeout=60.0, message="the pool")
    client = make_client(gw, timeout=120)
    assert os.sched_getscheduler(pid) == os.SCHED_OTHER  # nothing ran yet
    raw = _ask(client, ARTICLE * 3)
    assert _record(gw, raw.headers["x-verity-audit-id"], wait_until)["shadow"]["result"] \
        == "verified"
    assert os.sched_getscheduler(pid) == os.SCHED_IDLE
    inline = client.chat.completions.with_raw_response.create(
        model="inline-m", messages=[{"role": "system", "content": ARTICLE * 20},
                                    {"role": "user", "content": "Tell me about it."}])
    assert inline.headers["x-verity-mode"] == "inline"
    assert _record(gw, inline.headers["x-verity-audit-id"], wait_until)["layers"]
    assert os.sched_getscheduler(pid) == os.SCHED_OTHER
    assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, os.getpriority(
        os.PRIO_PROCESS, 0) + 10)


def test_without_sched_idle_every_call_stays_in_the_normal_class() -> None:
    from gateway.pool.sched import Scheduling
    off = Scheduling(False)
    off.background(True)
    assert not off.usable and not off.idle
    if hasattr(os, "sched_getscheduler"):
        assert os.sched_getscheduler(0) == os.SCHED_OTHER


# aiohttp nags about any request body over 1 MB sent as bytes (gateway/upstream/openai.py)
@pytest.mark.filterwarnings("ignore:Sending a large body:ResourceWarning")
def test_a_10_mb_context_never_holds_up_a_health_check_and_is_abandoned_at_its_budget(
        pooled: Callable[..., ServedGateway], make_client: Callable[..., openai.OpenAI],
        wait_until: Callable[..., Any]) -> None:
    gw = pooled({"slow": SLOW})
    client = make_client(gw, timeout=120)
    wait_until(lambda: _shadow(gw)["pool"]["started"], timeout=60.0, message="the pool")
    big = ARTICLE * (10 * 1024 * 1024 // len(ARTICLE))
    raw = _ask(client, big)
    assert raw.http_response.content == FIXED_JSON
    audit_id = raw.headers["x-verity-audit-id"]
    # The verification of those 10 MB now runs in the worker (seconds of CPU): the
    # relay answers a health check meanwhile, before the job's record exists.
    health = httpx.get(gw.url + "/healthz", timeout=30)
    assert health.status_code == 200
    assert all(r["audit_id"] != audit_id for r in _records(gw))
    rec = _record(gw, audit_id, wait_until)
    assert rec["shadow"]["result"] == "abandoned"
    assert rec["note"].startswith("abandoned: over budget")
    assert rec["score"] is None and rec["verdict"] == "pass"  # on_error: fail_open
    assert _shadow(gw)["abandoned"] == 1


@pytest.mark.filterwarnings("ignore:Sending a large body:ResourceWarning")
def test_when_the_workers_are_busy_the_sample_sheds_and_says_so(
        pooled: Callable[..., ServedGateway], make_client: Callable[..., openai.OpenAI],
        wait_until: Callable[..., Any]) -> None:
    gw = pooled({"slow": SLOW}, shadow={"queue_size": 1})
    client = make_client(gw, timeout=120)
    wait_until(lambda: _shadow(gw)["pool"]["started"], timeout=60.0, message="the pool")
    busy = _ask(client, ARTICLE * (3 * 1024 * 1024 // len(ARTICLE)))  # the worker's, a while
    wait_until(lambda: _shadow(gw)["running"] == 1, timeout=30.0, message="the job running")
    queued = _ask(client, ARTICLE)  # fills the queue (1)
    shed = _ask(client, ARTICLE)  # nowhere to go: dropped, never waited for
    assert shed.http_response.content == FIXED_JSON
    rec = _record(gw, shed.headers["x-verity-audit-id"], wait_until)
    assert rec["shadow"] == {"result": "dropped", "queue_ms": None, "worker": None}
    assert rec["note"] == "not verified: shadow queue full" and rec["score"] is None
    for raw in (busy, queued):
        assert _record(gw, raw.headers["x-verity-audit-id"], wait_until)["shadow"][
            "result"] in ("verified", "abandoned")
    status = _shadow(gw)
    assert status["dropped"] == 1
    assert status["sample"]["total"]["dropped"] == 1
    assert status["sample"]["last_minute"]["dropped"] == 1
    assert status["sample"]["verified_ratio_last_minute"] < 1


INLINE_SLOW = """\
mode: inline
default: true
context: {sources: [system], max_chars: null}
layers: [{name: grounding}, {name: claims}]
budget: {total_ms: 1}
"""


def test_a_large_inline_verification_runs_in_a_worker_within_its_budget(
        pooled: Callable[..., ServedGateway], make_client: Callable[..., openai.OpenAI],
        wait_until: Callable[..., Any]) -> None:
    gw = pooled({"inline": INLINE_SLOW}, pool={"workers": 1, "inline_min_bytes": 1000})
    # (Until its workers are up, an inline verification stays on the loop.)
    wait_until(lambda: _shadow(gw)["pool"]["pids"], timeout=60.0, message="the pool")
    raw = _ask(make_client(gw, timeout=120), ARTICLE * 2000)  # ~300 kB: the worker's
    assert raw.headers["x-verity-mode"] == "inline"
    assert raw.headers["x-verity-score"] == "n/a"  # stopped at 1 ms: nothing counted
    assert raw.headers["x-verity-verdict"] == "pass"  # on_error: fail_open
    rec = _record(gw, raw.headers["x-verity-audit-id"], wait_until)
    # The worker's alarm stopped it (on the loop the layers would each have failed
    # "time budget exhausted" instead).
    assert rec["note"].startswith("abandoned: over budget") and rec["layers"] == []


@pytest.mark.filterwarnings("ignore:Sending a large body:ResourceWarning")
def test_a_worker_that_dies_fails_its_job_and_is_replaced(
        pooled: Callable[..., ServedGateway], make_client: Callable[..., openai.OpenAI],
        wait_until: Callable[..., Any]) -> None:
    import signal
    gw = pooled({"slow": SLOW.replace("total_ms: 1500", "total_ms: 60000")})
    client = make_client(gw, timeout=120)
    pids = wait_until(lambda: _shadow(gw)["pool"]["pids"], timeout=60.0, message="the pool")
    doomed = _ask(client, ARTICLE * (3 * 1024 * 1024 // len(ARTICLE)))
    wait_until(lambda: _shadow(gw)["running"] == 1, timeout=30.0, message="the job running")
    os.kill(pids[0], signal.SIGKILL)
    rec = _record(gw, doomed.headers["x-verity-audit-id"], wait_until)
    assert rec["shadow"]["result"] == "failed" and rec["shadow"]["worker"] is None
    assert rec["note"] == "not verified: its verification worker process failed"
    new = wait_until(lambda: _shadow(gw)["pool"]["pids"], timeout=60.0, message="a new worker")
    assert new != pids and _shadow(gw)["pool"]["replaced"] == 1
    after = _ask(client, ARTICLE)
    rec = _record(gw, after.headers["x-verity-audit-id"], wait_until)
    assert rec["shadow"]["result"] == "verified" and rec["shadow"]["worker"] in new


@pytest.mark.usefixtures("quick_policy_watch")
def test_a_policy_reloaded_after_the_workers_started_is_verified_in_them(
        pooled: Callable[..., ServedGateway], make_client: Callable[..., openai.OpenAI],
        wait_until: Callable[..., Any]) -> None:
    first = "mode: shadow\ndefault: true\nlayers: [{name: keyword, config: {block: [zzz]}}]\n"
    gw = pooled({"live": first}, reload_policies=True)
    client = make_client(gw)
    wait_until(lambda: _shadow(gw)["pool"]["pids"], timeout=60.0, message="the pool")
    url = gw.url + "/readyz"
    old = httpx.get(url).json()["policies"]["live"]["version"]
    path = Path(gw.settings.policies_dir or "") / "live.yaml"
    path.write_text(first.replace("[zzz]", "[answer]"), encoding="utf-8")  # FIXED_JSON has it
    new = wait_until(lambda: (v := httpx.get(url).json()["policies"]["live"]["version"]) != old
                     and v, timeout=30.0, message="the reload")
    raw = _ask(client, ARTICLE)
    rec = _record(gw, raw.headers["x-verity-audit-id"], wait_until)
    assert rec["policy_version"] == new and rec["shadow"]["result"] == "verified"
    assert rec["shadow"]["worker"] in _shadow(gw)["pool"]["pids"]
    assert rec["verdict"] == "fail"  # the new block list, which the worker loaded


@pytest.mark.filterwarnings("ignore:Sending a large body:ResourceWarning")
def test_a_body_over_parse_min_bytes_is_parsed_in_a_worker_and_refused_alike(
        pooled: Callable[..., ServedGateway], make_client: Callable[..., openai.OpenAI],
        wait_until: Callable[..., Any]) -> None:
    # pool.parse_min_bytes (default 4 MiB): the relay's loop only unpickles the object;
    # a duplicate key or invalid JSON is the same 400 as when the relay parses it.
    gw = pooled({"shadow": SHADOW, "cand": CAND})
    wait_until(lambda: _shadow(gw)["pool"]["started"], timeout=60.0, message="the pool")
    assert gw.settings.pool.parse_min_bytes == 4 * 1024 * 1024
    big = ARTICLE * (5 * 1024 * 1024 // len(ARTICLE))
    body = orjson.dumps({"model": "fixed-model", "messages": [
        {"role": "system", "content": big}, {"role": "user", "content": "Tell me."}]})
    auth = {"authorization": f"Bearer {CLIENT_KEY}", "content-type": "application/json"}
    twice = body[:-1] + b', "model": "other"}'
    refused = httpx.post(gw.url + "/v1/chat/completions", content=twice, headers=auth,
                         timeout=120)
    assert refused.status_code == 400
    assert refused.json() == {"error": {
        "message": "The JSON body names the key 'model' twice in one object: send each key "
                   "once.", "type": "invalid_request_error", "param": None,
        "code": "duplicate_key"}}
    broken = httpx.post(gw.url + "/v1/chat/completions", content=body[:-1], headers=auth,
                        timeout=120)
    assert broken.status_code == 400 and broken.json()["error"]["code"] == "invalid_json"
    assert _shadow(gw)["pool"]["offloaded"] == 2
    raw = _ask(make_client(gw, timeout=120), big)
    assert raw.http_response.content == FIXED_JSON
    pool = _shadow(gw)["pool"]
    assert pool["offloaded"] == 3 and pool["offload_fallbacks"] == 0
    # Below the threshold the relay parses it (no round trip).
    _ask(make_client(gw), ARTICLE)
    assert _shadow(gw)["pool"]["offloaded"] == 3


@pytest.mark.filterwarnings("ignore:Sending a large body:ResourceWarning")
def test_a_body_whose_worker_died_is_parsed_by_the_relay_and_the_pool_replaced(
        pooled: Callable[..., ServedGateway], wait_until: Callable[..., Any]) -> None:
    import signal
    gw = pooled({"shadow": SHADOW, "cand": CAND})
    pids = wait_until(lambda: _shadow(gw)["pool"]["pids"], timeout=60.0, message="the pool")
    os.kill(pids[0], signal.SIGKILL)
    big = ARTICLE * (5 * 1024 * 1024 // len(ARTICLE))
    twice = orjson.dumps({"model": "fixed-model", "messages": [
        {"role": "user", "content": big}]})[:-1] + b', "model": "other"}'
    refused = httpx.post(gw.url + "/v1/chat/completions", content=twice, timeout=120,
                         headers={"authorization": f"Bearer {CLIENT_KEY}"})
    # Not a hang, not a 500: the relay parsed it after all, with the same answer.
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "duplicate_key"
    pool = _shadow(gw)["pool"]
    assert pool["offloaded"] == 0 and pool["offload_fallbacks"] == 1 and pool["replaced"] == 1
    new = wait_until(lambda: _shadow(gw)["pool"]["pids"], timeout=60.0, message="a new worker")
    assert pids[0] not in new
