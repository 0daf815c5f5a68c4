"""DisconnectWatcher: it cancels the request when the client leaves while armed, not
after disarm(); it listens only from WATCH_AFTER on (a request answered sooner starts
no task); and a disarmed watcher leaves no reference cycle behind (one per request made
the collector's passes a per-request cost; docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from typing import Any

from gateway.http.asgi import DisconnectWatcher


def _receive(leave: asyncio.Event) -> Any:
    async def receive() -> dict[str, Any]:
        await leave.wait()
        return {"type": "http.disconnect"}
    return receive


def test_a_client_leaving_while_armed_cancels_the_request() -> None:
    async def main() -> tuple[bool, bool]:
        leave = asyncio.Event()
        watcher: DisconnectWatcher | None = None

        async def request() -> None:
            nonlocal watcher
            watcher = DisconnectWatcher(_receive(leave))
            await asyncio.sleep(10)

        task = asyncio.create_task(request())
        await asyncio.sleep(0)
        leave.set()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert watcher is not None
        return task.cancelled(), watcher.disconnected

    assert asyncio.run(main()) == (True, True)


def test_a_client_leaving_after_disarm_cancels_nothing() -> None:
    async def main() -> tuple[str, bool]:
        leave = asyncio.Event()
        watcher = DisconnectWatcher(_receive(leave))
        watcher.disarm()
        leave.set()
        await asyncio.sleep(0.01)
        return "done", watcher.disconnected

    assert asyncio.run(main()) == ("done", False)


def test_a_request_answered_before_the_delay_never_listens() -> None:
    async def main() -> tuple[int, int]:
        calls = 0
        never = asyncio.Event()

        async def receive() -> dict[str, Any]:
            nonlocal calls
            calls += 1
            await never.wait()
            return {"type": "http.disconnect"}

        early = DisconnectWatcher(receive, delay=0.05)
        early.disarm()  # answered at once
        await asyncio.sleep(0.2)
        after_early = calls
        late = DisconnectWatcher(receive, delay=0.05)
        await asyncio.sleep(0.2)  # past the delay: this one listens
        late.disarm()
        await asyncio.sleep(0)
        return after_early, calls

    assert asyncio.run(main()) == (0, 1)


def test_a_disarmed_watcher_is_freed_without_the_collector() -> None:
    async def main() -> bool:
        leave = asyncio.Event()  # never set: the watcher waits until disarmed
        watcher = DisconnectWatcher(_receive(leave), delay=0)
        await asyncio.sleep(0)  # the watch task is waiting in receive()
        watch = weakref.ref(watcher._watch)  # in the cycle there was, with the watcher
        watcher.disarm()
        for _ in range(3):  # the cancel is delivered, the task ends
            await asyncio.sleep(0)
        del watcher
        return watch() is None

    gc.collect()
    gc.disable()
    try:
        freed = asyncio.run(main())
    finally:
        gc.enable()
    assert freed, "a disarmed watcher is only freed by the cyclic collector"
