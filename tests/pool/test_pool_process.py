"""The pool under ``gateway serve`` (a real process): its workers never outlive it."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from security.process import start_gateway

SHADOW = "mode: shadow\ndefault: true\nlayers: [{name: keyword, config: {block: [zzz]}}]\n"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def test_the_workers_exit_when_their_relay_is_killed(
        tmp_path: Path, wait_until: Callable[..., Any]) -> None:
    gw = start_gateway(tmp_path, {"upstreams": [{"name": "none",
                                                 "base_url": "http://127.0.0.1:9/v1"}],
                                  "readyz_detail": "public", "pool": {"workers": 1}},
                       policies={"shadow": SHADOW})
    pids: list[int] = []
    try:
        gw.ready()
        pids = httpx.get(gw.url + "/readyz", timeout=30).json()["shadow"]["pool"]["pids"]
        assert pids and all(_alive(p) for p in pids)  # ready means the workers are up
        gw.signal(signal.SIGKILL)  # no shutdown: the relay cannot stop its pool
        gw.wait()
        wait_until(lambda: not any(_alive(p) for p in pids), timeout=30.0,
                   message="the orphaned workers' exit")
    finally:
        if gw.proc.poll() is None:
            gw.stop()
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
