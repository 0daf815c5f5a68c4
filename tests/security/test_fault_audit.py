"""Fault suite, audit integrity: SIGKILL under load, a restart after it, and two
``gateway serve`` processes appending to one audit file.

The audit file is the record of what was verified; a reader (``gateway audit``,
DuckDB, a SIEM) parses it line by line. Whatever happens to the process, every line
is one whole JSON record, or at most the very last one is torn (a kill during a
write); what was written before a kill is still there; a process started after such
a crash begins a new line; records of concurrent requests, or of two processes, never
interleave. Counting records against completed
requests after SIGTERM is ``test_fault_shutdown.py``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from security.hostile import HostileUpstream
from security.load import Load
from security.process import serve_gateway, start_gateway

POLICIES = {
    "guard": """
mode: inline
match: {models: ["*-inline"]}
layers: [{name: keyword, config: {block: [zzz]}}]
""",
    "watch": """
mode: shadow
match: {models: ["*-shadow"]}
layers: [{name: keyword, config: {block: [zzz]}}]
""",
}
MODELS = ["ok-inline", "ok-shadow"]
TORN = b'{"audit_id": "torn-by-a-crash", "policy": "guard", "mode": "inl'
"""What a process killed during a write leaves at the end of the file."""


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileUpstream]:
    with HostileUpstream() as up:
        yield up


def _config(hostile: HostileUpstream, audit: Path) -> dict[str, Any]:
    return {"upstreams": [{"name": "ok", "base_url": hostile.base_url("ok")}],
            "audit": {"path": str(audit)}}


def _lines(data: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """The complete lines parsed (each must be one JSON record), and the torn tail."""
    *complete, tail = data.split(b"\n")
    return [orjson.loads(line) for line in complete], tail


def _complete_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@dataclass
class Crash:
    on_disk_before: int
    """Complete lines the file held before the kill."""
    after: bytes
    """The file right after the kill."""
    status: int


@pytest.fixture(scope="module")
def crash(hostile: HostileUpstream, tmp_path_factory: pytest.TempPathFactory) -> Crash:
    """A gateway started on an audit file an earlier crash left torn, killed under load."""
    directory = tmp_path_factory.mktemp("sigkill")
    audit = directory / "audit.jsonl"
    audit.write_bytes(TORN)  # what a kill during a write leaves (rare by chance)
    with serve_gateway(directory, _config(hostile, audit), policies=POLICIES) as gw:
        load = Load([gw.url], MODELS, threads=4)
        try:
            deadline = time.monotonic() + 30
            while _complete_lines(audit) < 100:  # the writer thread has flushed these
                assert time.monotonic() < deadline, "the audit file did not grow"
                time.sleep(0.02)
            before = _complete_lines(audit)
            gw.signal(signal.SIGKILL)  # mid-load: requests and writes in flight
            status = gw.wait(10)
        finally:
            load.stop()
        return Crash(before, audit.read_bytes(), status)


def test_sigkill_loses_nothing_written_and_tears_at_most_the_last_line(crash: Crash) -> None:
    assert crash.status == -signal.SIGKILL
    assert crash.after.startswith(TORN)
    _, _, rest = crash.after.partition(b"\n")  # the earlier crash's line: skipped
    records, tail = _lines(rest)  # raises if any complete line is not one record
    assert len(records) + 1 >= crash.on_disk_before
    ids = [r["audit_id"] for r in records]
    assert len(ids) == len(set(ids))
    assert tail == b"" or not tail.endswith(b"}"), tail[-200:]  # if torn, only the end


def test_a_restart_after_a_torn_line_starts_a_new_one(crash: Crash) -> None:
    # The torn line stays one bad line (readers skip it); the next record is whole.
    first, rest = crash.after.split(b"\n", 1)
    assert first == TORN, crash.after[:300]
    assert orjson.loads(rest.split(b"\n", 1)[0])["audit_id"]


def test_two_processes_appending_to_one_file_never_interleave(
        hostile: HostileUpstream, tmp_path: Path) -> None:
    # Not a recommended set-up (one file per process is: docs/security.md), but one an
    # operator can make: both append whole lines, so neither corrupts the other's.
    audit = tmp_path / "shared.jsonl"
    gws = [start_gateway(tmp_path / name, _config(hostile, audit), policies=POLICIES)
           for name in ("a", "b")]
    try:
        for gw in gws:
            gw.ready()
        load = Load([gw.url for gw in gws], MODELS, threads=4)
        try:
            load.wait_for(100)
        finally:
            load.stop()
    finally:
        statuses = [gw.stop() for gw in gws]
    assert all(s in (0, -signal.SIGTERM) for s in statuses)
    records, tail = _lines(audit.read_bytes())
    assert tail == b""
    ids = [r["audit_id"] for r in records]
    assert len(ids) == len(set(ids)) == load.count()
    assert set(ids) == set(load.completed)
    assert set(load.statuses) == {200} and load.errors == []
