"""The audit at scale: directory layout, rotation, compaction, retention, DuckDB reads."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

duckdb = pytest.importorskip("duckdb", reason="the audit readers need the 'audit' extra")

from gateway.audit.compact import compact_file, parquet_paths  # noqa: E402
from gateway.audit.filters import AuditFilter  # noqa: E402
from gateway.audit.layout import closed_segments, find_files, writer_of  # noqa: E402
from gateway.audit.maintain import Retention, apply_retention  # noqa: E402
from gateway.audit.report import summarize  # noqa: E402
from gateway.audit.sink import JsonlAuditSink, open_audit_sink  # noqa: E402
from gateway.audit.store import AuditStore  # noqa: E402
from gateway.audit.writer import SegmentWriter  # noqa: E402
from gateway.settings import AuditConfig  # noqa: E402


def rec(i: int, *, policy: str = "p", verdict: str | None = "pass", tenant: str | None = None,
        day: str = "2026-11-25", content: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "audit_id": f"{i:032x}", "policy": policy, "mode": "shadow", "model": "m",
        "tenant": tenant, "started_at": f"{day}T10:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
        "duration_ms": 12.5, "verdict": verdict, "score": 0.9 if verdict else None,
        "action": ("block" if verdict == "fail" else "pass") if verdict else None,
        "applied": False, "note": None if verdict else "not verified: shadow_queue_full",
        "layers": [{"key": "kw", "name": "keyword", "score": 1.0 if verdict == "pass" else 0.0,
                    "passed": verdict == "pass", "latency_ms": 1.0 + i % 7},
                   {"key": "judge", "name": "judge", "score": 0.5, "passed": True,
                    "latency_ms": 100.0, "judge_calls": 1, "cost": 0.001}],
        "candidates": [{"name": "c", "verdict": "fail", "action": "block"}],
    }
    if content:
        out["content"] = {"messages": [{"role": "user", "content": "q"}], "answer": "a"}
    return out


def write_jsonl(path: Path, records: list[dict[str, Any]], tail: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + tail)
    return path


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        h.update(str(path).encode())
        if path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_segments_rotate_by_size_age_and_day(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 11, 25, 23, 0, tzinfo=UTC).timestamp())
    closed: list[Path] = []
    w = SegmentWriter(tmp_path / "a", max_bytes=100, max_age=600, on_close=closed.append,
                      clock=clock)
    w.append(b"x" * 60 + b"\n")
    w.append(b"y" * 60 + b"\n")  # the file is not full yet: same file
    assert len(w.files) == 1
    w.append(b"z\n")  # past 100 bytes: a new file
    assert len(w.files) == 2 and closed == w.files[:1]
    clock.t += 601
    w.tick()  # idle but old: closed without a write
    assert closed == w.files[:2] and w.current is None
    clock.t += 3600  # next UTC day
    w.append(b"d\n")
    w.close()
    days = [p.parent.name for p in w.files]
    assert days == ["date=2026-11-25"] * 2 + ["date=2026-11-26"]
    assert [writer_of(p)[1] for p in w.files] == [1, 2, 3]  # type: ignore[index]
    assert len({writer_of(p)[0] for p in w.files}) == 1  # type: ignore[index]
    assert stat.S_IMODE(os.stat(w.files[0]).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o700


def test_processes_write_side_by_side_and_read_as_one(tmp_path: Path) -> None:
    """Two gateway processes (or pods) on one directory: files of their own, read as one."""
    code = ("import sys; from gateway.audit.sink import JsonlAuditSink\n"
            "s = JsonlAuditSink(sys.argv[1], rotate_bytes=4000)\n"
            "for i in range(200): s.write({'audit_id': f'{sys.argv[2]}{i:031x}', "
            "'policy': 'p', 'started_at': '2026-11-25T10:00:00Z', 'verdict': 'pass'}); "
            "i % 50 or s.flush()\n"  # a batch is never split: rotation happens between
            "s.close()\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(n)])
             for n in (1, 2)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    files = find_files(str(tmp_path)).jsonl
    assert len({writer_of(p)[0] for p in files}) == 2 and len(files) > 2  # type: ignore[index]
    store = AuditStore(str(tmp_path))
    try:
        assert store.query("SELECT count(*), count(DISTINCT audit_id) FROM records") == \
            [(400, 400)]
    finally:
        store.close()


def test_a_torn_line_is_skipped_and_reading_changes_nothing(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    tmp_path = tmp_path / "audit"
    path = write_jsonl(tmp_path / "a.jsonl", [rec(1), rec(2, verdict="fail"), rec(3, verdict=None)],
                       tail=b'{"audit_id": "torn", "pol')
    before = tree_hash(tmp_path)
    store = AuditStore(str(path))
    try:
        summary = summarize(store)
        assert summary["records"] == 3
        assert [(o["verdict"], o["count"]) for o in summary["outcomes"]] == \
            [("fail", 1), ("pass", 1), (None, 1)]
        assert summary["layers"]["p/judge"]["cost"] == pytest.approx(0.003)
        (cand,) = summary["candidates"]
        # The candidate blocks all three: two more than live (pass, unverified), none fewer.
        assert (cand["would_block_more"], cand["would_block_fewer"]) == (2, 0)
        with pytest.raises(duckdb.Error):  # fenced in: nothing outside the audit's folders
            store.query(f"COPY records TO '{outside / 'x.parquet'}'")
        with pytest.raises(duckdb.Error):
            store.query("SELECT * FROM read_text('/etc/hostname')")
    finally:
        store.close()
    assert tree_hash(tmp_path) == before


def test_filters_are_parameters_not_sql(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [rec(1, tenant="t1"), rec(2, tenant="t2"),
                                              rec(3, policy="q'); DROP TABLE j; --")])
    store = AuditStore(str(path))
    try:
        def n(**kw: Any) -> int:
            cond, params = AuditFilter.build(**kw).sql()
            return int(store.query(f"SELECT count(*) FROM records WHERE {cond}", params)[0][0])
        assert n(tenant=["t1"]) == 1 and n(tenant=["-"]) == 1 and n(tenant=["t1,t2"]) == 2
        assert n(policy=["q'); DROP TABLE j; --"]) == 1 and n() == 3
        assert n(since="2026-11-25T10:00:02Z") == 2 and n(until="2026-11-25T10:00:01") == 1
    finally:
        store.close()
    assert AuditFilter.build(tenant=["-"]).matches({"tenant": None})
    assert not AuditFilter.build(verdict=["fail"]).matches({"verdict": "pass"})


def test_compaction_keeps_every_record_once(tmp_path: Path) -> None:
    day = tmp_path / "date=2026-11-25"
    records = [rec(i, verdict=("pass", "fail", None)[i % 3], content=i % 2 == 0)
               for i in range(30)]
    jsonl = write_jsonl(day / "verity-h-1-s-00001.jsonl", records, tail=b'{"torn')
    store = AuditStore(str(tmp_path))
    before = summarize(store)
    shown = store.full_records([rec(4)["audit_id"]])
    store.close()
    assert compact_file(jsonl)
    assert not jsonl.exists() and all(p.exists() for p in parquet_paths(jsonl).values())
    assert stat.S_IMODE(os.stat(parquet_paths(jsonl)["records"]).st_mode) == 0o600
    store = AuditStore(str(tmp_path))
    try:
        assert summarize(store) == before
        assert store.full_records([rec(4)["audit_id"]]) == shown
        assert store.query("SELECT count(*) FROM records WHERE has_content") == [(15,)]
    finally:
        store.close()
    # A crash between the renames and the unlink: the JSONL is back beside its tables.
    write_jsonl(jsonl, records)
    store = AuditStore(str(tmp_path))
    try:
        assert summarize(store)["records"] == 30
    finally:
        store.close()
    assert not compact_file(jsonl) and not jsonl.exists()  # the leftover is removed


def test_only_closed_files_are_compacted_or_deleted(tmp_path: Path) -> None:
    old = tmp_path / "date=2026-10-01"
    a1 = write_jsonl(old / "verity-h-1-s-00001.jsonl", [rec(1, day="2026-10-01")])
    a2 = write_jsonl(old / "verity-h-1-s-00002.jsonl", [rec(2, day="2026-10-01")])
    now = datetime(2026, 11, 25, tzinfo=UTC).timestamp()
    os.utime(a1, (now - 10, now - 10))
    os.utime(a2, (now - 10, now - 10))
    # a2 is its writer's newest file, touched 10 s ago: a writer may still append to it
    assert closed_segments(tmp_path, now=now, max_age=3600) == [a1]
    deleted = apply_retention(tmp_path, Retention(days=7), now=now, max_age=3600)
    assert deleted == [a1] and a2.exists()
    assert closed_segments(tmp_path, now=now + 7200, max_age=3600) == [a2]  # writer gone


def test_retention_by_size_deletes_the_oldest_first(tmp_path: Path) -> None:
    now = datetime(2026, 11, 25, 12, tzinfo=UTC).timestamp()
    paths = []
    for n, day in enumerate(("2026-11-20", "2026-11-21", "2026-11-22")):
        path = write_jsonl(tmp_path / f"date={day}" / f"verity-h-{n}-s-00001.jsonl",
                           [rec(i, day=day) for i in range(20)])
        os.utime(path, (now - 86400, now - 86400))
        paths.append(path)
    size = paths[0].stat().st_size
    deleted = apply_retention(tmp_path, Retention(max_bytes=int(size * 1.5)), now=now)
    assert deleted == paths[:2] and paths[2].exists()
    assert not (tmp_path / "date=2026-11-20").exists()  # an emptied folder goes too


def test_configured_sink_rotates_compacts_and_reads(tmp_path: Path) -> None:
    root = tmp_path / "audit"
    config = AuditConfig(path=str(root), rotate_mb=0.002, compact=True)
    sink = open_audit_sink(config)
    for i in range(40):
        sink.write(rec(i))
        sink.flush()  # one batch each: rotation happens between batches
    sink.maintainer.wait_idle()  # type: ignore[attr-defined]
    sink.close()  # the last file is closed; compacting it is left to the next start
    files = find_files(str(root))
    assert len(files.jsonl) == 1 and len(files.records) > 1
    last = files.jsonl[0]
    os.utime(last, (last.stat().st_mtime - 10,) * 2)
    again = open_audit_sink(AuditConfig(path=str(root), compact=True, rotate_seconds=5))
    again.maintainer.wait_idle()  # type: ignore[attr-defined]
    again.close()
    assert not find_files(str(root)).jsonl  # its writer is gone: compacted at start
    store = AuditStore(str(root))
    try:
        assert store.query("SELECT count(DISTINCT audit_id), count(*) FROM records") == \
            [(40, 40)]
    finally:
        store.close()


def test_a_restart_after_a_torn_line_keeps_the_next_record_whole(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [rec(1)], tail=b'{"audit_id": "to')
    sink = JsonlAuditSink(path)
    sink.write(rec(2))
    sink.close()
    lines = path.read_bytes().splitlines()
    assert lines[1] == b'{"audit_id": "to' and json.loads(lines[2])["audit_id"] == rec(2)["audit_id"]


def test_audit_settings_are_checked_and_read_from_the_environment() -> None:
    from gateway.settings import ConfigError, load_settings

    s = load_settings(environ={"GATEWAY_AUDIT__PATH": "/var/audit",
                               "GATEWAY_AUDIT__COMPACT": "true",
                               "GATEWAY_AUDIT__RETENTION_DAYS": "14"})
    assert s.audit.is_directory() and s.audit.compact and s.audit.retention_days == 14
    assert not AuditConfig(path="x.jsonl").is_directory()
    for bad in ({"rotate_mb": 0}, {"retention_mb": -1}, {"dashboard": {"path": "/"}},
                {"dashboard": {"path": "/a", "keys": ["k"], "jaeger_url": "jaeger:16686"}}):
        with pytest.raises(ConfigError):
            load_settings(environ={}, overrides={"audit": bad})
