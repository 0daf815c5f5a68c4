"""The audit sink: append-only JSONL, off the event loop, no secrets."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import orjson

from gateway.audit.sink import (
    AuditSink,
    JsonlAuditSink,
    MemoryAuditSink,
    NullAuditSink,
    open_audit_sink,
    scrub,
)


def test_jsonl_lines_are_appended_and_flushed_on_close(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "audit.jsonl"
    sink = JsonlAuditSink(path)
    for i in range(100):
        sink.write({"audit_id": str(i), "score": i / 100})
    sink.close()
    lines = path.read_bytes().splitlines()
    assert [orjson.loads(x)["audit_id"] for x in lines] == [str(i) for i in range(100)]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = JsonlAuditSink(path)  # append-only: a restart keeps what was there
    again.write({"audit_id": "next"})
    again.close()
    assert len(path.read_bytes().splitlines()) == 101


def test_writes_happen_on_the_writer_thread(tmp_path: Path) -> None:
    sink = JsonlAuditSink(tmp_path / "a.jsonl")
    sink.write({"audit_id": "x"})
    sink.flush()
    assert sink.written == 1
    assert sink._thread is not threading.current_thread() and sink._thread.is_alive()
    sink.close()
    assert not sink._thread.is_alive()
    sink.write({"audit_id": "after close"})  # ignored, not an error
    sink.close()


def test_secret_keys_are_scrubbed_at_any_depth(tmp_path: Path) -> None:
    record = {"audit_id": "1", "authorization": "Bearer sk-live-abc",
              "nested": {"Api-Key": "sk-1", "x-api-key": "k", "keep": [{"cookie": "c", "ok": 1}]}}
    assert scrub(record) == {"audit_id": "1", "nested": {"keep": [{"ok": 1}]}}
    path = tmp_path / "a.jsonl"
    sink = JsonlAuditSink(path)
    sink.write(record)
    sink.close()
    assert b"sk-" not in path.read_bytes()


def test_sinks_follow_the_protocol(tmp_path: Path) -> None:
    assert isinstance(open_audit_sink(None), NullAuditSink)
    jsonl = open_audit_sink(str(tmp_path / "x.jsonl"))
    assert isinstance(jsonl, JsonlAuditSink)
    jsonl.close()
    memory = MemoryAuditSink()
    memory.write({"authorization": "x", "a": 1})
    assert memory.records == [{"a": 1}]
    for sink in (NullAuditSink(), memory):
        assert isinstance(sink, AuditSink)
