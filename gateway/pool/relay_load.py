"""Shed, never slow — the relay itself: how busy its event loop is, and how many shadow
jobs it may hand off while it is saturated.

Handing a job to a worker process costs the relay CPU too (building and pickling the
job, reading its record back, writing the record): a fraction of a millisecond, but
on a relay already using its whole core every such fraction is taken from clients.
:class:`RelayLoad` samples, every :data:`TICK_S`, the share of wall time the event
loop's thread was *running or waiting for a CPU* (Linux: ``/proc/thread-self/
schedstat``; elsewhere its CPU time only), averaged over the last :data:`WINDOW_S`.
At or above ``pool.relay_busy`` the relay is saturated: jobs are then handed off at
most ``pool.busy_jobs_per_second`` (a token bucket) and the rest are shed before they
are built — counted and recorded as every shed job is (``shadow.dropped`` with
``reason: relay_busy``, the record ``shadow.result: dropped``), so the verified share
falls instead of clients' latency rising. That holds for an inline policy's
``candidates`` job too (its record keeps the inline verdict, each candidate
``dropped``); the inline verification, the client's own wait, is never shed. The jobs already queued when saturation
begins (:attr:`RelayLoad.on_saturated`: the runner's backlog, up to
``shadow.queue_size``, filled while the load was rising) are shed the same way: handed
off, each would cost the relay its hand-off and the box a verification while clients
wait. Saturation ends once the average drops
below ``relay_busy`` − :data:`HYSTERESIS`.

A loop that waits for I/O is not runnable: an idle relay reads ~0, one serving all it
can ~1, whatever the box's core count.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["HYSTERESIS", "TICK_S", "WINDOW_S", "RelayLoad", "loop_thread_seconds"]

TICK_S = 0.25
WINDOW_S = 1.0
HYSTERESIS = 0.1

_SCHEDSTAT = "/proc/thread-self/schedstat"


def loop_thread_seconds() -> float:
    """Seconds the calling thread has been running or runnable (waiting for a CPU);
    its CPU time where the kernel does not say."""
    try:
        with open(_SCHEDSTAT, "rb") as f:
            run_ns, wait_ns = f.read().split()[:2]
        return (int(run_ns) + int(wait_ns)) / 1e9
    except (OSError, ValueError):
        return time.thread_time()


class RelayLoad:
    """The relay's event-loop load and the hand-off budget (see the module docstring).
    ``probe``: cumulative busy seconds of the loop's thread (tests script it)."""

    def __init__(self, threshold: float | None, jobs_per_second: float,
                 probe: Callable[[], float] = loop_thread_seconds) -> None:
        self.threshold = threshold
        self.rate = jobs_per_second
        self.busy = 0.0
        """The loop thread's busy share over the last :data:`WINDOW_S`."""
        self.saturated = False
        self.shed = 0
        """Jobs shed because the relay was saturated."""
        self.on_saturated: Callable[[], None] | None = None
        """Called when the relay becomes saturated (the runner sheds its backlog)."""
        self._probe = probe
        self._marks: deque[tuple[float, float]] = deque(maxlen=int(WINDOW_S / TICK_S) + 1)
        self._handle: asyncio.TimerHandle | None = None
        self._tokens = 0.0
        self._filled = 0.0

    def start(self) -> None:
        """Start sampling (on the running loop: the thread measured is the loop's)."""
        if self.threshold is None or self._handle is not None:
            return
        loop = asyncio.get_running_loop()
        self._marks.append((loop.time(), self._probe()))
        self._handle = loop.call_later(TICK_S, self._tick, loop)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        now, used = loop.time(), self._probe()
        self._marks.append((now, used))
        t0, u0 = self._marks[0]
        if now > t0:
            self.busy = min(1.0, max(0.0, (used - u0) / (now - t0)))
        threshold = self.threshold
        if threshold is not None:
            if self.busy >= threshold:
                if not self.saturated:
                    self._tokens, self._filled = 0.0, time.monotonic()
                    self.saturated = True
                    if self.on_saturated is not None:
                        self.on_saturated()
            elif self.busy < threshold - HYSTERESIS:
                self.saturated = False
        self._handle = loop.call_later(TICK_S, self._tick, loop)

    def admit(self) -> bool:
        """Whether a job may be handed off now: always when the relay is not
        saturated; else within ``jobs_per_second`` (False is counted in :attr:`shed`)."""
        if self.take():
            return True
        self.shed += 1
        return False

    def take(self) -> bool:
        """:meth:`admit` without counting a refusal: a shadow request asks when it
        arrives (``gateway.modes.shadow``) and counts its shed once its answer is
        relayed (:meth:`ProcessRunner.shed_relayed <gateway.pool.ProcessRunner.
        shed_relayed>`)."""
        if not self.saturated:
            return True
        now = time.monotonic()
        self._tokens = min(max(1.0, self.rate), self._tokens + (now - self._filled) * self.rate)
        self._filled = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def status(self) -> dict[str, Any]:
        return {"busy": round(self.busy, 3), "saturated": self.saturated,
                "threshold": self.threshold, "busy_jobs_per_second": self.rate,
                "shed": self.shed}
