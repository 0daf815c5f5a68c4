"""Rollups: a compacted file's counts per day and hour, so reports need not re-read
every record.

Beside ``X.records.parquet`` compaction writes ``X.rollup-v1.parquet``
(:func:`write_rollup`): for each UTC day — and again for each UTC hour — and each
combination of the filter keys (:data:`DIMS`: policy, mode, model, tenant, verdict,
action) one row per *part* (``records`` / ``records/day``, …; ``bucket`` is the
hour's or the day's start):

- ``records`` — ``n`` records, the first and last ``started_at``;
- ``layers`` — per ``layer_key``: runs, scored runs and their score sum, failed
  (fired), errors, skipped, cost and judge calls;
- ``candidates`` — per ``candidate_name`` and outcome (its verdict, else its error,
  else ``none``): evaluations, verdict differs, would block more / fewer.

:func:`rolled` is what :mod:`gateway.audit.report` and the dashboard aggregate: the
rollup rows the filter selects **whole**, plus raw rows shaped like rollup rows (one
per record, layer run or candidate) for everything a rollup cannot answer exactly —
files not compacted yet (JSONL), files compacted before rollups existed, and records
of the hours a time filter cuts (``--since 10:17`` reads 10:00–10:59 raw, the rest of
that day from hourly rows, later days from daily rows). Summing
either gives the same counts as a scan of every record (tests compare the two);
scores and costs are summed as decimals (:data:`SCORE_SUM`, :data:`COST_SUM`: a cost
is counted to 10⁻¹² of its unit), so no summation order changes a bit.

A rollup's version is in its name (a change of its columns, of what a measure
counts or of :data:`~gateway.audit.schema.BLOCKING` is a new version): a reader
ignores another version (those stems are read raw) and ``gateway audit compact``
writes the current one.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Final

from gateway.audit.filters import AuditFilter
from gateway.audit.layout import ROLLUP_SUFFIX
from gateway.audit.schema import BLOCKING

__all__ = ["DIMS", "PARTS", "ROLLUP_SUFFIX", "ROLLUP_TYPES", "empty_rollup", "rolled",
           "rollup_path", "rollup_select", "write_rollup"]

DIMS: Final = ("policy", "mode", "model", "tenant", "verdict", "action")
"""The filter keys a rollup keeps (every :class:`AuditFilter` list field)."""
PARTS: Final = ("records", "layers", "candidates")

SCORE_SUM: Final = "DECIMAL(38, 9)"
COST_SUM: Final = "DECIMAL(38, 12)"
"""Scores (recorded to 6 decimals) and costs are summed as decimals: exact, so any
grouping of the sums gives the same total (doubles would differ in the last bits)."""
_RAN = "layer_error IS NULL AND NOT coalesce(layer_skipped, false)"
_BLOCKING = "[" + ", ".join(f"'{b}'" for b in BLOCKING) + "]"
_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "records": (), "layers": ("layer_key",), "candidates": ("candidate_name",
                                                            "candidate_outcome")}
"""Each part's own grouping keys (besides the bucket and :data:`DIMS`)."""
ROW_GROUP: Final = 2048
"""Rows per Parquet row group: small, so a query for one part skips the others' groups."""
GRAINS: Final = ("hour", "day")
"""The rollup's buckets: ``<part>`` rows per hour, ``<part>/day`` rows per day."""
_MEASURES: Final[dict[str, dict[str, tuple[str, str]]]] = {
    # column: (its value for one raw row, how rows combine)
    "records": {"n": ("1::BIGINT", "sum"), "first_at": ("started_at", "min"),
                "last_at": ("started_at", "max")},
    "layers": {
        "n": ("1::BIGINT", "sum"),
        "l_scored": (f"(layer_score IS NOT NULL AND {_RAN})::BIGINT", "sum"),
        "l_score_sum": (f"(CASE WHEN {_RAN} THEN layer_score END)::{SCORE_SUM}", "sum"),
        "l_failed": (f"coalesce({_RAN} AND layer_passed = false, false)::BIGINT", "sum"),
        "l_errors": ("(layer_error IS NOT NULL)::BIGINT", "sum"),
        "l_skipped": ("coalesce(layer_skipped AND layer_error IS NULL, false)::BIGINT", "sum"),
        "l_cost": (f"layer_cost::{COST_SUM}", "sum"),
        "l_calls": ("layer_judge_calls::BIGINT", "sum"),
    },
    "candidates": {
        "n": ("1::BIGINT", "sum"),
        "c_differs": ("(candidate_verdict IS DISTINCT FROM verdict)::BIGINT", "sum"),
        "c_more": (f"coalesce(list_contains({_BLOCKING}, candidate_action) AND NOT coalesce("
                   f"list_contains({_BLOCKING}, action), false), false)::BIGINT", "sum"),
        "c_fewer": (f"coalesce(list_contains({_BLOCKING}, action) AND NOT coalesce("
                    f"list_contains({_BLOCKING}, candidate_action), false), false)::BIGINT",
                    "sum"),
    },
}
_ROW_KEYS: Final = {"layer_key": "layer_key", "candidate_name": "candidate_name",
                    "candidate_outcome": "coalesce(candidate_verdict, candidate_error, 'none')"}
ROLLUP_TYPES: Final[dict[str, str]] = {
    "part": "VARCHAR", "bucket": "TIMESTAMP", **dict.fromkeys(DIMS, "VARCHAR"),
    "layer_key": "VARCHAR", "candidate_name": "VARCHAR", "candidate_outcome": "VARCHAR",
    "n": "BIGINT", "first_at": "TIMESTAMP", "last_at": "TIMESTAMP",
    "l_scored": "BIGINT", "l_score_sum": SCORE_SUM, "l_failed": "BIGINT", "l_errors": "BIGINT",
    "l_skipped": "BIGINT", "l_cost": COST_SUM, "l_calls": "BIGINT",
    "c_differs": "BIGINT", "c_more": "BIGINT", "c_fewer": "BIGINT",
}
"""The rollup file's columns (a part leaves the others null)."""


def rollup_path(records: Path) -> Path:
    """The rollup beside a compacted ``X.records.parquet``."""
    return Path(str(records)[:-len(".records.parquet")] + ROLLUP_SUFFIX)


def _rows(part: str, source: str, grain: str = "hour") -> str:
    """``source``'s rows (a flat table) shaped like rollup rows of ``part``."""
    cols = [f"date_trunc('{grain}', started_at) AS bucket", *(f'"{d}"' for d in DIMS),
            *(f"{_ROW_KEYS[k]} AS {k}" for k in _KEYS[part]),
            *(f"{expr} AS {col}" for col, (expr, _) in _MEASURES[part].items())]
    return f"SELECT {', '.join(cols)} FROM {source}"


def _combine(part: str, source: str, keys: tuple[str, ...]) -> str:
    """``source``'s rollup-shaped rows of ``part`` combined per ``keys``."""
    aggs = [f"{how}({col}) AS {col}" for col, (_, how) in _MEASURES[part].items()]
    return (f"SELECT {', '.join(keys)}, {', '.join(aggs)} FROM ({source}) "
            f"GROUP BY {', '.join(keys)}")


def rollup_select(tables: dict[str, str]) -> str:
    """The rollup rows of the flat tables ``tables`` (part -> a FROM source)."""
    selects = []
    for part in PARTS:
        keys = ("bucket", *DIMS, *_KEYS[part])
        for grain in GRAINS:
            name = part if grain == "hour" else f"{part}/{grain}"
            selects.append(f"SELECT '{name}' AS part, * FROM ("
                           f"{_combine(part, _rows(part, tables[part], grain), keys)})")
    return " UNION ALL BY NAME ".join(selects)


def empty_rollup() -> str:
    """A rollup source with no rows (the right columns)."""
    return "SELECT " + ", ".join(f"NULL::{t} AS {c}" for c, t in ROLLUP_TYPES.items()) \
        + " LIMIT 0"


def write_rollup(con: Any, tables: dict[str, str], target: Path) -> None:
    """Write the rollup of ``tables`` to ``target`` (a hidden temporary name first,
    0600, then renamed into place)."""
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    cols = ", ".join(f"{c}::{t} AS {c}" for c, t in ROLLUP_TYPES.items())
    quoted = str(tmp).replace("'", "''")
    try:
        con.execute(f"COPY (SELECT {cols} FROM ({rollup_select(tables)}) "
                    f"ORDER BY part, bucket) TO '{quoted}' "
                    f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {ROW_GROUP})")
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _whole(where: AuditFilter, start: str, grain: str) -> str:
    """SQL: the ``grain`` (hour, day) starting at ``start`` lies wholly inside the
    filter's time range."""
    terms = []
    if where.since is not None:
        terms.append(f"{start} >= $f_since")
    if where.until is not None:
        terms.append(f"{start} + INTERVAL 1 {grain} <= $f_until + INTERVAL 1 MICROSECOND")
    return " AND ".join(terms) or "true"


def rolled(part: str, where: AuditFilter, *, rollups: bool = True, days: bool = True
           ) -> tuple[str, dict[str, Any]]:
    """``(sql, params)``: rollup-shaped rows of ``part`` (columns ``bucket``,
    :data:`DIMS`, the part's keys and measures) for exactly the records ``where``
    selects — to be aggregated with ``sum`` / ``min`` / ``max``. ``bucket`` is an
    hour, or with ``days`` an hour or a day (group by ``date_trunc('day', bucket)``).
    Reads the store's ``rollup`` view and its ``<part>_open`` / ``<part>_done`` views
    (see :class:`gateway.audit.store.AuditStore`); ``rollups=False`` reads every
    row raw."""
    cond, params = where.sql()
    if not rollups:
        return _rows(part, f"{part} WHERE {cond}"), params
    dims_cond, dims_params = where.with_(since=None, until=None).sql()
    cols = ", ".join(["bucket", *DIMS, *_KEYS[part], *_MEASURES[part]])
    whole_hour = _whole(where, "bucket", "hour")
    rollup = f"SELECT {cols} FROM rollup WHERE {dims_cond} AND "
    selects = [_rows(part, f"{part}_open WHERE {cond}")]
    if days:
        selects += [
            rollup + f"part = '{part}/day' AND {_whole(where, 'bucket', 'day')}",
            rollup + f"part = '{part}' AND {whole_hour} AND NOT ("
                     f"{_whole(where, 'date_trunc(' + repr('day') + ', bucket)', 'day')})"]
    else:
        selects.append(rollup + f"part = '{part}' AND {whole_hour}")
    if where.since is not None or where.until is not None:
        # the hours the time range cuts, from the compacted files' rows
        raw_hour = "date_trunc('hour', started_at)"
        selects.append(_rows(part, f"{part}_done WHERE {cond} AND NOT "
                                   f"({_whole(where, raw_hour, 'hour')})"))
    return " UNION ALL ".join(f"({s})" for s in selects), {**params, **dims_params}
