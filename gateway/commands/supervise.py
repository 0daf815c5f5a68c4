"""``gateway serve --workers N``: N relay processes sharing one port.

The supervisor (the process ``gateway serve`` started as) binds N listening sockets
to the same address with ``SO_REUSEPORT`` — after checking with one plain bind that
nothing else listens there, so a port in use is the usual one-line error and a second
gateway cannot silently join the group — then forks one worker per socket. The
kernel spreads new connections over the N sockets; each worker is a whole gateway
(its own event loop, upstream pools, policy store and reload watcher, shadow queue,
audit sink and telemetry), built after the fork. A connection stays with the worker
that accepted it.

- **Signals**: SIGTERM or SIGINT to the supervisor is forwarded once, as SIGTERM, to
  every worker, which shuts down as a single gateway does (stop accepting, finish
  in-flight requests, drain the shadow queue, flush the audit and telemetry); the
  supervisor exits when they all have, with status 0 (or the first worker's non-zero
  one). Workers run in their own process group, so a terminal's Ctrl-C reaches only
  the supervisor and each worker is told once; a worker whose supervisor dies gets
  SIGTERM from the kernel (``PR_SET_PDEATHSIG``).
- **A worker that dies** (a crash, the OOM killer) is replaced, on a new socket of
  the group, after a second; more than :data:`MAX_RESTARTS` replacements within
  :data:`RESTART_WINDOW` seconds stop the whole group (status 1). A worker that
  fails to start (status 3: a broken policies directory, an unreachable resource)
  stops the group with status 3 — the next one would fail alike.
- **Per process**: the server limits (``server.*``) apply in each worker (each runs
  the same limited protocol), so ``server.max_connections`` is per worker; telemetry
  names each process (``service.instance.id``: ``HOSTNAME-PID``, or the configured
  one with ``-<index>`` appended); ``/readyz``'s detail says which worker answered.
- **The audit**: every worker appends to the same ``audit.path``, opened ``O_APPEND``;
  the sink's writer hands the file whole lines, and a line is never split over two
  ``write`` calls, so on a local file system lines never interleave
  (``tests/audit/test_sink_processes.py`` writes from several processes at once).

Linux (and other systems with ``SO_REUSEPORT`` load balancing) only.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.settings import Settings

__all__ = ["MAX_RESTARTS", "RESTART_WINDOW", "bind_group", "instance_attributes", "supervise"]

log = logging.getLogger("gateway.supervisor")

MAX_RESTARTS = 5
RESTART_WINDOW = 60.0
NEVER_STARTED = 3
"""A worker's exit status when its server never started (the lifespan failed)."""

ServeOne = Callable[["Settings", socket.socket, int], int]
"""Runs one worker's server on its socket (index ``i`` of N); returns its exit status."""


def _family(host: str, port: int) -> tuple[socket.AddressFamily, tuple[object, ...]]:
    family, _, _, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    return family, address


def _socket(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    family, address = _family(host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


def _listening(host: str, port: int) -> socket.socket:
    sock = _socket(host, port, reuse_port=True)
    try:
        sock.listen(2048)
        sock.set_inheritable(True)
    except BaseException:
        sock.close()
        raise
    return sock


def bind_group(host: str, port: int, n: int) -> list[socket.socket]:
    """``n`` listening sockets on ``host:port`` (port 0: one free port for all), or
    OSError — ``EADDRINUSE`` when anything listens there already, ``SO_REUSEPORT``
    or not."""
    if not hasattr(socket, "SO_REUSEPORT"):
        raise OSError(0, "--workers needs SO_REUSEPORT (Linux)")
    with _socket(host, port, reuse_port=False) as probe:  # exclusive: nobody is there
        port = probe.getsockname()[1]
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            socks.append(_listening(host, port))
    except BaseException:
        for s in socks:
            s.close()
        raise
    return socks


def instance_attributes(raw: str, index: int) -> str:
    """``OTEL_RESOURCE_ATTRIBUTES`` for worker ``index``: a configured
    ``service.instance.id`` gets ``-<index>`` (each process exports its own metrics;
    without it the telemetry names each process ``HOSTNAME-PID``)."""
    items = [item for item in raw.split(",") if item.strip()]
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if sep and key.strip() == "service.instance.id":
            item = f"{key}={value.strip()}-{index}"
        out.append(item)
    return ",".join(out)


class _Group:
    def __init__(self, settings: Settings, serve_one: ServeOne) -> None:
        self.settings = settings
        self.serve_one = serve_one
        self.children: dict[int, int] = {}
        """pid -> worker index."""
        self.stopping = False
        self.status = 0
        self.restarts: list[float] = []
        self.held: list[socket.socket] = []
        """Listening sockets not yet handed to a worker (closed in each worker)."""

    def spawn(self, index: int, sock: socket.socket) -> None:
        pid = os.fork()
        if pid == 0:  # the worker: never returns
            # Only its own socket: a copy of another worker's would keep that one in the
            # group after its worker died, its share of connections never accepted.
            for other in self.held:
                if other is not sock:
                    other.close()
            _child(self.settings, self.serve_one, sock, index, os.getppid())
        sock.close()  # the worker holds it: a dead worker's socket leaves the group
        if sock in self.held:
            self.held.remove(sock)
        self.children[pid] = index

    def stop(self, signum: int = 0, _frame: object = None) -> None:
        if self.stopping:
            return
        self.stopping = True
        if signum:
            log.info("supervisor: %s: stopping %d worker(s)", signal.Signals(signum).name,
                     len(self.children))
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            index = self.children.pop(pid, None)
            if index is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            if self.stopping:
                if code and not self.status:
                    self.status = code if code > 0 else 1
                continue
            self._lost(index, code)

    def _lost(self, index: int, code: int) -> None:
        if code == NEVER_STARTED:
            log.error("supervisor: worker %d failed to start; stopping", index)
            self.status = NEVER_STARTED
            self.stop()
            return
        now = time.monotonic()
        self.restarts = [t for t in self.restarts if now - t < RESTART_WINDOW] + [now]
        if len(self.restarts) > MAX_RESTARTS:
            log.error("supervisor: worker %d exited (%s); more than %d restarts in %.0fs: "
                      "stopping", index, _how(code), MAX_RESTARTS, RESTART_WINDOW)
            self.status = 1
            self.stop()
            return
        log.warning("supervisor: worker %d exited (%s); replacing it", index, _how(code))
        time.sleep(1.0)
        if self.stopping:
            return
        try:
            sock = _listening(self.settings.host, self.port)
        except OSError as exc:
            log.error("supervisor: cannot listen again for worker %d: %s; stopping", index,
                      exc.strerror or exc)
            self.status = 1
            self.stop()
            return
        self.spawn(index, sock)

    port = 0


def supervise(settings: Settings, socks: list[socket.socket], serve_one: ServeOne) -> int:
    """Fork a worker per socket and look after them until they all exit (see the
    module docstring); the group's exit status."""
    group = _Group(settings, serve_one)
    group.port = socks[0].getsockname()[1]
    group.held = list(socks)
    previous = {sig: signal.signal(sig, group.stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for index, sock in enumerate(socks):
            group.spawn(index, sock)
        log.info("supervisor: %d workers on %s:%d", len(socks), settings.host, group.port)
        group.reap()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return group.status


def _how(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"


def _child(settings: Settings, serve_one: ServeOne, sock: socket.socket, index: int,
           parent: int) -> None:
    code = 1
    try:
        # Told to stop while not serving (starting, building the app): exit 0. While
        # uvicorn runs, serve_socket's own SIGTERM handler takes the signal it re-raises.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _stop_worker)
        os.setpgid(0, 0)  # Ctrl-C reaches the supervisor only, which tells each worker once
        _die_with(parent)
        attrs = os.environ.get("OTEL_RESOURCE_ATTRIBUTES")
        if attrs:
            os.environ["OTEL_RESOURCE_ATTRIBUTES"] = instance_attributes(attrs, index)
        code = serve_one(settings, sock, index)
    except SystemExit as exc:  # _stop_worker: told to stop (before or after serving)
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:  # noqa: BLE001 - the worker reports and exits, never returns
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _stop_worker(signum: int, _frame: object) -> None:
    """A worker's SIGTERM/SIGINT outside uvicorn's own handling: exit with status 0."""
    raise SystemExit(0)


def _die_with(parent: int) -> None:
    """SIGTERM this process when the supervisor dies (Linux; best effort elsewhere)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(0)
