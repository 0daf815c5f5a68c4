"""The Redis Stream commands fleet mode shares: the consumer group, its backlog,
delivery counts, trimming and forgetting consumers, and reading replies (entry ids, a
worker's :class:`Delivery`).

Both sides use them: a relay creates the group if it comes first and reads the backlog
to shed before the stream's trim could reach an unverified job; a worker counts
deliveries (a poison job), trims what every group acknowledged and forgets consumers
long gone. Replies are read as redis-py returns them with ``decode_responses=False``
(bytes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["FORGET_CONSUMER_MS", "Delivery", "backlog", "deliveries", "ensure_group", "entries_of",
           "entry_key", "forget_idle_consumers", "next_id", "queue_ms", "text", "trim"]

FORGET_CONSUMER_MS = 3600 * 1000
"""A consumer idle this long with nothing pending is removed from the group."""


async def ensure_group(client: Redis, stream: str, group: str) -> None:
    """Create the consumer group (and the stream) unless it exists. From the stream's
    start: jobs published before the group existed are verified too."""
    from redis.exceptions import ResponseError

    try:
        await client.xgroup_create(stream, group, id="0", mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


async def backlog(client: Redis, stream: str, group: str) -> int | None:
    """Jobs of ``group`` published and not yet acknowledged (not yet delivered plus
    pending); the stream's length when Redis cannot count the undelivered ones."""
    for info in await client.xinfo_groups(stream):
        if text(info.get("name")) != group:
            continue
        lag, pending = info.get("lag"), info.get("pending") or 0
        if lag is None:
            return int(await client.xlen(stream))
        return int(lag) + int(pending)
    return None


async def deliveries(client: Redis, stream: str, group: str, consumer: str,
                     entries: list[str]) -> dict[str, int]:
    """How many times each of ``entries`` (pending for ``consumer``) has been delivered."""
    if not entries:
        return {}
    rows = await client.xpending_range(
        stream, group, min=min(entries, key=entry_key), max=max(entries, key=entry_key),
        count=len(entries) * 2 + 16, consumername=consumer)
    return {text(r["message_id"]): int(r["times_delivered"]) for r in rows}


async def trim(client: Redis, stream: str) -> None:
    """Trim the stream below the oldest entry any consumer group still needs."""
    keep: list[str] = []
    for info in await client.xinfo_groups(stream):
        summary = await client.xpending(stream, text(info.get("name")))
        if summary.get("pending"):
            keep.append(text(summary["min"]))
        else:
            keep.append(next_id(text(info.get("last-delivered-id") or "0-0")))
    if keep:
        await client.xtrim(stream, minid=min(keep, key=entry_key), approximate=True)


async def forget_idle_consumers(client: Redis, stream: str, group: str, *, keep: str,
                                idle_ms: int = FORGET_CONSUMER_MS) -> None:
    """Remove consumers (but ``keep``) idle for ``idle_ms`` with nothing pending."""
    for info in await client.xinfo_consumers(stream, group):
        name = text(info.get("name"))
        if name != keep and not info.get("pending") and int(info.get("idle") or 0) > idle_ms:
            await client.xgroup_delconsumer(stream, group, name)


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def entries_of(reply: Any) -> list[tuple[str, bytes | None]]:
    """``[(entry id, job bytes or None)]`` from an XREADGROUP / XAUTOCLAIM reply (None:
    the entry was trimmed away while pending)."""
    out: list[tuple[str, bytes | None]] = []
    for _stream, items in reply or ():
        for entry, fields in items or ():
            if not isinstance(fields, dict):
                out.append((text(entry), None))
                continue
            data = fields.get(b"job")
            out.append((text(entry), data if isinstance(data, bytes) else b""))
    return out


def entry_key(entry: str) -> tuple[int, int]:
    """An entry id (``ms-seq``) as a sortable pair."""
    ms, _, seq = entry.partition("-")
    return int(ms), int(seq or 0)


def next_id(entry: str) -> str:
    ms, seq = entry_key(entry)
    return f"{ms}-{seq + 1}"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery of a stream entry to a worker: its id, the encoded job (None: the
    entry was trimmed away) and how many times it has been delivered, this one included."""

    entry: str
    data: bytes | None
    deliveries: int


def queue_ms(entry: str) -> float | None:
    """Milliseconds since Redis added the entry (its id's time part, on Redis' clock) to
    now (this machine's clock), never negative."""
    try:
        added = int(entry.split("-", 1)[0])
    except ValueError:
        return None
    return round(max(0.0, time.time() * 1000 - added), 3)
