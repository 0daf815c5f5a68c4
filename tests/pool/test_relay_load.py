"""Shed, never slow — the relay itself (``gateway.pool.relay_load``): while the relay's
event loop is saturated, shadow jobs are handed off at most ``pool.busy_jobs_per_second``
and the rest are shed and recorded like any shed job. No timing is asserted: the load
is scripted (a probe and a clock) or forced through the settings."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from gateway.pool.relay_load import TICK_S, RelayLoad
from gateway.testing.scripted import read_all, serve_lifespan
from gateway.testing.servers import ServerThread
from modes.support import FIXED_JSON, FIXED_STREAM, FixedUpstream
from serving import GatewayFactory

SHADOW = "mode: shadow\ndefault: true\nlayers: [{name: keyword, config: {block: [zzz]}}]\n"


class _Loop:
    """A clock the test advances, and no scheduling (``_tick`` is called by hand)."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def call_later(self, *_args: Any) -> None:
        return None


def _load(threshold: float | None, rate: float, busy_per_tick: list[float]) -> RelayLoad:
    """A RelayLoad whose loop thread was busy ``busy_per_tick[i]`` of tick ``i``."""
    used = [0.0]
    load = RelayLoad(threshold, rate, probe=lambda: used[0])
    loop = _Loop()
    load._marks.append((loop.now, used[0]))
    for share in busy_per_tick:
        loop.now += TICK_S
        used[0] += share * TICK_S
        load._tick(loop)  # type: ignore[arg-type]
    return load


def test_a_saturated_relay_sheds_past_its_budget_and_counts_it() -> None:
    load = _load(0.9, 0.0, [1.0, 0.95, 1.0, 0.97])
    assert load.saturated and load.busy == pytest.approx(0.98)
    assert [load.admit() for _ in range(3)] == [False, False, False]
    assert load.shed == 3 and load.status()["saturated"] is True


def test_an_unsaturated_relay_hands_every_job_off() -> None:
    load = _load(0.9, 0.0, [0.5, 0.6, 0.7, 0.8])
    assert not load.saturated and load.busy == pytest.approx(0.65)
    assert all(load.admit() for _ in range(100)) and load.shed == 0


def test_saturation_ends_below_the_threshold_minus_the_hysteresis() -> None:
    load = _load(0.9, 0.0, [1.0] * 4 + [0.85] * 4)
    assert load.saturated  # 0.85: under 0.9 but not under 0.8
    load = _load(0.9, 0.0, [1.0] * 4 + [0.5] * 4)
    assert not load.saturated and load.admit()


def test_without_a_threshold_the_relay_is_never_saturated() -> None:
    load = _load(None, 0.0, [1.0] * 8)
    assert not load.saturated and load.admit()


def test_a_saturated_relay_still_hands_off_its_budget() -> None:
    load = _load(0.9, 1000.0, [1.0] * 4)
    load._filled -= 1.0  # a second has passed since saturation began: a full bucket
    assert load.admit()  # then at most max(1, rate) in a burst
    assert load.shed == 0


@pytest.fixture(scope="module")
def fixed_upstream() -> Iterator[ServerThread]:
    with ServerThread(FixedUpstream()) as server:
        yield server


def _ask_saturated(make_gateway: GatewayFactory, make_client: Callable[..., openai.OpenAI],
                   wait_until: Callable[..., Any], tmp_path: Path, fixed_upstream: ServerThread,
                   policies: dict[str, str]) -> tuple[Any, Callable[[], dict[str, Any]], Any,
                                                      dict[str, Any]]:
    """A gateway whose relay always reads saturated (a threshold no ticking loop stays
    under, no hand-off budget), asked once when it says so: the gateway, its /readyz
    shadow block, the raw response and the request's audit record."""
    (tmp_path / "policies").mkdir()
    for name, text in policies.items():
        (tmp_path / "policies" / f"{name}.yaml").write_text(text, encoding="utf-8")
    audit = tmp_path / "audit.jsonl"
    gw = make_gateway(policies_dir=str(tmp_path / "policies"), readyz_detail="public",
                      reload_policies=False, audit={"path": str(audit)},
                      pool={"workers": 1, "relay_busy": 1e-9, "busy_jobs_per_second": 0},
                      upstreams=[{"name": "fixed", "base_url": fixed_upstream.url + "/v1"}])

    def shadow() -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(gw.url + "/readyz", timeout=30).json()["shadow"]
        return data

    wait_until(lambda: shadow()["relay"]["saturated"], timeout=60.0, message="saturation")
    raw = make_client(gw).chat.completions.with_raw_response.create(
        model="fixed-model", messages=[{"role": "user", "content": "Tell me."}])
    audit_id = raw.headers["x-verity-audit-id"]

    def record() -> dict[str, Any] | None:
        lines = audit.read_text().splitlines() if audit.exists() else []
        return next((r for r in map(json.loads, lines) if r["audit_id"] == audit_id), None)

    return gw, shadow, raw, wait_until(record, timeout=60.0, message="the record")


def test_a_forced_saturation_sheds_the_job_with_its_reason_and_says_so(
        make_gateway: GatewayFactory, tmp_path: Path, fixed_upstream: ServerThread,
        make_client: Callable[..., openai.OpenAI], wait_until: Callable[..., Any]) -> None:
    # A threshold no loop stays under (it ticks) and no budget: saturated, all shed.
    gw, shadow, raw, rec = _ask_saturated(make_gateway, make_client, wait_until, tmp_path,
                                          fixed_upstream, {"shadow": SHADOW})
    assert raw.http_response.content == FIXED_JSON  # the client is served as ever
    assert rec["shadow"] == {"result": "dropped", "queue_ms": None, "worker": None}
    assert rec["note"] == "not verified: the relay was saturated (shadow sample reduced)"
    assert rec["score"] is None
    status = shadow()
    assert status["relay"]["shed"] == 1 and status["dropped"] == 1
    assert status["sample"]["total"]["dropped"] == 1
    assert status["sample"]["total"]["verified"] == 0


def test_a_request_asking_as_it_arrives_takes_a_token_but_counts_no_shed() -> None:
    load = _load(0.9, 0.0, [1.0] * 4)
    assert [load.take() for _ in range(3)] == [False, False, False]
    assert load.shed == 0  # counted by the runner once the answer was relayed
    load = _load(0.9, 1000.0, [1.0] * 4)
    load._filled -= 1.0
    assert load.take() and load.shed == 0


def test_a_job_shed_as_its_request_arrives_relays_the_answer_unread(
        make_gateway: GatewayFactory, tmp_path: Path, fixed_upstream: ServerThread,
        make_client: Callable[..., openai.OpenAI], wait_until: Callable[..., Any]) -> None:
    # Saturated with no budget when the request arrives: the job is shed before the
    # upstream call, the answer relayed as pass-through relays it (never read: the
    # record has no response_id), JSON and stream alike, each shed counted once.
    gw, shadow, raw, rec = _ask_saturated(make_gateway, make_client, wait_until, tmp_path,
                                          fixed_upstream, {"shadow": SHADOW})
    assert raw.http_response.content == FIXED_JSON
    assert raw.headers["x-custom"] == "kept" and raw.headers["x-verity-mode"] == "shadow"
    assert rec["response_id"] is None and rec["upstream_status"] == 200
    with httpx.stream("POST", gw.url + "/v1/chat/completions", timeout=30, json={
            "model": "fixed-model", "stream": True,
            "messages": [{"role": "user", "content": "Tell me."}]}) as resp:
        body = b"".join(resp.iter_raw())
        audit_id = resp.headers["x-verity-audit-id"]
    assert body == b"".join(FIXED_STREAM)
    audit = Path(gw.settings.audit.path or "")

    def record() -> dict[str, Any] | None:
        lines = audit.read_text().splitlines()
        return next((r for r in map(json.loads, lines) if r["audit_id"] == audit_id), None)

    streamed = wait_until(record, timeout=60.0, message="the stream's record")
    assert streamed["stream"] is True and streamed["response_id"] is None
    assert streamed["note"] == rec["note"] and streamed["shadow"]["result"] == "dropped"
    status = wait_until(lambda: (s := shadow())["dropped"] == 2 and s, timeout=60.0,
                        message="two sheds")
    assert status["relay"]["shed"] == 2 and status["sample"]["total"]["dropped"] == 2


class _Failing:
    """Answers every request with a 400 error body (not retried)."""

    body = b'{"error": {"message": "bad", "type": "invalid_request_error"}}'

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await serve_lifespan(receive, send)
        await read_all(receive)
        await send({"type": "http.response.start", "status": 400, "headers": [
            (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": self.body, "more_body": False})


def test_an_upstream_error_shed_as_it_arrives_leaves_no_record_and_no_shed(
        make_gateway: GatewayFactory, tmp_path: Path,
        wait_until: Callable[..., Any]) -> None:
    # As on the full path: an upstream error is relayed unverified, with no record;
    # the job shed on arrival is not counted either (there was no answer to verify).
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "shadow.yaml").write_text(SHADOW, encoding="utf-8")
    audit = tmp_path / "audit.jsonl"
    with ServerThread(_Failing()) as upstream:
        gw = make_gateway(policies_dir=str(tmp_path / "policies"), readyz_detail="public",
                          reload_policies=False, audit={"path": str(audit)},
                          pool={"workers": 1, "relay_busy": 1e-9,
                                "busy_jobs_per_second": 0},
                          upstreams=[{"name": "failing", "base_url": upstream.url + "/v1"}])

        def shadow() -> dict[str, Any]:
            data: dict[str, Any] = httpx.get(gw.url + "/readyz", timeout=30).json()["shadow"]
            return data

        wait_until(lambda: shadow()["relay"]["saturated"], timeout=60.0,
                   message="saturation")
        resp = httpx.post(gw.url + "/v1/chat/completions", timeout=30, json={
            "model": "m", "messages": [{"role": "user", "content": "Tell me."}]})
        assert resp.status_code == 400 and resp.content == _Failing.body
        assert resp.headers["x-verity-mode"] == "shadow"
        assert "x-verity-audit-id" not in resp.headers
        status = shadow()
    assert status["relay"]["shed"] == 0 and status["dropped"] == 0
    sink = gw.app.proxy.engine.audit  # type: ignore[union-attr]
    sink.flush()
    assert not audit.exists() or not audit.read_bytes()


def test_the_start_of_a_saturation_is_announced_once() -> None:
    used = [0.0]
    load = RelayLoad(0.9, 0.0, probe=lambda: used[0])
    calls: list[float] = []
    load.on_saturated = lambda: calls.append(load.busy)
    loop = _Loop()
    load._marks.append((loop.now, used[0]))
    for share in [0.5] * 4 + [1.0] * 8 + [0.2] * 8 + [1.0] * 8:
        loop.now += TICK_S
        used[0] += share * TICK_S
        load._tick(loop)  # type: ignore[arg-type]
    assert len(calls) == 2 and all(busy >= 0.9 for busy in calls)


INLINE = ("mode: inline\ndefault: true\ncandidates: [cand]\n"
          "layers: [{name: keyword, config: {block: [zzz]}}]\n")
CANDIDATE = ("mode: shadow\nmatch: {models: [\"never-*\"]}\n"
             "layers: [{name: keyword, config: {block: [yyy]}}]\n")


def test_a_saturated_relay_sheds_an_inline_policys_candidates_not_its_verification(
        make_gateway: GatewayFactory, tmp_path: Path, fixed_upstream: ServerThread,
        make_client: Callable[..., openai.OpenAI], wait_until: Callable[..., Any]) -> None:
    # The inline verification is the client's own wait (it is done, its verdict in the
    # headers and the record); the candidates' job would be one more hand-off: shed.
    gw, shadow, raw, rec = _ask_saturated(make_gateway, make_client, wait_until, tmp_path,
                                          fixed_upstream, {"inline": INLINE, "cand": CANDIDATE})
    assert raw.http_response.content == FIXED_JSON
    assert raw.headers["x-verity-mode"] == "inline"
    assert raw.headers["x-verity-verdict"] == "pass"
    assert rec["mode"] == "inline" and rec["verdict"] == "pass" and rec["applied"] is True
    assert [(c["name"], c["error"]) for c in rec["candidates"]] == [("cand", "dropped")]
    assert rec["shadow"] == {"result": "dropped", "queue_ms": None, "worker": None}
    status = shadow()
    assert status["relay"]["shed"] == 1 and status["dropped"] == 1
    assert status["sample"]["total"]["dropped"] == 1
    assert status["sample"]["total"]["verified"] == 0
