"""A relay that becomes saturated sheds the pool's backlog too (``gateway.pool.runner``):
the jobs queued before saturation began are recorded dropped for ``relay_busy`` — each
with its record, counted in ``/readyz`` — instead of each costing the relay a hand-off
and the box a verification while clients wait. In-process: no worker is started (a job
held on the queue's only task keeps the others waiting)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from gateway.audit.sink import MemoryAuditSink
from gateway.pool.runner import ProcessRunner
from gateway.runtime import open_runtime
from gateway.settings import Settings
from gateway.telemetry import create_telemetry
from gateway.verify.job import PolicyRef, VerificationJob
from gateway.verify.queue import ShadowJob, ShadowQueue
from gateway.verify.record import Recorder
from gateway.verify.verifier import Verifier

pytestmark = pytest.mark.anyio

SHADOW = ("mode: shadow\ndefault: true\ncandidates: [cand]\n"
          "layers: [{name: keyword, config: {block: [zzz]}}]\n")
CANDIDATE = "mode: shadow\nlayers: [{name: keyword, config: {block: [yyy]}}]\n"


async def test_the_backlog_queued_before_saturation_is_shed_and_recorded(
        tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "default.yaml").write_text(SHADOW, encoding="utf-8")
    (tmp_path / "p" / "cand.yaml").write_text(CANDIDATE, encoding="utf-8")
    settings = Settings(policies_dir=str(tmp_path / "p"), audit={"path": None},
                        shadow={"queue_size": 10, "concurrency": 1})
    telemetry = create_telemetry({})
    async with open_runtime(settings, telemetry=telemetry) as runtime:
        sink = MemoryAuditSink()
        queue = ShadowQueue(settings.shadow, telemetry)
        queue.start()
        runner = ProcessRunner(settings, queue, Verifier(runtime), Recorder(telemetry, sink),
                               telemetry, 1)
        gate, held = asyncio.Event(), asyncio.Event()

        async def hold() -> str:
            held.set()
            await gate.wait()
            return "verified"

        assert queue.submit(ShadowJob(hold))
        await held.wait()  # the queue's only task is busy: the next jobs wait
        policy, cand = runtime.policies.get("default"), runtime.policies.get("cand")
        assert policy is not None and cand is not None
        ids = [f"{i:032x}" for i in range(3)]
        for audit_id in ids:
            assert runner.submit(VerificationJob(
                messages=[{"role": "user", "content": "hi"}],
                answer={"id": "c", "choices": [{"message": {"role": "assistant",
                                                            "content": "ok"}}]},
                policy=PolicyRef(policy.name, policy.version), audit_id=audit_id,
                mode="shadow", upstream_status=200,
                candidates=(PolicyRef(cand.name, cand.version),)))
        assert queue.depth == 3
        assert runner.load.on_saturated is not None
        runner.load.on_saturated()  # what RelayLoad calls when saturation begins
        assert queue.depth == 0
        assert [r["audit_id"] for r in sink.records] == ids
        for r in sink.records:
            assert r["note"] == "not verified: the relay was saturated (shadow sample reduced)"
            assert r["shadow"] == {"result": "dropped", "queue_ms": None, "worker": None}
            assert r["verdict"] is None and r["upstream_status"] == 200
            assert [(c["name"], c["error"]) for c in r["candidates"]] == [("cand", "dropped")]
        status = runner.status()
        assert status["relay"]["shed"] == 3 and status["dropped"] == 3
        assert status["sample"]["total"]["dropped"] == 3
        gate.set()
        await queue.close()
        await runner.close()
        assert queue.completed == 1


async def test_a_request_asks_the_relays_budget_as_it_arrives(tmp_path: Path) -> None:
    # free: not saturated (its job is asked about again once its answer is in);
    # token: saturated, within the budget; shed: saturated, the budget spent — counted
    # only once its answer was relayed (shed_relayed), with the queue's other sheds.
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "default.yaml").write_text(SHADOW, encoding="utf-8")
    (tmp_path / "p" / "cand.yaml").write_text(CANDIDATE, encoding="utf-8")
    settings = Settings(policies_dir=str(tmp_path / "p"), audit={"path": None},
                        pool={"busy_jobs_per_second": 1000.0})
    telemetry = create_telemetry({})
    async with open_runtime(settings, telemetry=telemetry) as runtime:
        queue = ShadowQueue(settings.shadow, telemetry)
        runner = ProcessRunner(settings, queue, Verifier(runtime),
                               Recorder(telemetry, MemoryAuditSink()), telemetry, 1)
        assert runner.hand_off() == "free"
        runner.load.saturated = True
        runner.load._tokens, runner.load._filled = 2.0, time.monotonic()
        assert [runner.hand_off(), runner.hand_off()] == ["token", "token"]
        runner.load.rate, runner.load._tokens = 0.0, 0.0  # the budget is spent
        assert runner.hand_off() == "shed"
        assert runner.load.shed == 0 and queue.dropped == 0
        runner.shed_relayed()
        status = runner.status()
        assert status["relay"]["shed"] == 1 and status["dropped"] == 1
        assert status["sample"]["total"]["dropped"] == 1
        await runner.close()
