"""Re-claiming, the worker's side of redelivery: entries other consumers of the group
left pending for ``redis.claim_idle_seconds`` are taken over (``XAUTOCLAIM``), up to the
worker's free slots, while the entries this worker is running are kept fresh (their idle
time reset, so a slow job is not taken over). An entry trimmed from the stream before it
was verified is counted (``fleet.lost``) and logged. Every few minutes the stream is
trimmed up to the oldest entry some consumer group still needs and consumers idle for an
hour with nothing pending are forgotten (otherwise only trimmed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING

from gateway.fleet.connect import redis_errors
from gateway.fleet.outage import OutageLog, sleep_unless
from gateway.fleet.settle import Tally
from gateway.fleet.stream import entries_of, forget_idle_consumers, text, trim
from gateway.settings import RedisConfig

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["HOUSEKEEPING_SECONDS", "Claimer"]

log = logging.getLogger("gateway.fleet")

HOUSEKEEPING_SECONDS = 300.0

Entries = list[tuple[str, bytes | None]]


class Claimer:
    """The re-claiming loop of one worker (see the module docstring). ``running``: the
    entries the worker is verifying (read, never changed here); ``redeliver`` hands the
    claimed entries to the worker."""

    def __init__(self, config: RedisConfig, client: Redis, *, name: str, concurrency: int,
                 running: Collection[str], redeliver: Callable[[Entries], Awaitable[None]],
                 tally: Tally, outage: OutageLog) -> None:
        self.config = config
        self.client = client
        self.name = name
        self.concurrency = concurrency
        self.running = running
        self.redeliver = redeliver
        self.tally = tally
        self.outage = outage
        self._errors = redis_errors()
        self._last_housekeeping = 0.0

    async def run(self, stop: asyncio.Event) -> None:
        """Every third of ``claim_idle_seconds`` (at least 0.2 s) until ``stop``."""
        interval = max(0.2, self.config.claim_idle_seconds / 3)
        while not stop.is_set():
            await sleep_unless(stop, interval)
            if stop.is_set():
                return
            try:
                await self.keep_fresh()
                await self.claim_idle()
                if time.monotonic() - self._last_housekeeping >= HOUSEKEEPING_SECONDS:
                    await self.housekeeping()
                else:
                    await trim(self.client, self.config.stream)
            except self._errors as exc:
                self.outage.warn("claim", "fleet: claiming idle entries failed (%s)",
                                 type(exc).__name__)

    async def keep_fresh(self) -> None:
        """Reset the idle time of the entries this worker is running (no re-claim)."""
        if self.running:
            await self.client.xclaim(self.config.stream, self.config.group, self.name, 0,
                                     list(self.running), justid=True)

    async def claim_idle(self) -> None:
        free = self.concurrency - len(self.running)
        if free <= 0:
            return
        reply = await self.client.xautoclaim(
            self.config.stream, self.config.group, self.name,
            int(self.config.claim_idle_seconds * 1000), start_id="0-0", count=free)
        claimed = [(entry, data) for entry, data in entries_of([[b"", reply[1]]])
                   if entry not in self.running]
        deleted = [text(e) for e in (reply[2] if len(reply) > 2 else [])]
        if deleted:
            self.tally.add("lost", len(deleted))
            log.warning("fleet: %d pending job(s) were trimmed from the stream before they "
                        "were verified (ids %s…); raise redis.maxlen or add workers",
                        len(deleted), deleted[0])
        if not claimed:
            return
        self.tally.add("claimed", len(claimed))
        await self.redeliver(claimed)

    async def housekeeping(self) -> None:
        self._last_housekeeping = time.monotonic()
        await trim(self.client, self.config.stream)
        await forget_idle_consumers(self.client, self.config.stream, self.config.group,
                                    keep=self.name)
