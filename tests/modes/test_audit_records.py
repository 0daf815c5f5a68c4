"""The engine hands its Outcome to the audit sink; the sink builds the record."""

from __future__ import annotations

import copy
import os
import uuid
from pathlib import Path

import orjson
import pytest

from gateway.audit.sink import (
    EncodedRecord,
    JsonlAuditSink,
    MemoryAuditSink,
    NullAuditSink,
    encode,
    scrub,
)
from gateway.verify.outcome import AuditIds, CandidateOutcome, LayerOutcome, Outcome, new_audit_id


def _outcome() -> Outcome:
    o = Outcome(policy="p", policy_version="v1", mode="shadow", model="m")
    o.content = {"output": "x", "headers": {"authorization": "Bearer sk-secret"}}
    o.finish()
    return o


def test_jsonl_sink_builds_and_scrubs_the_record_on_its_thread(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    sink = JsonlAuditSink(path, flush_interval=60.0)  # only flush/close cut the wait short
    outcomes = [_outcome() for _ in range(3)]
    for o in outcomes:
        sink.write(o)
    sink.write({"audit_id": "mapping"})
    sink.flush()
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    assert [r["audit_id"] for r in lines] == [o.audit_id for o in outcomes] + ["mapping"]
    assert lines[0] == {**outcomes[0].to_dict(), "content": {"output": "x", "headers": {}}}
    sink.write(_outcome())
    sink.close()
    assert len(path.read_bytes().splitlines()) == 5 and sink.written == 5


def test_memory_and_null_sinks_take_an_outcome() -> None:
    memory = MemoryAuditSink()
    o = _outcome()
    memory.write(o)
    assert memory.records == [{**o.to_dict(), "content": {"output": "x", "headers": {}}}]
    NullAuditSink().write(o)


def test_audit_ids_are_unique_uuid4_hex() -> None:
    ids = [new_audit_id() for _ in range(2000)]  # spans several urandom pools
    assert len(set(ids)) == len(ids)
    for audit_id in ids[:300]:
        u = uuid.UUID(hex=audit_id)
        assert u.hex == audit_id and u.version == 4 and u.variant == uuid.RFC_4122


def test_pooled_audit_ids_are_unique_uuid4_hex() -> None:
    ids_of = AuditIds()
    ids = [ids_of() for _ in range(2000)]  # several draws of 256
    assert len(set(ids)) == len(ids)
    for audit_id in ids:
        u = uuid.UUID(hex=audit_id)
        assert u.hex == audit_id and u.version == 4 and u.variant == uuid.RFC_4122


def test_pooled_audit_ids_are_not_repeated_by_a_forked_child(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.verify import outcome

    parent = AuditIds()
    parent()
    child = copy.copy(parent)  # what a fork leaves the child: the same bytes, same place
    ours = [parent() for _ in range(5)]
    monkeypatch.setattr(outcome, "_forks", outcome._forks)
    outcome._forked()  # what os.register_at_fork runs in the child
    theirs = [child() for _ in range(5)]
    assert not set(ours) & set(theirs)


def _hostile_outcome() -> Outcome:
    """Credential-named keys in every mapping an outcome takes from elsewhere."""
    o = Outcome(policy="p", policy_version="v1", mode="shadow", model="m")
    o.upstream = {"name": "u", "attempts": 1, "Authorization": "Bearer sk-up"}
    o.attempt_history = [{"attempt": 1, "api_key": "sk-a", "failed_claims": ["c"]}]
    o.content = {"messages": [{"role": "user", "content": "hi", "x-api-key": "sk-m"}],
                 "headers": {"cookie": "s=1"}}
    o.shadow = {"result": "verified", "queue_ms": 1.0, "worker": 7, "api-key": "sk-s"}
    o.layers = [LayerOutcome("g", "grounding", score=0.5, explanation="why")]
    o.candidates = [CandidateOutcome("c", "v2", error="dropped")]
    o.finish()
    return o


def test_an_outcomes_audit_line_is_its_scrubbed_record() -> None:
    o = _hostile_outcome()
    line = o.audit_line()
    assert b"\n" not in line and b"sk-" not in line
    assert orjson.loads(line) == scrub(o.to_dict())


def _bare_outcomes() -> list[Outcome]:
    """Records nothing was verified for (shed, dropped, not an answer), with every
    field a bare record can hold set one way or another."""
    from gateway.verify.runner import shadow_info
    shed = Outcome(policy="p", policy_version="v1", mode="shadow", model="m", tenant="t",
                   stream=True, streaming="buffer", upstream={"name": "u", "attempts": 1})
    shed.upstream_status = 200
    shed.note = "not verified: the relay was saturated (shadow sample reduced)"
    shed.candidates = [CandidateOutcome("c", "v2", error="dropped"),
                       CandidateOutcome("d", "v3", verdict="pass", score=0.123456789,
                                        action="pass", error="Bearer sk-abcdefghijklmnop12")]
    shed.shadow = shadow_info("dropped")
    shed.trace_id = "ab" * 16
    shed.duration_ms = 1.23456789
    routed = Outcome(policy="p", policy_version="v1", mode="shadow", model="m",
                     upstream={"name": "u", "attempts": 3, "tried": ["a", "b"],
                               "reasons": ["status 503"], "fallback": True, "model": "x"})
    routed.shadow = {"result": "verified", "queue_ms": 2.5, "worker": 7}
    hostile = Outcome(policy="p", policy_version="v1", mode="shadow", model="m")
    hostile.upstream = {"name": "u", "attempts": 1, "Authorization": "Bearer sk-up"}
    hostile.shadow = {"result": "dropped", "queue_ms": None, "worker": None, "api-key": "k"}
    nested = Outcome(policy="p", policy_version="v1", mode="inline", model="m",
                     upstream={"name": "u", "tried": [{"cookie": "c", "name": "a"}]})
    with_layers = Outcome(policy="p", policy_version="v1", mode="shadow", model="m")
    with_layers.candidates = [CandidateOutcome("c", "v2", layers=[
        LayerOutcome("g", "grounding", score=0.5, explanation="why")])]
    out = [shed, routed, hostile, nested, with_layers,
           Outcome(policy="p", policy_version="v1", mode="shadow")]
    for o in out:
        o.finish()
    return out


def test_a_bare_records_direct_encoding_is_the_general_one_byte_for_byte() -> None:
    """What nothing was verified for (a shed shadow job's record, written once per
    request by a saturated relay) skips the general form: the same bytes, scrubbed."""
    for o in _bare_outcomes():
        line = o.audit_line()
        assert line == o._full_line()
        assert orjson.loads(line) == scrub(o.to_dict())
        assert b"sk-" not in line and b"cookie" not in line.lower() \
            and b"api-key" not in line and b"authorization" not in line.lower()
    verified = _hostile_outcome()  # layers: the general path
    assert verified.audit_line() == verified._full_line()


def test_an_encoded_record_gets_the_relays_fields_spliced_in(tmp_path: Path) -> None:
    o = _hostile_outcome()
    o.shadow = None
    shadow = {"result": "verified", "queue_ms": 2.5, "worker": 9}
    records = [EncodedRecord(encode(o.to_dict()), {"shadow": shadow}),
               EncodedRecord(encode({}), {"shadow": shadow}),
               EncodedRecord(encode({"audit_id": "x"})),
               EncodedRecord(encode({"a": 1}), {"shadow": {**shadow, "cookie": "c"}})]
    want = [{**scrub(o.to_dict()), "shadow": shadow}, {"shadow": shadow}, {"audit_id": "x"},
            {"a": 1, "shadow": shadow}]
    assert [r.to_dict() for r in records] == want
    memory = MemoryAuditSink()
    path = tmp_path / "a.jsonl"
    sink = JsonlAuditSink(path)
    for r in records:
        memory.write(r)
        sink.write(r)
    sink.close()
    assert memory.records == want
    assert [orjson.loads(line) for line in path.read_bytes().splitlines()] == want
