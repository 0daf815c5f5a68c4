"""Which records a reader looks at: time range, policy, model, tenant, verdict, mode, action.

One :class:`AuditFilter` serves the command line (``--since 24h --policy p``), the
dashboard (its query string) and every query of :mod:`gateway.audit.store`: its
:meth:`AuditFilter.sql` is a ``WHERE`` clause over the columns every flat table has
(:data:`gateway.audit.schema.KEYS`) with the values as named parameters — user input
is never formatted into SQL.

Times are naive UTC. A time is an ISO date (``2026-11-25``: its midnight), an ISO
date and time (``2026-11-25T10:00``, ``…Z``, ``…+02:00``), ``now``, or a duration
before now (``30m``, ``24h``, ``7d``, ``2w``). ``none`` as a verdict or action
selects records never verified; ``-`` as a tenant selects records without one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["AuditFilter", "FilterError", "NO_TENANT", "NO_VALUE", "parse_time"]

NO_VALUE = "none"
"""A verdict or action filter value for records never verified (null)."""
NO_TENANT = "-"
"""A tenant filter value for records without a tenant (null)."""
MAX_VALUES = 32
"""Values one filter field takes at most."""
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d|w)$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_LISTS = ("policy", "model", "tenant", "verdict", "mode", "action")


class FilterError(ValueError):
    """A filter value that cannot be used (the message says which and why)."""


def parse_time(text: str, *, now: datetime | None = None) -> datetime:
    """A naive UTC datetime from ``text`` (see the module docstring)."""
    now = now or datetime.now(UTC).replace(tzinfo=None)
    value = text.strip()
    if value == "now":
        return now
    m = _DURATION.match(value)
    if m:
        return now - timedelta(seconds=float(m[1]) * _UNITS[m[2]])
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise FilterError(f"{text!r} is not a time: use an ISO date or date and time "
                          f"(2026-11-25, 2026-11-25T10:00Z), now, or a duration before "
                          f"now (30m, 24h, 7d, 2w)") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def _values(raw: Iterable[str]) -> tuple[str, ...]:
    """Non-empty values, comma lists split, in order, without repeats."""
    out: list[str] = []
    for item in raw:
        for part in str(item).split(","):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    if len(out) > MAX_VALUES:
        raise FilterError(f"at most {MAX_VALUES} values per filter")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """What to read (see the module docstring); empty fields select everything."""

    since: datetime | None = None
    until: datetime | None = None
    policy: tuple[str, ...] = ()
    model: tuple[str, ...] = ()
    tenant: tuple[str, ...] = ()
    verdict: tuple[str, ...] = ()
    mode: tuple[str, ...] = ()
    action: tuple[str, ...] = ()

    @classmethod
    def build(cls, *, since: str | None = None, until: str | None = None,
              now: datetime | None = None, **lists: Iterable[str] | None) -> AuditFilter:
        """From text: times as :func:`parse_time` reads them, each list field from
        values that may hold comma lists."""
        unknown = set(lists) - set(_LISTS)
        if unknown:
            raise FilterError(f"unknown filter(s): {', '.join(sorted(unknown))}")
        start = parse_time(since, now=now) if since else None
        end = parse_time(until, now=now) if until else None
        if start is not None and end is not None and start > end:
            raise FilterError(f"--since ({start:%Y-%m-%d %H:%M:%S}) is after --until "
                              f"({end:%Y-%m-%d %H:%M:%S})")
        return cls(since=start, until=end,
                   **{k: _values(v or ()) for k, v in lists.items()})

    @classmethod
    def from_query(cls, query: Mapping[str, Any], *, now: datetime | None = None
                   ) -> AuditFilter:
        """From a query string (a ``MultiDict``-like mapping with ``getlist``, or
        plain values)."""
        def get(key: str) -> list[str]:
            getlist = getattr(query, "getlist", None)
            if getlist is not None:
                return [str(v) for v in getlist(key)]
            value = query.get(key)
            return [] if value is None else [str(value)]

        since, until = get("since"), get("until")
        return cls.build(since=since[-1] if since else None,
                         until=until[-1] if until else None,
                         now=now, **{k: get(k) for k in _LISTS})

    def with_(self, **changes: Any) -> AuditFilter:
        return replace(self, **changes)

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def query_pairs(self) -> list[tuple[str, str]]:
        """The filter as query-string pairs (links that keep the filters)."""
        out: list[tuple[str, str]] = []
        if self.since is not None:
            out.append(("since", self.since.isoformat(timespec="seconds")))
        if self.until is not None:
            out.append(("until", self.until.isoformat(timespec="seconds")))
        for key in _LISTS:
            out.extend((key, v) for v in getattr(self, key))
        return out

    def matches(self, record: Mapping[str, Any]) -> bool:
        """Whether ``record`` (a decoded audit line) passes the filter — what :meth:`sql`
        selects, for readers that follow files line by line (``tail --follow``)."""
        if self.since is not None or self.until is not None:
            try:
                started = parse_time(str(record.get("started_at") or ""))
            except FilterError:
                return False
            if (self.since is not None and started < self.since) or \
                    (self.until is not None and started > self.until):
                return False
        for key in _LISTS:
            values = getattr(self, key)
            if not values:
                continue
            value = record.get(key)
            null = {"verdict": NO_VALUE, "action": NO_VALUE, "tenant": NO_TENANT}.get(key)
            if value is None:
                if null is None or null not in values:
                    return False
            elif str(value) not in values:
                return False
        return True

    def sql(self, alias: str = "") -> tuple[str, dict[str, Any]]:
        """``(condition, parameters)``: a boolean SQL expression (``true`` for an empty
        filter) over the :data:`~gateway.audit.schema.KEYS` columns, ``alias.``-qualified
        when ``alias`` is given; parameters are named ``f_*``."""
        def col(c: str) -> str:
            return f'{alias}."{c}"' if alias else f'"{c}"'

        terms: list[str] = []
        params: dict[str, Any] = {}
        if self.since is not None:
            terms.append(f"{col('started_at')} >= $f_since")
            params["f_since"] = self.since
        if self.until is not None:
            terms.append(f"{col('started_at')} <= $f_until")
            params["f_until"] = self.until
        for key in _LISTS:
            values = list(getattr(self, key))
            if not values:
                continue
            null = {"verdict": NO_VALUE, "action": NO_VALUE, "tenant": NO_TENANT}.get(key)
            named = [v for v in values if v != null]
            parts = []
            if named:
                parts.append(f"list_contains($f_{key}, {col(key)})")
                params[f"f_{key}"] = named
            if null is not None and null in values:
                parts.append(f"{col(key)} IS NULL")
            terms.append("(" + " OR ".join(parts) + ")")
        return (" AND ".join(terms) or "true"), params
