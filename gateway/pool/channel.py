"""One verification worker process as the relay sees it: a duplex socket, one call at
a time, served from the relay's event loop.

Why not ``concurrent.futures.ProcessPoolExecutor``: per call it wakes a manager thread
through a pipe, a feeder thread pickles and writes the call, the manager unpickles the
result and hands it back through ``call_soon_threadsafe`` — two extra threads taking
the GIL from the event loop for every job, which on a relay using a whole core costs
clients throughput one for one. Here a call is pickled once on the loop and written
to the worker's socket; the reply is read by the loop's own reader
(``asyncio`` streams) and unpickled there. No thread, no lock.

Frames: an 8-byte little-endian length, then a pickle. The worker
(:func:`gateway.pool.worker.serve`) answers first ``("ready", pid)`` once its runtime
is open, then one ``(ok, value)`` per call (``value`` the exception when not ok).
The relay closing its end stops the worker (after the call it is running).

A worker that dies (its socket reaches end of file) fails the call it was running
with :class:`WorkerDied`; its owner (``gateway.pool.runner``) replaces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import socket
import struct
from collections.abc import Callable
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any

import gateway.pool.worker as worker
from gateway.settings import Settings

__all__ = ["THREADED_BYTES", "Channel", "WorkerDied"]

log = logging.getLogger("gateway.pool")

FRAME = struct.Struct("<Q")

THREADED_BYTES = 1 << 20
"""A reply at least this large is unpickled on a thread (the GIL then passes to the
loop every switch interval) rather than on the loop in one piece."""


class WorkerDied(RuntimeError):
    """The worker process running (or about to run) the call is gone."""


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = FRAME.unpack(await reader.readexactly(FRAME.size))
    return await reader.readexactly(size)


def _retrieved(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


class Channel:
    """A worker process and the relay's end of its socket (see the module docstring)."""

    def __init__(self, process: SpawnProcess, pid: int, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.process = process
        self.pid = pid
        self._reader = reader
        self._writer = writer
        self.pending: asyncio.Future[Any] | None = None
        """The call the worker is running (its reply not read yet)."""
        self.dead = False
        self.replaced = False
        """Its owner started a replacement (once)."""
        self._on_free: Callable[[Channel], None] = lambda _ch: None
        self._on_death: Callable[[Channel, bool], None] = lambda _ch, _busy: None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def spawn(cls, ctx: SpawnContext, settings: Settings, nice: int,
                    timeout_s: float) -> Channel:
        """Start a worker process and wait (at most ``timeout_s``) until it is ready."""
        mine, theirs = socket.socketpair()
        process = ctx.Process(target=worker.serve, name="verity-verification", daemon=True,
                              args=(theirs, settings, nice, os.getpid()))
        try:
            # spawn writes the settings to the child's pipe: not on the loop.
            await asyncio.to_thread(process.start)
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        reader, writer = await asyncio.open_connection(sock=mine, limit=1 << 20)
        try:
            hello = pickle.loads(await asyncio.wait_for(_read_frame(reader), timeout_s))
            if not (isinstance(hello, tuple) and hello[0] == "ready"):
                raise WorkerDied(f"the worker failed to start: {hello!r}"[:500])
        except BaseException:
            writer.close()
            if process.is_alive():
                process.kill()
            await asyncio.to_thread(process.join, 5)
            raise
        return cls(process, int(hello[1]), reader, writer)

    def serve(self, on_free: Callable[[Channel], None],
              on_death: Callable[[Channel, bool], None]) -> None:
        """Start reading replies: ``on_free`` after each, ``on_death(channel, busy)``
        once the worker is gone (``busy``: it was running a call)."""
        self._on_free, self._on_death = on_free, on_death
        self._task = asyncio.get_running_loop().create_task(
            self._read_replies(), name=f"verification-worker-{self.pid}")

    def send(self, payload: bytes) -> asyncio.Future[Any]:
        """Write one call (a pickled ``(fn, args)``); its reply's future. The transport
        buffers what the socket does not take at once: never a wait on the loop."""
        if self.dead:
            raise WorkerDied(f"verification worker {self.pid} is gone")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        # Its caller may have stopped waiting (past its deadline): an error that ends
        # it later is then nobody's to read, and must not be logged as never retrieved.
        fut.add_done_callback(_retrieved)
        self.pending = fut
        if len(payload) < 65536:
            self._writer.write(FRAME.pack(len(payload)) + payload)
        else:  # no copy of a large job
            self._writer.write(FRAME.pack(len(payload)))
            self._writer.write(payload)
        return fut

    async def _read_replies(self) -> None:
        try:
            while True:
                data = await _read_frame(self._reader)
                if len(data) >= THREADED_BYTES:
                    ok, value = await asyncio.to_thread(pickle.loads, data)
                else:
                    ok, value = pickle.loads(data)
                fut, self.pending = self.pending, None
                if fut is not None and not fut.done():
                    if ok:
                        fut.set_result(value)
                    else:
                        fut.set_exception(value)
                self._on_free(self)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass  # the worker is gone (killed, crashed, or stopped by close)
        except asyncio.CancelledError:
            self._gone("closed")
            raise
        except Exception:  # noqa: BLE001 - an unreadable reply: treat the worker as lost
            log.exception("verification worker %d: unreadable reply", self.pid)
            self.kill()
        busy = self._gone("died")
        self._writer.close()
        self._on_death(self, busy)
        await asyncio.to_thread(self.process.join, 5)  # reaped, not left a zombie

    def _gone(self, why: str) -> bool:
        """Mark the worker gone; fail its running call. Whether there was one."""
        self.dead = True
        fut, self.pending = self.pending, None
        if fut is not None and not fut.done():
            fut.set_exception(WorkerDied(f"verification worker {self.pid} {why}"))
            return True
        return False

    def kill(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(OSError):
                self.process.kill()

    def close_input(self) -> None:
        """Close the relay's end: the worker stops after the call it is running."""
        self._writer.close()

    async def closed(self) -> None:
        """Stop reading (after :meth:`close_input` and the process's exit)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._gone("closed")
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
