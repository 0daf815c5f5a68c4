"""The engine hands its Outcome to the audit sink; the sink builds the record."""

from __future__ import annotations

import copy
import os
import uuid
from pathlib import Path

import orjson
import pytest

from gateway.audit.sink import JsonlAuditSink, MemoryAuditSink, NullAuditSink
from gateway.verify.outcome import AuditIds, Outcome, new_audit_id


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
    parent = AuditIds()
    parent()
    child = copy.copy(parent)  # what a fork leaves the child: the same bytes, same place
    ours = [parent() for _ in range(5)]
    pid = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: pid + 1)
    theirs = [child() for _ in range(5)]
    assert not set(ours) & set(theirs)
