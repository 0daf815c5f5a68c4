"""``bench/gen_audit.py`` writes records in the audit sink's shape, in the layout it says.

No timing: the generator feeds the audit-store benchmarks (docs/design/audit-store.md),
which are only meaningful if its records are the gateway's records.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import orjson

from gateway.verify.outcome import Outcome

BENCH = Path(__file__).resolve().parents[2] / "bench"
spec = importlib.util.spec_from_file_location("bench_gen_audit", BENCH / "gen_audit.py")
assert spec is not None and spec.loader is not None
gen_audit = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = gen_audit
spec.loader.exec_module(gen_audit)


def records(paths: list[Path]) -> list[dict[str, object]]:
    return [orjson.loads(line) for p in paths for line in p.read_bytes().splitlines()]


def test_one_file_of_records_in_the_sink_shape(tmp_path: Path) -> None:
    out = tmp_path / "audit.jsonl"
    assert gen_audit.generate(2000, out, weeks=1) == [out]
    recs = records([out])
    assert len(recs) == 2000 and len({r["audit_id"] for r in recs}) == 2000
    keys = set(Outcome(policy="p", policy_version="v", mode="inline").to_dict())
    assert all(set(r) - {"content"} == keys for r in recs)
    started = [r["started_at"] for r in recs]
    assert started == sorted(started)  # append order is time order
    assert {r["mode"] for r in recs} == {"inline", "shadow"}
    assert any(r["verdict"] is None and r["note"] for r in recs)  # never verified
    assert any(r["candidates"] for r in recs) and any(r["attempt_history"] for r in recs)
    assert any("content" in r for r in recs)
    assert gen_audit.generate(2000, tmp_path / "again.jsonl", weeks=1)
    assert [r["audit_id"] for r in records([tmp_path / "again.jsonl"])] == [
        r["audit_id"] for r in recs]  # deterministic per seed


def test_directory_of_rotated_per_writer_day_files(tmp_path: Path) -> None:
    files = gen_audit.generate(600, tmp_path / "dir", weeks=1, writers=3, rotate_mb=0.1)
    assert {p.parent.name[:5] for p in files} == {"date="}
    assert {p.name.split("-")[1] for p in files} == {"pod0", "pod1", "pod2"}
    assert len(records(files)) == 600
    for path in files:  # a file holds one day's records
        days = {str(r["started_at"])[:10] for r in records([path])}
        assert days == {path.parent.name.removeprefix("date=")}
