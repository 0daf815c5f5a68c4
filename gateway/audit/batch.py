"""Audit lines appended from the event loop, without a writer thread.

The relay's event-loop thread is its bottleneck under load; a writer thread in the
same process competes with it for the GIL on every wake-up, and encoding a record
holds the GIL wherever it runs (orjson does not release it), so a thread saves the
loop no CPU: only the ``write`` system call can run beside it. A
:class:`LoopBatcher` therefore keeps the lines a sink encoded (on the loop, in
``write``) in a buffer and appends them as one batch:

- ``flush_interval`` seconds after the first line of a batch (a timer on the loop),
  or at once when the buffer reaches :data:`BATCH_BYTES`;
- on :meth:`LoopBatcher.flush` and :meth:`LoopBatcher.close` (tests, shutdown: any
  thread — a loop that is no longer running included).

One batch is one ``append`` of the target (:mod:`gateway.audit.writer`): whole lines in
one ``write``, never interleaved with another process's, torn-line safe, rotated by
size, age and day exactly as with the thread (idle age and day: a timer every
``tick`` seconds). A write must not hold the loop for long: a batch of
:data:`THREAD_BYTES` or more, or any batch while the disk is slow (a write took
:data:`SLOW_S` or more, for the next :data:`SLOW_HOLD_S` seconds), or while an earlier
batch is still being written, is appended by a one-thread executor, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

__all__ = ["BATCH_BYTES", "SLOW_HOLD_S", "SLOW_S", "THREAD_BYTES", "LoopBatcher"]

log = logging.getLogger("gateway.audit")

BATCH_BYTES = 256 * 1024
"""A buffer this large is appended at once (not at the end of the interval)."""
THREAD_BYTES = 1024 * 1024
"""A batch this large is appended by the executor thread, not on the loop."""
SLOW_S = 0.01
"""A write on the loop that took this long marks the disk slow ..."""
SLOW_HOLD_S = 5.0
"""... and the batches of the next seconds go to the executor thread."""


class Target(Protocol):
    def append(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class LoopBatcher:
    """Buffered lines of one sink, appended to ``target`` from ``loop`` (see the module
    docstring). Made on the loop's thread. ``tick``: also call ``idle`` every so many
    seconds (rotation while idle); ``clock``: the monotonic clock (tests script it)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, target: Target, *,
                 flush_interval: float, tick: float | None = None,
                 idle: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.loop = loop
        self.target = target
        self.flush_interval = flush_interval
        self.written = 0
        self.errors = 0
        self.threaded = 0
        """Batches the executor thread appended (large, slow disk, or queued behind one)."""
        self._clock = clock
        self._lines: list[bytes] = []
        self._bytes = 0
        self._lock = threading.Lock()  # the buffer (flush/close may come from any thread)
        self._write_lock = threading.Lock()  # one batch at a time, in order
        self._timer: asyncio.TimerHandle | None = None
        self._loop_thread = threading.get_ident()
        self._executor: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None
        self._slow_until = 0.0
        self._closed = False
        self._idle = idle
        self._ticker: asyncio.TimerHandle | None = None
        self._tick = tick
        if tick is not None and idle is not None:
            self._call(self._start_ticker)

    # ---- the loop side ----------------------------------------------------------------

    def add(self, line: bytes) -> None:
        """Buffer ``line`` (one encoded record with its newline)."""
        with self._lock:
            if self._closed:
                return
            self._lines.append(line)
            self._bytes += len(line)
            first, full = len(self._lines) == 1, self._bytes >= BATCH_BYTES
        if full:
            self._call(self._flush_on_loop)
        elif first:
            self._call(self._arm)

    def _call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop: now when called there, else soon."""
        if threading.get_ident() == self._loop_thread:
            fn()
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: flush/close write the rest
            self.loop.call_soon_threadsafe(fn)

    def _arm(self) -> None:
        if self._timer is None and not self._closed:
            self._timer = self.loop.call_later(self.flush_interval, self._flush_on_loop)

    def _start_ticker(self) -> None:
        if self._tick is not None and not self._closed:
            self._ticker = self.loop.call_later(self._tick, self._on_tick)

    def _on_tick(self) -> None:
        idle = self._idle
        if idle is not None and (self._pending is None or self._pending.done()):
            with self._write_lock:
                self._guard(idle)
        self._start_ticker()

    def _flush_on_loop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending = self._pending
        if self._bytes >= THREAD_BYTES or self._clock() < self._slow_until \
                or (pending is not None and not pending.done()):
            batch = self._take()
            if batch:
                self._pending = self._pool().submit(self._append_locked, b"".join(batch),
                                                    len(batch))
                self.threaded += 1
            return
        started = self._clock()
        with self._write_lock:  # taken inside the lock: batches reach the file in order
            batch = self._take()
            if batch:
                self._append(b"".join(batch), len(batch))
        if self._clock() - started >= SLOW_S:
            self._slow_until = self._clock() + SLOW_HOLD_S
            log.warning("audit write took %.0f ms: the next batches are written by a thread",
                        (self._clock() - started) * 1000)

    # ---- any thread -------------------------------------------------------------------

    def flush(self, timeout: float = 5.0) -> None:
        """Append everything buffered so far, and wait for batches being written."""
        pending = self._pending
        if pending is not None:
            with contextlib.suppress(Exception):  # counted and logged by _append
                pending.result(timeout)
        with self._write_lock:
            batch = self._take()
            if batch:
                self._append(b"".join(batch), len(batch))

    def close(self, timeout: float = 30.0) -> None:
        """Append what is left, stop the timers and close the target (once)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for handle in (self._timer, self._ticker):
            if handle is not None:
                handle.cancel()  # TimerHandle.cancel is safe from another thread
        self.flush(timeout)
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        with self._write_lock:
            self.target.close()

    def _take(self) -> list[bytes]:
        with self._lock:
            batch, self._lines, self._bytes = self._lines, [], 0
        return batch

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="audit-slow-write")
        return self._executor

    def _append_locked(self, data: bytes, n: int) -> None:
        """The executor's: append one batch."""
        with self._write_lock:
            self._append(data, n)

    def _append(self, data: bytes, n: int) -> None:
        """Append one batch (the caller holds the write lock)."""
        if self._guard(lambda: self.target.append(data)):
            self.written += n

    def _guard(self, step: Callable[[], None]) -> bool:
        try:
            step()
        except OSError:
            self.errors += 1
            log.exception("audit write failed")
            return False
        return True
