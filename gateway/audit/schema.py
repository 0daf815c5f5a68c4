"""The audit record as DuckDB reads it: one schema, and the three flat tables.

A record (``gateway.verify.outcome.Outcome.to_dict``) is read with an explicit schema —
never sniffed: sniffing re-reads the files on every query and types a field that is
null in the sample as ``NULL`` (docs/design/audit-store.md). A new field a query needs
is an edit to :data:`SCALARS`, :data:`LAYER` or :data:`CANDIDATE` here, and nothing
else. Fields not listed stay in the verbatim record (``record``), which ``show``,
the record page and replay read.

Every reader and the compaction see the same three flat tables, so one filter
(:mod:`gateway.audit.filters`) applies to each of them:

- ``records`` — one row per record: :data:`SCALARS`, ``has_content`` and (compacted
  files only) ``record``, the verbatim JSON line;
- ``layers`` — one row per layer run of the live policy: the record's
  :data:`KEYS`, ``layer_index`` (1-based) and the :data:`LAYER` fields prefixed
  ``layer_``;
- ``candidates`` — one row per candidate evaluation: the record's :data:`KEYS`
  and the :data:`CANDIDATE` fields prefixed ``candidate_`` (``candidate_name``).
"""

from __future__ import annotations

import json
from typing import Final

__all__ = ["BLOCKING", "CANDIDATE", "KEYS", "LAYER", "SCALARS", "candidates_select", "json_columns",
           "json_shape", "layers_select", "sql_struct", "table_columns"]

SCALARS: Final[dict[str, str]] = {
    "audit_id": "VARCHAR", "policy": "VARCHAR", "policy_version": "VARCHAR",
    "mode": "VARCHAR", "model": "VARCHAR", "tenant": "VARCHAR", "stream": "BOOLEAN",
    "started_at": "TIMESTAMP", "duration_ms": "DOUBLE", "risk_level": "VARCHAR",
    "verdict": "VARCHAR", "score": "DOUBLE", "action": "VARCHAR", "applied": "BOOLEAN",
    "attempts": "INTEGER", "upstream_status": "INTEGER", "note": "VARCHAR",
    "trace_id": "VARCHAR",
}
"""The record's scalar fields (``started_at``: naive UTC)."""
LAYER: Final[dict[str, str]] = {
    "key": "VARCHAR", "name": "VARCHAR", "score": "DOUBLE", "passed": "BOOLEAN",
    "latency_ms": "DOUBLE", "label": "VARCHAR", "error": "VARCHAR", "skipped": "BOOLEAN",
    "judge_calls": "INTEGER", "cost": "DOUBLE", "weight": "DOUBLE",
}
CANDIDATE: Final[dict[str, str]] = {
    "name": "VARCHAR", "verdict": "VARCHAR", "score": "DOUBLE", "action": "VARCHAR",
    "error": "VARCHAR",
}
BLOCKING: Final = ("block",)
"""Actions that withhold the answer: what "would have blocked" counts."""
KEYS: Final = ("audit_id", "started_at", "policy", "mode", "model", "tenant", "verdict",
               "action")
"""The record fields every flat table carries: what a filter reads."""


def sql_struct(fields: dict[str, str]) -> str:
    return "STRUCT(" + ", ".join(f'"{k}" {v}' for k, v in fields.items()) + ")"


def json_columns() -> str:
    """``read_ndjson``'s ``columns`` argument: the scalars, ``content`` (JSON) and the
    layer and candidate lists."""
    cols = {**SCALARS, "content": "JSON", "layers": sql_struct(LAYER) + "[]",
            "candidates": sql_struct(CANDIDATE) + "[]"}
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in cols.items()) + "}"


def json_shape() -> str:
    """``json_transform``'s structure for the same columns (a SQL string literal)."""
    shape = {**SCALARS, "content": "JSON", "layers": [LAYER], "candidates": [CANDIDATE]}
    return "'" + json.dumps(shape).replace("'", "''") + "'"


def table_columns(table: str) -> dict[str, str]:
    """Column -> type of a flat table (``records`` without the verbatim ``record``)."""
    keys = {k: SCALARS[k] for k in KEYS}
    if table == "records":
        return {**SCALARS, "has_content": "BOOLEAN"}
    if table == "layers":
        return {**keys, "layer_index": "INTEGER", **{f"layer_{k}": v for k, v in LAYER.items()}}
    if table == "candidates":
        return {**keys, **{f"candidate_{k}": v for k, v in CANDIDATE.items()}}
    raise KeyError(table)


def layers_select(source: str) -> str:
    keys = ", ".join(f'"{k}"' for k in KEYS)
    fields = ", ".join(f'l."{k}" AS "layer_{k}"' for k in LAYER)
    return (f"SELECT {keys}, layer_index, {fields} FROM (SELECT *, "
            f"generate_subscripts(layers, 1) AS layer_index, unnest(layers) AS l "
            f"FROM {source} WHERE audit_id IS NOT NULL)")


def candidates_select(source: str) -> str:
    keys = ", ".join(f'"{k}"' for k in KEYS)
    fields = ", ".join(f'c."{k}" AS "candidate_{k}"' for k in CANDIDATE)
    return (f"SELECT {keys}, {fields} FROM (SELECT *, unnest(candidates) AS c "
            f"FROM {source} WHERE audit_id IS NOT NULL)")
