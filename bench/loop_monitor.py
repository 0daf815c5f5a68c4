"""Run ``gateway serve`` with a loop-stall monitor (bench only: ``probe_big_context.py
--loop-monitor``).

    python bench/loop_monitor.py OUT.json serve --host … --port …

A task on the relay's event loop wakes every millisecond and notes, for each gap over
5 ms between two wake-ups, its wall time and the relay process's CPU time over it
(every thread of the relay, not its worker processes): on a loaded box a gap's wall
time includes being descheduled, its CPU time is what the relay itself did while
its loop was held. ``OUT.json`` is rewritten with the ``--top`` largest gaps as they
come; deleting it starts the list over.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import orjson


async def monitor(out: Path, top: int = 20) -> None:
    gaps: list[dict[str, float]] = []
    wall, cpu = time.perf_counter(), time.process_time()
    while True:
        await asyncio.sleep(0.001)
        w, c = time.perf_counter(), time.process_time()
        if w - wall > 0.005:
            if gaps and not out.exists():  # the reader deleted it: start over
                gaps.clear()
            gaps.append({"wall_ms": round((w - wall) * 1000, 2),
                         "cpu_ms": round((c - cpu) * 1000, 2), "at": round(w, 3)})
            gaps.sort(key=lambda g: -g["cpu_ms"])
            del gaps[top:]
            out.write_bytes(orjson.dumps(gaps))
        wall, cpu = time.perf_counter(), time.process_time()


def main() -> int:
    out = Path(sys.argv[1])
    import uvicorn

    serve = uvicorn.Server.serve

    async def monitored(self: Any, sockets: Any = None) -> None:
        task = asyncio.get_running_loop().create_task(monitor(out))
        try:
            await serve(self, sockets)
        finally:
            task.cancel()

    uvicorn.Server.serve = monitored  # type: ignore[method-assign]
    from gateway.cli import main as gateway_main
    return gateway_main(sys.argv[2:])


if __name__ == "__main__":
    raise SystemExit(main())
