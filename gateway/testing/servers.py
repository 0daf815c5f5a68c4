"""Run an ASGI app under uvicorn on a loopback port in a background thread.

Used by ``gateway demo``, ``gateway eval``, the tests and the benchmarks — the
same real server the product runs, not an in-process transport.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any, Literal

import uvicorn

__all__ = ["ServerThread", "free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ServerThread:
    """``with ServerThread(app) as srv: srv.url`` — starts, waits ready, stops on exit."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int | None = None,
                 lifespan: Literal["auto", "on", "off"] = "on", log_level: str = "warning",
                 graceful_timeout: float = 5.0) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.config = uvicorn.Config(app, host=host, port=self.port, lifespan=lifespan,
                                     log_level=log_level, access_log=False,
                                     # uvicorn annotates int, but only hands it to
                                     # asyncio.wait_for(timeout=...), which takes a float.
                                     timeout_graceful_shutdown=graceful_timeout)  # type: ignore[arg-type]
        self.server = uvicorn.Server(self.config)
        self._thread = threading.Thread(target=self._run, name=f"uvicorn:{self.port}",
                                        daemon=True)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        try:
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(self.server.serve())
        except BaseException as exc:  # surfaced by start()
            self.error = exc
        finally:
            if self.loop is not None:
                self.loop.close()

    def start(self, timeout: float = 20.0) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if self.error is not None or not self._thread.is_alive():
                raise RuntimeError(f"server on port {self.port} failed to start") from self.error
            if time.monotonic() > deadline:
                raise TimeoutError(f"server on port {self.port} did not start in {timeout}s")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 20.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
