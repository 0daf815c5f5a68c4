"""``fleet.ledger.recorded``: the record a dead worker wrote is found in one JSONL file
and in a directory layout (``gateway.audit.layout``), written by the real audit sink."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("redis")

from gateway.audit.sink import JsonlAuditSink  # noqa: E402
from gateway.fleet.ledger import recorded  # noqa: E402


def _write(path: Path, ids: list[str]) -> None:
    sink = JsonlAuditSink(path)
    try:
        for audit_id in ids:
            sink.write({"audit_id": audit_id, "verdict": "pass", "shadow": {"result": "verified"}})
    finally:
        sink.close()


def test_one_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, ["a" * 32, "b" * 32])
    assert recorded(str(path), "b" * 32)
    assert not recorded(str(path), "c" * 32)
    assert not recorded(str(tmp_path / "missing.jsonl"), "a" * 32)
    assert not recorded(None, "a" * 32)


def test_directory_layout(tmp_path: Path) -> None:
    """Two writers of this host (a dead worker's and the next one's) in the directory:
    a record in either is found; one not written is not."""
    root = tmp_path / "audit"
    _write(root, ["a" * 32])
    _write(root, ["b" * 32])
    files = sorted(root.rglob("*.jsonl"))
    assert len(files) == 2 and all(f.parent.name.startswith("date=") for f in files)
    assert recorded(str(root), "a" * 32)
    assert recorded(str(root), "b" * 32)
    assert not recorded(str(root), "c" * 32)


def test_directory_other_host_and_budget(tmp_path: Path) -> None:
    """Another host's files are not read (its record is written again: a duplicate,
    never a loss), and the byte budget bounds the search."""
    root = tmp_path / "audit"
    _write(root, ["a" * 32])
    (file,) = root.rglob("*.jsonl")
    other = file.with_name("verity-elsewhere-1-20260101T000000000000-00001.jsonl")
    file.rename(other)
    assert not recorded(str(root), "a" * 32)
    _write(root, ["b" * 32])
    assert recorded(str(root), "b" * 32)
    assert not recorded(str(root), "b" * 32, tail=0)
