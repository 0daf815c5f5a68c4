"""``gateway`` with a probe of its cyclic garbage collector, for ``bench/gc_per_request.py``.

    python bench/_gc_probe.py serve ...      # the arguments of ``python -m gateway``

SIGUSR1 starts a window: the collector's passes are timed (thread CPU), and with
``GC_PROBE_SAVEALL=1`` what they find is kept (``gc.DEBUG_SAVEALL``). SIGUSR2 ends it
and writes one JSON line to ``GC_PROBE_OUT``: process CPU seconds in the window,
collections and their CPU seconds per generation, the thresholds, and the kinds of
cyclic garbage found (type name → count).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
from collections import Counter
from types import FrameType
from typing import Any

import orjson

_state: dict[str, Any] = {}


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _state["t0"] = time.thread_time()
        return
    gen = str(info["generation"])
    _state["count"][gen] += 1
    _state["seconds"][gen] += time.thread_time() - _state["t0"]


def _start(signum: int, frame: FrameType | None) -> None:
    gc.collect()
    if os.environ.get("GC_PROBE_SAVEALL"):
        gc.set_debug(gc.DEBUG_SAVEALL)
    _state.update(count=Counter(), seconds=Counter(), cpu=time.process_time())
    gc.callbacks.append(_on_gc)


def _stop(signum: int, frame: FrameType | None) -> None:
    gc.callbacks.remove(_on_gc)
    cpu = time.process_time() - _state["cpu"]
    gc.collect()
    gc.set_debug(0)
    kinds = Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage)
    gc.garbage.clear()
    line = {"process_cpu_s": round(cpu, 4), "collections": dict(_state["count"]),
            "collector_cpu_s": {k: round(v, 4) for k, v in _state["seconds"].items()},
            "thresholds": gc.get_threshold(), "garbage": dict(kinds.most_common(40))}
    with open(os.environ["GC_PROBE_OUT"], "ab") as out:
        out.write(orjson.dumps(line) + b"\n")


if __name__ == "__main__":  # not when a worker process re-imports this as __mp_main__
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    from gateway.cli import main

    sys.exit(main(sys.argv[1:]))
