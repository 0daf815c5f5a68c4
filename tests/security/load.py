"""Concurrent clients for the fault suite: threads sending chat completions in a loop.

``Load(urls, models, threads)`` starts at once; each thread keeps one ``httpx`` client
(keep-alive) on one gateway URL, cycles through ``models`` and records the
``x-verity-audit-id`` of every 200 it got. A thread stops at the first error (a
gateway that shut down refuses it) or at :meth:`Load.stop`. No timing is measured.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx

__all__ = ["Load"]

USER = [{"role": "user", "content": "What is the capital of France?"}]


class Load:
    def __init__(self, urls: Sequence[str], models: Sequence[str], threads: int = 4,
                 headers: dict[str, str] | None = None) -> None:
        self.completed: list[str] = []
        """Audit ids of the 200s the clients received (every model is under a policy)."""
        self.statuses: list[int] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(urls[i % len(urls)], models,
                                                                  i, headers or {}),
                                          name=f"load-{i}", daemon=True)
                         for i in range(threads)]
        for t in self._threads:
            t.start()

    def _run(self, url: str, models: Sequence[str], offset: int, headers: dict[str, str]
             ) -> None:
        with httpx.Client(base_url=url, timeout=30, headers=headers) as http:
            i = offset
            while not self._stop.is_set():
                body: dict[str, Any] = {"model": models[i % len(models)], "messages": USER}
                i += 1
                try:
                    r = http.post("/v1/chat/completions", json=body)
                except httpx.HTTPError as exc:
                    with self._lock:
                        self.errors.append(exc)
                    return
                with self._lock:
                    self.statuses.append(r.status_code)
                    if r.status_code == 200:
                        self.completed.append(r.headers["x-verity-audit-id"])

    def count(self) -> int:
        with self._lock:
            return len(self.completed)

    def wait_for(self, n: int, timeout: float = 30.0) -> None:
        """Until ``n`` requests completed (bounded: an event, not a timing)."""
        deadline = time.monotonic() + timeout
        while self.count() < n:
            assert time.monotonic() < deadline, f"only {self.count()} of {n} completed"
            assert any(t.is_alive() for t in self._threads), (self.errors, self.statuses[-5:])
            time.sleep(0.02)

    def stop(self) -> None:
        """Let every thread finish its request in flight, then end."""
        self._stop.set()
        for t in self._threads:
            t.join(30)
