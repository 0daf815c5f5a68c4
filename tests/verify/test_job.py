"""A verification job is a value: pickled, verified in another process from the settings
alone, it gives the record the gateway wrote for it.

A real gateway (shadow policy with a candidate) answers one request; the job its
shadow mode handed the job runner is captured, pickled, and verified by a fresh
Python process through ``open_runtime(settings)`` and ``Verifier.run``. The record
that process builds must be the gateway's audit record, but for the clock (when it
finished, how long each layer took).
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.telemetry import TraceLink
from gateway.verify.job import PolicyRef, VerificationJob
from gateway.verify.runner import LocalRunner
from serving import ServedGateway

ROOT = Path(__file__).resolve().parents[2]

LIVE = """\
mode: shadow
default: true
candidates: [cand]
context: {sources: [system]}
layers:
  - {name: grounding}
  - {name: claims}
  - {name: keyword, config: {block: [zzz]}}
telemetry: {record_content: true}
"""
CAND = """\
mode: shadow
match: {models: [candidate-only]}
layers: [{name: keyword, config: {block: [said]}}]
actions: {fail: {type: block}}
"""
MESSAGES: Any = [
    {"role": "system", "content": "The Eiffel Tower was completed in 1889 in Paris."},
    {"role": "user", "content": "The Eiffel Tower was completed in 1889."}]

CLOCK = ("finished_at", "duration_ms", "shadow")
"""What differs between two runs of a job: the clock, and how the runner ran it (queue
wait, worker pid)."""


def _timeless(record: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in record.items() if k not in CLOCK}
    out["layers"] = [{k: v for k, v in layer.items() if k != "latency_ms"}
                     for layer in record["layers"]]
    out["candidates"] = [{**c, "layers": [{k: v for k, v in layer.items()
                                           if k != "latency_ms"} for layer in c["layers"]]}
                         for c in record["candidates"]]
    return out


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[VerificationJob]]:
    jobs: list[VerificationJob] = []
    submit = LocalRunner.submit

    def spy(self: LocalRunner, job: VerificationJob) -> bool:
        jobs.append(job)
        return submit(self, job)

    monkeypatch.setattr(LocalRunner, "submit", spy)
    yield jobs


def test_a_job_pickles_to_an_equal_value() -> None:
    job = VerificationJob(messages=MESSAGES, answer={"id": "c1", "choices": []},
                          policy=PolicyRef("p", "v1"), audit_id="a" * 32, mode="shadow",
                          candidates=(PolicyRef("c", "v2"),),
                          trace=TraceLink("00-" + "1" * 32 + "-" + "2" * 16 + "-01"))
    again = pickle.loads(pickle.dumps(job))
    assert again == job and again.trace is not None and again.trace.trace() is None


def test_a_pickled_job_verified_in_another_process_gives_the_gateways_record(
        make_gateway: Callable[..., ServedGateway], make_client: Callable[..., openai.OpenAI],
        upstream: Any, tmp_path: Path, captured: list[VerificationJob],
        wait_until: Callable[..., Any]) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "live.yaml").write_text(LIVE, encoding="utf-8")
    (policies / "cand.yaml").write_text(CAND, encoding="utf-8")
    audit = tmp_path / "audit.jsonl"
    overrides = {"policies_dir": str(policies), "reload_policies": False,
                 "audit": {"path": str(audit)},
                 "upstreams": [{"name": "scripted", "base_url": upstream.base_url}]}
    gw = make_gateway(**overrides)
    reply = make_client(gw).chat.completions.create(model="scripted-small", messages=MESSAGES)
    assert reply.choices[0].message.content
    wait_until(lambda: audit.exists() and audit.read_text().strip(),
               message="the shadow record")
    gw.stop()  # drains the queue, flushes the audit
    (record,) = [json.loads(line) for line in audit.read_text().splitlines()]
    (job,) = captured
    assert job.audit_id == record["audit_id"] and job.kind == "verify"

    (tmp_path / "job.pickle").write_bytes(pickle.dumps(job))
    (tmp_path / "settings.json").write_text(json.dumps(overrides))
    worker = textwrap.dedent("""
        import asyncio, json, pickle, sys
        from pathlib import Path
        from gateway.runtime import open_runtime
        from gateway.settings import load_settings
        from gateway.telemetry import Telemetry
        from gateway.verify.verifier import Verifier

        async def main(folder):
            job = pickle.loads((folder / "job.pickle").read_bytes())
            overrides = json.loads((folder / "settings.json").read_text())
            settings = load_settings(environ={}, overrides=overrides)
            async with open_runtime(settings) as runtime:
                trace = Telemetry().start_shadow(job.trace)
                outcome = await Verifier(runtime).run(job, trace)
            outcome.finish()
            print(json.dumps(outcome.to_dict()))

        asyncio.run(main(Path(sys.argv[1])))
    """)
    done = subprocess.run([sys.executable, "-c", worker, str(tmp_path)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    elsewhere = json.loads(done.stdout.strip().splitlines()[-1])
    assert _timeless(elsewhere) == _timeless(record)
    assert {layer["key"] for layer in record["layers"]} == {"grounding", "claims", "keyword"}
    assert [c["name"] for c in record["candidates"]] == ["cand"]
    assert record["content"]["output"] == reply.choices[0].message.content


def test_with_policy_and_with_answer_are_dataclasses_replace() -> None:
    """``_with`` copies the fields itself: it must give what ``dataclasses.replace``
    gives, which holds while every field is an ``__init__`` field and no
    ``__post_init__`` exists (a new field of another kind needs ``_with`` changed)."""
    import dataclasses

    assert all(f.init for f in dataclasses.fields(VerificationJob))
    assert not hasattr(VerificationJob, "__post_init__")
    job = VerificationJob(messages=MESSAGES, answer={"id": "a"}, policy=PolicyRef("p", "1"),
                          audit_id="x" * 32, mode="shadow", model="m", tenant="t",
                          candidates=(PolicyRef("c", "2"),), metadata={"k": "v"},
                          note="n", t0=1.5)
    other = PolicyRef("q", "3")
    assert job.with_policy(other) == dataclasses.replace(job, policy=other, candidates=())
    assert job.with_answer({"id": "b"}) == dataclasses.replace(job, answer={"id": "b"})
    copied = job.with_policy(other)
    assert all(getattr(copied, f.name) is getattr(job, f.name)
               for f in dataclasses.fields(job) if f.name not in ("policy", "candidates"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        copied.mode = "inline"  # type: ignore[misc]
