"""How the worker's loops live through a Redis outage: a warning per kind of failure at
most every 10 s (an outage must not flood the log), and a sleep the stop event ends."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

__all__ = ["OutageLog", "sleep_unless"]

log = logging.getLogger("gateway.fleet")


class OutageLog:
    """Warnings throttled per kind (``"read"``, ``"claim"``, ``"ack"`` …)."""

    def __init__(self, every_seconds: float = 10.0) -> None:
        self.every = every_seconds
        self._warned: dict[str, float] = {}

    def warn(self, kind: str, message: str, *args: Any) -> None:
        """Log ``message`` unless a warning of ``kind`` was logged in the last period."""
        now = time.monotonic()
        if now - self._warned.get(kind, -self.every) >= self.every:
            self._warned[kind] = now
            log.warning(message, *args)


async def sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less when ``stop`` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
