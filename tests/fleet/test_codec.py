"""A job as bytes on the stream (gateway.fleet.codec): JSON, never pickle; every field
checked on the way in, so whoever writes to Redis cannot hand a worker an object."""

from __future__ import annotations

import pickle

import orjson
import pytest

from gateway.fleet.codec import JobFormatError, decode_job, encode_job, peek_audit_id
from gateway.telemetry import TraceLink
from gateway.verify.job import PolicyRef, VerificationJob

JOB = VerificationJob(
    messages=[{"role": "system", "content": "<context>Paris is in France.</context>"},
              {"role": "user", "content": "Where is Paris?"}],
    answer={"choices": [{"index": 0, "message": {"role": "assistant",
                                                  "content": "Paris is in France."}}]},
    policy=PolicyRef("default", "abc123"), audit_id="0" * 32, mode="shadow", model="m",
    stream=True, tenant="t", key_name="k", metadata={"team": "a"}, upstream_status=200,
    streaming="buffer", started_at="2026-01-01T00:00:00Z", t0=100.0,
    candidates=(PolicyRef("grounding", "def456"),),
    trace=TraceLink("00-" + "1" * 32 + "-" + "2" * 16 + "-01", "k=v"))


def test_a_job_round_trips() -> None:
    data = encode_job(JOB, wall=lambda: 1000.0, perf=lambda: 102.5)
    got = decode_job(data, max_bytes=1 << 20, wall=lambda: 1001.0, perf=lambda: 500.0)
    assert got.t0 == pytest.approx(500.0 - 2.5 - 1.0)  # its age when sent, plus the trip
    assert dataclass_fields(got, "t0") == dataclass_fields(JOB, "t0")


def dataclass_fields(job: VerificationJob, *skip: str) -> dict[str, object]:
    return {f: getattr(job, f) for f in VerificationJob.__slots__ if f not in skip}


def test_pickle_on_the_stream_is_refused() -> None:
    with pytest.raises(JobFormatError, match="not JSON"):
        decode_job(pickle.dumps(JOB), max_bytes=1 << 20)


def _with(**change: object) -> bytes:
    raw = orjson.loads(encode_job(JOB))
    raw.update(change)
    return orjson.dumps(raw)


@pytest.mark.parametrize(("change", "message"), [
    ({"v": 2}, "format version"),
    ({"audit_id": "../../etc"}, "audit_id"),
    ({"kind": "exec"}, "kind/mode"),
    ({"messages": "hi"}, "messages"),
    ({"messages": [1]}, "messages"),
    ({"policy": ["default"]}, "policy"),
    ({"stream": 1}, "stream"),
    ({"age": True}, "age"),
    ({"trace": ["x" * 600, ""]}, "trace"),
    ({"kind": "candidates", "decided": None}, "decided"),
])
def test_a_wrong_field_is_a_format_error(change: dict[str, object], message: str) -> None:
    with pytest.raises(JobFormatError, match=message):
        decode_job(_with(**change), max_bytes=1 << 20)


def test_size_is_bounded_before_parsing() -> None:
    with pytest.raises(JobFormatError, match="over max_job_bytes"):
        decode_job(encode_job(JOB), max_bytes=100)


def test_the_audit_id_of_an_unreadable_job_is_peeked_only_when_safe() -> None:
    assert peek_audit_id(_with(v=9)) == "0" * 32
    assert peek_audit_id(_with(audit_id="a b")) is None
    assert peek_audit_id(b"\x80junk") is None
