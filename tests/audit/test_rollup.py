"""Rollups answer exactly what a scan of every record answers; compaction is idempotent;
reading (report, dashboard, show, replay) never changes a file.

The store: ``bench/gen_audit.py`` records (the gateway's record shape: six policies,
candidates, unverified records, tenants and none) over 100 hours, two writers; some
files compacted with rollups, one compacted without (as before rollups existed), the
rest still JSONL — every path of :func:`gateway.audit.rollup.rolled` at once.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

duckdb = pytest.importorskip("duckdb", reason="the audit readers need the 'audit' extra")

from gateway.audit.compact import compact_file, write_missing_rollups  # noqa: E402
from gateway.audit.filters import AuditFilter  # noqa: E402
from gateway.audit.layout import ROLLUP_SUFFIX, find_files  # noqa: E402
from gateway.audit.report import summarize  # noqa: E402
from gateway.audit.store import AuditStore  # noqa: E402
from gateway.dashboard.data import list_records, overview  # noqa: E402

BENCH = Path(__file__).resolve().parents[2] / "bench"
END = datetime(2026, 11, 20, 6, 0, 0, tzinfo=UTC)
SPAN_HOURS = 100


def _gen_audit() -> Any:
    spec = importlib.util.spec_from_file_location("bench_gen_audit_rollup",
                                                  BENCH / "gen_audit.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rollup") / "audit"
    _gen_audit().generate(6000, root, weeks=SPAN_HOURS / (7 * 24), writers=2, rotate_mb=2.0,
                          end=END)
    files = sorted(root.rglob("*.jsonl"))
    assert len(files) >= 6
    for path in files[: len(files) - 2]:  # the newest two stay JSONL
        assert compact_file(path)
    rollups = sorted(root.rglob("*" + ROLLUP_SUFFIX))
    assert len(rollups) == len(files) - 2
    rollups[0].unlink()  # one stem compacted before rollups existed: read raw
    return root


def _hour(h: int, minute: int = 0) -> datetime:
    return (END - timedelta(hours=SPAN_HOURS) + timedelta(hours=h, minutes=minute)).replace(
        tzinfo=None)


FILTERS = {
    "everything": AuditFilter(),
    "since inside an hour": AuditFilter(since=_hour(3, 17)),
    "until inside an hour": AuditFilter(until=_hour(20, 43)),
    "both, inside hours": AuditFilter(since=_hour(2, 59), until=_hour(27, 1)),
    "days and hours": AuditFilter(since=_hour(10, 30), until=_hour(90, 10)),
    "midnight to midnight": AuditFilter(since=_hour(2), until=_hour(50)),  # 2 = 00:00
    "whole days": AuditFilter(since=_hour(2), until=_hour(50) - timedelta(microseconds=1)),
    "whole hours": AuditFilter(since=_hour(5), until=_hour(9) - timedelta(microseconds=1)),
    "until on the hour": AuditFilter(until=_hour(9)),
    "one hour's slice": AuditFilter(since=_hour(12, 10), until=_hour(12, 20)),
    "policy and tenant": AuditFilter(policy=("default", "strict-rag"), tenant=("team-a", "-")),
    "not verified": AuditFilter(verdict=("none",), since=_hour(1, 30)),
    "model, mode, action": AuditFilter(model=("gpt-4o",), mode=("shadow",),
                                       action=("block", "pass", "none")),
}


def _both(root: Path, fn: Any) -> tuple[Any, Any, AuditStore]:
    rolled = AuditStore(str(root))
    raw = AuditStore(str(root), rollups=False)
    try:
        return fn(rolled), fn(raw), rolled
    finally:
        rolled.close()
        raw.close()


@pytest.mark.parametrize("name", FILTERS)
def test_report_from_rollups_equals_the_raw_scan(store_dir: Path, name: str) -> None:
    where = FILTERS[name]
    fast, slow, store = _both(store_dir, lambda s: summarize(s, where))
    assert fast == slow
    if name == "everything":
        assert fast["records"] == 6000 and fast["candidates"] and fast["layers"]
        assert any(o["verdict"] is None for o in fast["outcomes"])


@pytest.mark.parametrize("name", FILTERS)
def test_dashboard_overview_from_rollups_equals_the_raw_scan(store_dir: Path,
                                                             name: str) -> None:
    fast, slow, _ = _both(store_dir, lambda s: overview(s, FILTERS[name]))
    assert fast == slow
    assert fast.total == fast.summary["records"]
    if name in ("everything", "since inside an hour"):
        assert fast.unit == "day"  # daily buckets: the /day rows
    elif name == "both, inside hours":
        assert fast.unit == "hour"


def test_the_rollups_are_what_is_read(store_dir: Path) -> None:
    """The compacted hours come from the rollups, not from their records (else the
    comparisons above would compare a raw scan with itself)."""
    store = AuditStore(str(store_dir))
    try:
        assert store.files.rollups and store.files.jsonl
        assert len(store.files.rolled_up) == len(store.files.records) - 1
        (rolled,) = store.query("SELECT sum(n) FROM rollup WHERE part = 'records'")[0]
        (done,) = store.query("SELECT count(*) FROM records_done")[0]
        (open_,) = store.query("SELECT count(*) FROM records_open")[0]
        assert rolled == done > 0 and open_ > 0 and done + open_ == 6000
        (daily,) = store.query("SELECT sum(n) FROM rollup WHERE part = 'records/day'")[0]
        assert daily == done
        (rows,) = store.query("SELECT count(*) FROM rollup WHERE part = 'records/day'")[0]
        assert rows < done  # rows are groups of records
    finally:
        store.close()


def _files(root: Path) -> dict[str, tuple[int, int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_mode)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_compaction_and_rollups_are_idempotent(tmp_path: Path) -> None:
    root = tmp_path / "audit"
    _gen_audit().generate(800, root, weeks=0.05, writers=1, rotate_mb=0.5, end=END)
    jsonl = sorted(root.rglob("*.jsonl"))
    for path in jsonl:
        assert compact_file(path)
    store = AuditStore(str(root))
    first = summarize(store)
    store.close()
    written = _files(root)
    for path in jsonl:
        assert not compact_file(path)  # already compacted: nothing happens
    assert write_missing_rollups(find_files(str(root)).all()) == []
    assert _files(root) == written
    # A stem without its rollup gets it back, identical to the one compaction wrote.
    (gone := sorted(root.rglob("*" + ROLLUP_SUFFIX))[0]).unlink()
    again = write_missing_rollups(find_files(str(root)).all())
    assert again == [gone] and gone.exists()
    assert write_missing_rollups(find_files(str(root)).all()) == []
    store = AuditStore(str(root))
    try:
        assert summarize(store) == first
    finally:
        store.close()


def test_reading_never_changes_a_file(store_dir: Path) -> None:
    """Report, tail, show, dashboard queries and replay leave every file as it was:
    same names, sizes, modification times and modes, nothing added."""
    before = _files(store_dir)
    store = AuditStore(str(store_dir))
    try:
        summarize(store, FILTERS["both, inside hours"])
        overview(store, FILTERS["policy and tenant"])
        rows, _ = list_records(store, AuditFilter())
        store.full_records([r["audit_id"] for r in rows[:5]])
    finally:
        store.close()
    env = {"PATH": "/usr/bin:/bin", "GATEWAY_AUDIT__PATH": str(store_dir)}
    policy = Path(__file__).resolve().parents[2] / "policies" / "default.yaml"
    for args in (("report",), ("report", "--since", "2026-11-19T03:17", "--json"),
                 ("tail", "-n", "5"), ("show", rows[0]["audit_id"][:10]),
                 ("replay", "--policy", str(policy), "--limit", "20", "--jobs", "1")):
        proc = subprocess.run([sys.executable, "-m", "gateway", "audit", *args],
                              capture_output=True, text=True, timeout=300, env=env,
                              cwd=str(store_dir.parent))
        assert proc.returncode == 0, (args, proc.stderr)
    assert _files(store_dir) == before
    assert os.listdir(store_dir.parent) == ["audit"]


def test_retention_deletes_a_rollup_with_its_file(tmp_path: Path) -> None:
    from gateway.audit.maintain import Retention, apply_retention

    root = tmp_path / "audit"
    _gen_audit().generate(300, root, weeks=0.05, writers=1, rotate_mb=64.0, end=END)
    for jsonl in sorted(root.rglob("*.jsonl")):
        assert compact_file(jsonl)
    old = root / "date=2026-11-01" / "verity-h-1-s-00001.rollup-v0.parquet"  # any version
    old.parent.mkdir()
    old.write_bytes(b"x")
    deleted = apply_retention(root, Retention(days=1, max_bytes=None),
                              now=END.timestamp() + 30 * 86400, max_age=60)
    assert {p.name.split(".", 1)[1] for p in deleted} == {
        "records.parquet", "layers.parquet", "candidates.parquet", "rollup-v1.parquet",
        "rollup-v0.parquet"}
    assert not any(p.is_file() for p in root.rglob("*"))
