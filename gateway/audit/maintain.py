"""Keeping an audit directory in shape: compaction and retention.

:func:`apply_retention` deletes closed files — never one a writer may still append
to — of days older than ``audit.retention_days``, then the oldest ones while the
directory is larger than ``audit.retention_mb``; a compacted file's three tables go
together. :class:`Maintainer` is the writing process's helper thread (at a lower
CPU priority than the gateway's): at start it compacts the closed files it finds
(``audit.compact``) and applies retention, then it does the same for each file its
writer closes. Several processes may maintain one directory: compaction locks each
file (:mod:`gateway.audit.compact`), and a file another process deleted first is
skipped. ``gateway audit compact`` runs the same steps once, from the command line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gateway.audit.layout import DATE_DIR, ROLLUP_ANY, TABLES, closed_segments

__all__ = ["Maintainer", "Retention", "apply_retention"]

log = logging.getLogger("gateway.audit")

NICE = 10
"""How much lower the maintenance thread's CPU priority is than the gateway's."""


@dataclass(frozen=True, slots=True)
class Retention:
    days: float | None = None
    max_bytes: int | None = None

    def __bool__(self) -> bool:
        return self.days is not None or self.max_bytes is not None


@dataclass
class _Unit:
    """One stem's files: a closed JSONL file, or a compacted file's tables."""

    day: str
    mtime: float
    paths: list[Path]
    size: int


def _units(root: Path, closed: set[Path]) -> tuple[list[_Unit], int]:
    """The deletable units (oldest first) and the directory's total size."""
    total = 0
    stems: dict[str, list[Path]] = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            try:
                total += path.stat().st_size
            except OSError:
                continue
            if name.startswith("."):
                continue
            if name.endswith(".jsonl"):
                if path in closed:
                    stems.setdefault(str(path)[:-6], []).append(path)
                continue
            for table in TABLES:
                if name.endswith(f".{table}.parquet"):
                    stems.setdefault(str(path)[:-len(f".{table}.parquet")], []).append(path)
            rollup = ROLLUP_ANY.search(name)
            if rollup is not None:
                stems.setdefault(str(path)[:-len(rollup[0])], []).append(path)
    units = []
    for paths in stems.values():
        size, mtime = 0, 0.0
        for p in paths:
            with contextlib.suppress(OSError):
                st = p.stat()
                size += st.st_size
                mtime = max(mtime, st.st_mtime)
        m = DATE_DIR.match(paths[0].parent.name)
        units.append(_Unit(m[1] if m else "", mtime, paths, size))
    units.sort(key=lambda u: (u.day, u.mtime))
    return units, total


def apply_retention(root: Path, retention: Retention, *, now: float | None = None,
                    max_age: float = 3600.0) -> list[Path]:
    """Delete what ``retention`` no longer keeps (see the module docstring); the
    files deleted. ``max_age`` is the writers' rotation age (what makes a file
    closed when its writer is gone)."""
    if not retention or not root.is_dir():
        return []
    now = time.time() if now is None else now
    closed = set(closed_segments(root, now=now, max_age=max_age))
    units, total = _units(root, closed)
    cutoff = ""
    if retention.days is not None:
        cutoff = (datetime.fromtimestamp(now, UTC) - timedelta(days=retention.days)).date() \
            .isoformat()
    deleted: list[Path] = []
    for unit in units:
        old = bool(cutoff) and bool(unit.day) and unit.day < cutoff
        big = retention.max_bytes is not None and total > retention.max_bytes
        if not (old or big):
            continue
        for path in unit.paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                deleted.append(path)
        total -= unit.size
    for folder in {p.parent for p in deleted}:
        with contextlib.suppress(OSError):
            folder.rmdir()  # only once empty
    return deleted


class Maintainer:
    """Compaction and retention for one writing process (see the module docstring)."""

    def __init__(self, root: Path, *, compact: bool, retention: Retention,
                 max_age: float) -> None:
        self.root = root
        self.compact = compact
        self.retention = retention
        self.max_age = max_age
        self.compacted = 0
        self.deleted = 0
        self.errors = 0
        self._queue: queue.SimpleQueue[Path | threading.Event | None] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="audit-maintenance",
                                        daemon=True)
        self._thread.start()

    def closed(self, path: Path) -> None:
        """A writer closed ``path``: compact it and apply retention (in the thread)."""
        self._queue.put(path)

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until everything handed over so far is done (tests, benchmarks)."""
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def close(self) -> None:
        """Stop after the file in hand; files still queued wait for the next start."""
        self._stopping.set()
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        self._pass(closed_segments(self.root, now=time.time(), max_age=self.max_age))
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            self._pass([item])

    def _pass(self, paths: list[Path]) -> None:
        try:
            if self.compact:
                from gateway.audit.compact import compact_files

                for path in paths:
                    if self._stopping.is_set():
                        return
                    self.compacted += len(compact_files([path]))
            if not self._stopping.is_set():
                self.deleted += len(apply_retention(self.root, self.retention,
                                                    max_age=self.max_age))
        except Exception:  # the writer goes on whatever maintenance does
            self.errors += 1
            log.exception("audit maintenance of %s failed", self.root)
