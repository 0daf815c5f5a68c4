"""Reading the audit with DuckDB: the flat tables over JSONL and Parquet, read-only.

:class:`AuditStore` opens an in-memory DuckDB database over the files
:func:`gateway.audit.layout.find_files` finds for a path (a file, a directory or a
glob) and defines the three flat tables of :mod:`gateway.audit.schema` as views:
compacted Parquet tables are read in place; JSONL files (open, or never compacted)
are parsed once, with the explicit schema, into an in-memory table (a torn line
becomes a row of nulls and is left out). :meth:`AuditStore.query` runs SQL over
``records``, ``layers`` and ``candidates``; :meth:`AuditStore.full_records` returns
whole records (the verbatim line) by id. Each table is also split in two views —
``<table>_done``, the compacted files that have a rollup, and ``<table>_open``, the
rest — and ``rollup`` reads those rollups: what :func:`gateway.audit.rollup.rolled`
combines (``rollups=False`` makes the readers scan every record instead).

**Nothing read from the audit alters it.** The database lives in memory; no
statement this module issues writes (no ``COPY``, ``ATTACH``, ``INSTALL``, ``CREATE``
outside the in-memory catalog); and once the views exist, the connection is fenced
in — it may open files only under the folders it reads, extensions cannot be
loaded, and the configuration is locked (``enable_external_access``,
``allowed_directories``, ``lock_configuration``). Every statement runs under one
lock, so one store may serve several threads (the dashboard); a store with
``refresh_seconds`` re-lists its files at most that often and rebuilds its views
when any changed (new records, a rotation, a compaction).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from gateway.audit.layout import AuditFiles, find_files
from gateway.audit.rollup import empty_rollup
from gateway.audit.schema import (
    CANDIDATE,
    LAYER,
    SCALARS,
    candidates_select,
    json_columns,
    layers_select,
    sql_struct,
)

__all__ = ["AuditStore", "sql_list"]

MAX_OBJECT_BYTES = 64 * 1024 * 1024
"""Largest JSON line read (a record with recorded content can be large)."""


def sql_list(paths: Sequence[Path | str]) -> str:
    """A SQL list literal of file names (quotes doubled: names are data, not SQL)."""
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


def _records_of(files: AuditFiles, table: str) -> list[Path]:
    """The ``X.records.parquet`` of each of ``files``' ``table`` Parquet files."""
    if table == "records":
        return list(files.records)
    suffix = f".{table}.parquet"
    return [Path(str(p)[:-len(suffix)] + ".records.parquet") for p in getattr(files, table)]


class AuditStore:
    """The audit under ``spec``, as DuckDB views (see the module docstring).

    ``since`` / ``until`` only prune ``date=`` folders (queries filter rows
    themselves); ``threads`` and ``memory_limit`` bound DuckDB (its defaults: every
    core, 80 % of memory)."""

    def __init__(self, spec: str, *, since: datetime | None = None,
                 until: datetime | None = None, threads: int | None = None,
                 memory_limit: str | None = None, refresh_seconds: float | None = None,
                 rollups: bool = True) -> None:
        self.spec = spec
        self.rollups = rollups
        """Whether counts may come from rollups (False: every record read raw)."""
        self._since, self._until = since, until
        self._config: dict[str, Any] = {}
        if threads:
            self._config["threads"] = threads
        if memory_limit:
            self._config["memory_limit"] = memory_limit
        self.refresh_seconds = refresh_seconds
        self._lock = threading.Lock()
        self._con: Any = None
        self._signature: tuple[tuple[str, int, int], ...] = ()
        self._checked = 0.0
        self.files = AuditFiles()
        self._open()

    # -- building ------------------------------------------------------------------------

    def _open(self) -> None:
        files = find_files(self.spec, since=self._since, until=self._until)
        signature = files.signature()
        if self._con is not None and signature == self._signature:
            return
        import duckdb

        con = duckdb.connect(":memory:", config=self._config)
        try:
            # Parquet footers read once per store, not once per query (every query
            # binds the views again, over every file)
            con.execute("SET parquet_metadata_cache = true")
            self._build(con, files)
            dirs = [str(d) + "/" for d in files.directories()]
            con.execute("SET allowed_directories = $dirs", {"dirs": dirs})
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
        except BaseException:
            con.close()
            raise
        old, self._con = self._con, con
        self.files, self._signature = files, signature
        if old is not None:
            old.close()

    @staticmethod
    def _build(con: Any, files: AuditFiles) -> None:
        cols = {**SCALARS, "layers": sql_struct(LAYER) + "[]",
                "candidates": sql_struct(CANDIDATE) + "[]", "has_content": "BOOLEAN",
                "_file": "VARCHAR"}
        con.execute("CREATE TABLE j (" + ", ".join(f'"{k}" {v}' for k, v in cols.items())
                    + ")")
        if files.jsonl:
            scalars = ", ".join(f'"{c}"' for c in SCALARS)
            con.execute(
                f"INSERT INTO j SELECT {scalars}, layers, candidates, "
                f"content IS NOT NULL, filename FROM read_ndjson($files, "
                f"columns = {json_columns()}, ignore_errors = true, filename = true, "
                f"maximum_object_size = {MAX_OBJECT_BYTES}) WHERE audit_id IS NOT NULL",
                {"files": [str(p) for p in files.jsonl]})
        scalars = ", ".join(f'"{c}"' for c in (*SCALARS, "has_content"))
        from_j = {"records": f"SELECT {scalars} FROM j", "layers": layers_select("j"),
                  "candidates": candidates_select("j")}
        for table, own in from_j.items():
            what = scalars if table == "records" else "*"
            stems: dict[str, list[Path]] = {"open": [], "done": []}
            for path, records in zip(getattr(files, table), _records_of(files, table),
                                     strict=True):
                stems["done" if records in files.rolled_up else "open"].append(path)
            views: dict[str, list[str]] = {"open": [own],
                                           "done": [f"SELECT * FROM ({own}) WHERE false"]}
            for kind, paths in stems.items():
                if paths:
                    views[kind].append(f"SELECT {what} FROM read_parquet({sql_list(paths)}, "
                                       f"union_by_name = true)")
            for kind, selects in views.items():
                con.execute(f"CREATE VIEW {table}_{kind} AS "
                            + " UNION ALL BY NAME ".join(selects))
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM {table}_open "
                        f"UNION ALL BY NAME SELECT * FROM {table}_done")
        # one rollup version has one schema (the version is in the file name)
        con.execute("CREATE VIEW rollup AS " + (
            f"SELECT * FROM read_parquet({sql_list(files.rollups)})"
            if files.rollups else empty_rollup()))

    def refresh(self) -> None:
        """Re-list the files and rebuild the views if any changed (at most every
        ``refresh_seconds``; never without it)."""
        if self.refresh_seconds is None:
            return
        with self._lock:
            now = time.monotonic()
            if now - self._checked < self.refresh_seconds:
                return
            self._checked = now
            self._open()

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None

    # -- reading -------------------------------------------------------------------------

    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` (over ``records``, ``layers``, ``candidates``)."""
        self.refresh()
        with self._lock:
            rows: list[tuple[Any, ...]] = self._con.execute(sql, params or {}).fetchall()
            return rows

    def full_records(self, ids: Sequence[str], *, since: datetime | None = None
                     ) -> dict[str, dict[str, Any]]:
        """Whole records (the verbatim JSON line) by audit id; ids not found are absent.
        ``since``: none of them started earlier (compacted files are sorted by start
        time, so older row groups are skipped instead of decompressed)."""
        want = list(dict.fromkeys(ids))
        out: dict[str, dict[str, Any]] = {}
        if not want:
            return out
        self.refresh()
        with self._lock:
            con, files = self._con, self.files
            texts: list[tuple[Any, ...]] = []
            if files.records:
                after = "" if since is None else "started_at >= $since AND "
                texts += con.execute(
                    f"SELECT audit_id, record FROM read_parquet({sql_list(files.records)}, "
                    f"union_by_name = true) WHERE {after}audit_id IN (SELECT unnest($ids))",
                    {"ids": want, **({} if since is None else {"since": since})}).fetchall()
            sources = [r[0] for r in con.execute(
                "SELECT DISTINCT _file FROM j WHERE audit_id IN (SELECT unnest($ids))",
                {"ids": want}).fetchall()]
            if sources:
                texts += con.execute(
                    f"SELECT json->>'audit_id', json::VARCHAR FROM read_ndjson_objects("
                    f"$files, ignore_errors = true, maximum_object_size = {MAX_OBJECT_BYTES}) "
                    f"WHERE json->>'audit_id' IN (SELECT unnest($ids))",
                    {"files": sources, "ids": want}).fetchall()
        for audit_id, text in texts:
            if audit_id in out or text is None:
                continue
            try:
                record = orjson.loads(text)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict):
                out[audit_id] = record
        return out

    def ids_with_prefix(self, prefix: str, limit: int = 20) -> list[str]:
        """Audit ids starting with ``prefix``, newest first (at most ``limit``)."""
        return [r[0] for r in self.query(
            "SELECT audit_id FROM records WHERE starts_with(audit_id, $p) "
            "ORDER BY started_at DESC NULLS LAST LIMIT $n", {"p": prefix, "n": limit})]
