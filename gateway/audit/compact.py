"""Compaction: a closed JSONL audit file becomes three flat Parquet tables.

``X.jsonl`` (closed: see :func:`gateway.audit.layout.closed_segments`) is parsed once
with DuckDB and written as ``X.layers.parquet``, ``X.candidates.parquet`` and
``X.records.parquet`` (the tables of :mod:`gateway.audit.schema`; ``records`` keeps
the verbatim line in ``record``, sorted by ``started_at`` so that time filters skip
row groups) and its hourly rollup ``X.rollup-v1.parquet`` (:mod:`gateway.audit.rollup`),
each to a hidden temporary name first, made 0600, then renamed into place — the
rollup first, ``records`` last — and ``X.jsonl`` is removed.
:func:`write_missing_rollups` adds the rollup to files compacted before rollups. A reader takes the Parquet
files once ``X.records.parquet`` exists, so at no point is a record counted twice or
missed. Two processes never compact one file at once: each holds an exclusive
``flock`` on ``X.jsonl`` while it works, and the other skips the file.

JSONL parses at ~250 MB/s on two cores and Parquet reads an order of magnitude
faster with the columns a report needs (docs/design/audit-store.md); the rollups
spare the report and the dashboard most of those rows (docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import Any

from gateway.audit.layout import ROLLUP_SUFFIX, TABLES, group
from gateway.audit.rollup import rollup_path, write_rollup
from gateway.audit.schema import (
    SCALARS,
    candidates_select,
    json_shape,
    layers_select,
)

__all__ = ["compact_file", "compact_files", "parquet_paths", "write_missing_rollups"]

log = logging.getLogger("gateway.audit")


def parquet_paths(jsonl: Path) -> dict[str, Path]:
    """Table -> the Parquet file ``jsonl`` compacts into."""
    stem = str(jsonl)[:-len(".jsonl")]
    return {t: Path(f"{stem}.{t}.parquet") for t in TABLES}


def _connect(threads: int, memory_limit: str) -> Any:
    import duckdb

    return duckdb.connect(":memory:", config={"threads": threads, "memory_limit": memory_limit})


def compact_file(path: Path, *, threads: int = 1, memory_limit: str = "256MB",
                 con: Any = None) -> bool:
    """Compact ``path`` (see the module docstring); False when it is gone, being
    compacted by another process, or already compacted."""
    targets = parquet_paths(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if not path.exists():  # compacted and removed while we waited for the lock
            return False
        if targets["records"].exists():  # a crash after the renames, before the unlink
            path.unlink(missing_ok=True)
            return False
        own = con is None
        con = con or _connect(threads, memory_limit)
        try:
            _write_tables(con, path, targets)
        finally:
            if own:
                con.close()
        path.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def _write_tables(con: Any, path: Path, targets: dict[str, Path]) -> None:
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE src AS SELECT unnest(json_transform(json, "
        f"{json_shape()})), json::VARCHAR AS record "
        f"FROM read_ndjson_objects($files, ignore_errors = true, "
        f"maximum_object_size = 67108864)", {"files": [str(path)]})
    scalars = ", ".join(f'"{c}"' for c in SCALARS)
    selects = {
        "records": f"SELECT {scalars}, content IS NOT NULL AS has_content, record FROM src "
                   f"WHERE audit_id IS NOT NULL ORDER BY started_at",
        "layers": layers_select("src"),
        "candidates": candidates_select("src"),
    }
    temps = {t: p.with_name(f".{p.name}.tmp-{os.getpid()}") for t, p in targets.items()}
    try:
        # the rollup first: in place before records.parquet, so no reader sees the
        # stem compacted without it
        write_rollup(con, {"records": f"(SELECT {scalars} FROM src WHERE audit_id IS NOT NULL)",
                           "layers": f"({selects['layers']})",
                           "candidates": f"({selects['candidates']})"},
                     rollup_path(targets["records"]))
        for table in TABLES:
            quoted = str(temps[table]).replace("'", "''")
            con.execute(f"COPY ({selects[table]}) TO '{quoted}' "
                        f"(FORMAT parquet, COMPRESSION zstd)")
            os.chmod(temps[table], 0o600)
        for table in TABLES:  # records last: it is what makes readers switch
            os.replace(temps[table], targets[table])
    finally:
        for tmp in temps.values():
            with contextlib.suppress(OSError):
                tmp.unlink()
        con.execute("DROP TABLE IF EXISTS src")


def compact_files(paths: list[Path], *, threads: int = 1,
                  memory_limit: str = "256MB") -> list[Path]:
    """Compact each of ``paths`` with one DuckDB connection; the files compacted."""
    if not paths:
        return []
    con = _connect(threads, memory_limit)
    done = []
    try:
        for path in paths:
            try:
                if compact_file(path, con=con):
                    done.append(path)
            except Exception as exc:  # one bad file never stops the others
                log.error("audit compaction of %s failed: %s", path, exc)
    finally:
        con.close()
    return done


def write_missing_rollups(paths: list[Path], *, threads: int = 1,
                          memory_limit: str = "256MB") -> list[Path]:
    """Write the rollup of each compacted stem among ``paths`` that has none of the
    current version (compacted before rollups existed); the rollups written. Reads
    the stem's three Parquet tables; changes nothing else."""
    files = group(paths)
    todo = [r for r in files.records if r not in files.rolled_up]
    if not todo:
        return []
    tables = {str(p): p for p in (*files.layers, *files.candidates)}
    con = _connect(threads, memory_limit)
    done = []
    try:
        for records in todo:
            stem = str(records)[:-len(".records.parquet")]
            sources = {t: tables.get(f"{stem}.{t}.parquet") for t in ("layers", "candidates")}
            if any(v is None for v in sources.values()):
                continue
            quoted = {t: "'" + str(p).replace("'", "''") + "'"
                      for t, p in {"records": records, **sources}.items()}
            try:
                write_rollup(con, {t: f"read_parquet({q})" for t, q in quoted.items()},
                             Path(stem + ROLLUP_SUFFIX))
            except Exception as exc:  # one bad file never stops the others
                log.error("audit rollup of %s failed: %s", records, exc)
                continue
            done.append(Path(stem + ROLLUP_SUFFIX))
    finally:
        con.close()
    return done
