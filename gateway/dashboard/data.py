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


def _series(store: AuditStore, cond: str, params: dict[str, Any], unit: str, column: str,
            ) -> tuple[list[datetime], dict[str, list[int]]]:
    rows = store.query(
        f"SELECT date_trunc('{unit}', started_at) AS b, "
        f"coalesce({column}, '{NOT_VERIFIED if column == 'verdict' else 'none'}') AS k, "
        f"count(*) FROM records WHERE {cond} AND started_at IS NOT NULL "
        f"GROUP BY ALL ORDER BY b", params)
    if not rows:
        return [], {}
    start, end = rows[0][0], rows[-1][0]
    buckets: list[datetime] = []
    t = start
    while t <= end and len(buckets) < 400:
        buckets.append(t)
        t += _UNITS[unit]
    index = {b: i for i, b in enumerate(buckets)}
    names = sorted({r[1] for r in rows}, key=lambda k: (
        VERDICTS.index(k) if k in VERDICTS else len(VERDICTS), k))
    series = {k: [0] * len(buckets) for k in names}
    for b, k, n in rows:
        if b in index:
            series[k][index[b]] += n
    return buckets, series


def overview(store: AuditStore, where: AuditFilter) -> Overview:
    """The main page: counts over time, breakdowns, layers and candidates."""
    cond, params = where.sql()
    total, first, last = store.query(
        f"SELECT count(*), min(started_at), max(started_at) FROM records WHERE {cond}",
        params)[0]
    unit = _unit(where.since or first, where.until or last) if first and last else "hour"
    buckets, verdicts = _series(store, cond, params, unit, "verdict")
    _, actions = _series(store, cond, params, unit, "action")
    blocking = list(BLOCKING)
    breakdowns: dict[str, list[dict[str, Any]]] = {}
    for dim in BREAKDOWNS:
        rows = store.query(
            f"SELECT \"{dim}\", count(*), "
            f"count(*) FILTER (WHERE verdict = 'pass'), "
            f"count(*) FILTER (WHERE verdict = 'marginal'), "
            f"count(*) FILTER (WHERE verdict = 'fail'), "
            f"count(*) FILTER (WHERE verdict IS NULL), "
            f"count(*) FILTER (WHERE list_contains($blocking, action)) "
            f"FROM records WHERE {cond} GROUP BY ALL ORDER BY 2 DESC, 1 LIMIT {TOP}",
            {**params, "blocking": blocking})
        breakdowns[dim] = [
            {"value": v, "count": n, "verdicts": dict(zip(VERDICTS, (p, m, f, u), strict=True)),
             "blocked": b} for v, n, p, m, f, u, b in rows]
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
