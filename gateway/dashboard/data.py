"""What the dashboard's pages show, asked of an :class:`~gateway.audit.store.AuditStore`.

Plain functions, each a few grouped queries bounded by ``LIMIT``; the pages
(:mod:`gateway.dashboard.pages`) only lay their results out. Filters are
:class:`~gateway.audit.filters.AuditFilter` parameters, never SQL text.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from gateway.audit.filters import AuditFilter
from gateway.audit.report import BLOCKING, NOT_VERIFIED, summarize
from gateway.audit.rollup import rolled

if TYPE_CHECKING:
    from gateway.audit.store import AuditStore

__all__ = ["BREAKDOWNS", "LIST_LIMIT", "Overview", "list_records", "overview"]

LIST_LIMIT = 100
"""Records on one page of the list."""
MAX_OFFSET = 10_000
"""How far the list pages (narrow the filters to see further)."""
BREAKDOWNS = ("policy", "model", "tenant")
"""The dimensions the overview breaks verdicts down by."""
TOP = 20
"""Rows per breakdown table (the most frequent values)."""
VERDICTS = ("pass", "marginal", "fail", NOT_VERIFIED)
_UNITS = {"hour": timedelta(hours=1), "day": timedelta(days=1)}


@dataclass
class Overview:
    total: int
    first: datetime | None
    last: datetime | None
    unit: str
    buckets: list[datetime]
    verdicts: dict[str, list[int]]
    actions: dict[str, list[int]]
    breakdowns: dict[str, list[dict[str, Any]]]
    summary: dict[str, Any]


def _unit(first: datetime, last: datetime) -> str:
    return "hour" if last - first <= timedelta(days=3) else "day"


def _series(rows: list[tuple[Any, ...]], unit: str, index: int, null: str,
            ) -> tuple[list[datetime], dict[str, list[int]]]:
    """Counts per bucket by the value at ``index`` of ``(bucket, verdict, action, n)``
    rows (null values named ``null``); buckets are continuous (at most 400)."""
    if not rows:
        return [], {}
    start, end = min(r[0] for r in rows), max(r[0] for r in rows)
    buckets: list[datetime] = []
    t = start
    while t <= end and len(buckets) < 400:
        buckets.append(t)
        t += _UNITS[unit]
    at = {b: i for i, b in enumerate(buckets)}
    names = sorted({r[index] or null for r in rows}, key=lambda k: (
        VERDICTS.index(k) if k in VERDICTS else len(VERDICTS), k))
    series = {k: [0] * len(buckets) for k in names}
    for row in rows:
        if row[0] in at:
            series[row[index] or null][at[row[0]]] += row[3]
    return buckets, series


def overview(store: AuditStore, where: AuditFilter) -> Overview:
    """The main page: counts over time, breakdowns, layers and candidates — from
    rollups where they answer exactly (:func:`gateway.audit.rollup.rolled`)."""
    rec, params = rolled("records", where, rollups=store.rollups)
    total, first, last = store.query(
        f"SELECT coalesce(sum(n), 0), min(first_at), max(last_at) FROM ({rec})", params)[0]
    unit = _unit(where.since or first, where.until or last) if first and last else "hour"
    by_unit, _ = rolled("records", where, rollups=store.rollups, days=unit == "day")
    rows = store.query(
        f"SELECT date_trunc('{unit}', bucket) AS b, verdict, action, sum(n) "
        f"FROM ({by_unit}) WHERE bucket IS NOT NULL GROUP BY ALL", params)
    buckets, verdicts = _series(rows, unit, 1, NOT_VERIFIED)
    _, actions = _series(rows, unit, 2, "none")
    breakdowns: dict[str, list[dict[str, Any]]] = {dim: [] for dim in BREAKDOWNS}
    for dim, value, n, p, m, f, u, b in store.query(
            f"SELECT CASE WHEN grouping(policy) = 0 THEN 'policy' "
            f"WHEN grouping(model) = 0 THEN 'model' ELSE 'tenant' END, "
            f"coalesce(policy, model, tenant), sum(n), "
            f"coalesce(sum(n) FILTER (WHERE verdict = 'pass'), 0), "
            f"coalesce(sum(n) FILTER (WHERE verdict = 'marginal'), 0), "
            f"coalesce(sum(n) FILTER (WHERE verdict = 'fail'), 0), "
            f"coalesce(sum(n) FILTER (WHERE verdict IS NULL), 0), "
            f"coalesce(sum(n) FILTER (WHERE list_contains($blocking, action)), 0) "
            f"FROM ({rec}) GROUP BY GROUPING SETS ((policy), (model), (tenant)) "
            f"ORDER BY 1, 3 DESC, 2 NULLS LAST", {**params, "blocking": list(BLOCKING)}):
        if len(breakdowns[dim]) < TOP:
            breakdowns[dim].append(
                {"value": value, "count": n,
                 "verdicts": dict(zip(VERDICTS, (p, m, f, u), strict=True)), "blocked": b})
    return Overview(total=total, first=first, last=last, unit=unit, buckets=buckets,
                    verdicts=verdicts, actions=actions, breakdowns=breakdowns,
                    summary=summarize(store, where))


def list_records(store: AuditStore, where: AuditFilter, *, offset: int = 0,
                 limit: int = LIST_LIMIT) -> tuple[list[dict[str, Any]], bool]:
    """A page of records, newest first (their scalar fields and each layer's score);
    and whether there are more."""
    offset = max(0, min(offset, MAX_OFFSET))
    cond, params = where.sql()
    cols = ("audit_id", "started_at", "policy", "mode", "model", "tenant", "verdict",
            "score", "action", "applied", "duration_ms", "note", "has_content")
    rows = store.query(
        f"SELECT {', '.join(cols)} FROM records WHERE {cond} "
        f"ORDER BY started_at DESC NULLS LAST, audit_id LIMIT $lim OFFSET $off",
        {**params, "lim": limit + 1, "off": offset})
    records = [dict(zip(cols, r, strict=True)) for r in rows[:limit]]
    ids = [r["audit_id"] for r in records]
    if ids:
        layers: dict[str, list[tuple[Any, ...]]] = {}
        for audit_id, key, score, passed, error, skipped in store.query(
                "SELECT audit_id, layer_key, layer_score, layer_passed, layer_error, "
                "layer_skipped FROM layers WHERE list_contains($ids, audit_id) "
                "ORDER BY audit_id, layer_index", {"ids": ids}):
            layers.setdefault(audit_id, []).append((key, score, passed, error, skipped))
        for r in records:
            r["layers"] = layers.get(r["audit_id"], [])
    return records, len(rows) > limit
