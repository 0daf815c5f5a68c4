"""Appending whole lines to audit files: one file, or a directory of rotated files.

Both targets are used by one thread (the sink's writer) and take a batch of complete
lines at a time:

- :class:`AppendFile` — one file opened ``O_APPEND`` (mode 0600). A batch is one
  ``write`` call, so processes appending to the same file never interleave inside a
  line. A file whose last line a crash tore (a kill during a write, a full disk) is
  not appended to as is: the first batch begins with a newline, so the torn line
  stays one bad line that readers skip, and the new record is whole.
- :class:`SegmentWriter` — the directory layout of :mod:`gateway.audit.layout`: files
  of this process only, opened when there is something to write, rotated by size, by
  age (also while idle: :meth:`SegmentWriter.tick`) and at each UTC day change. Each
  closed file is handed to ``on_close`` (compaction and retention, elsewhere).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from gateway.audit.layout import date_folder, host_name, segment_name

__all__ = ["AppendFile", "SegmentWriter"]

FILE_MODE = 0o600
DIR_MODE = 0o700


def _ends_torn(path: Path, size: int) -> bool:
    """Whether the non-empty file ``path`` does not end with a newline."""
    if size == 0:
        return False
    try:
        with path.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) != b"\n"
    except OSError:
        return False


class AppendFile:
    """One JSONL file, appended to in whole batches (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                           FILE_MODE)
        self.size = os.fstat(self._fd).st_size
        self._torn = _ends_torn(path, self.size)
        """The file may end inside a line: begin the next batch with a newline."""

    def append(self, data: bytes) -> None:
        """Write ``data`` (complete lines) at the end of the file, in one call when the
        system allows (a regular file takes it whole unless the disk is full)."""
        if self._torn:
            data = b"\n" + data
        view = memoryview(data)
        try:
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
                self.size += n
        except OSError:
            self._torn = True  # part of a line may be on disk
            raise
        self._torn = False

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class SegmentWriter:
    """This process's files in a directory layout (see the module docstring)."""

    def __init__(self, root: Path, *, max_bytes: int, max_age: float,
                 on_close: Callable[[Path], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.on_close = on_close
        self._clock = clock
        root.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        if not os.access(root, os.W_OK | os.X_OK):
            raise PermissionError(f"audit directory {root} is not writable")
        self._host = host_name()
        self._pid = os.getpid()
        self._start = datetime.fromtimestamp(clock(), UTC)
        self._seq = 0
        self._file: AppendFile | None = None
        self._opened = 0.0
        self._day = ""
        self.files: list[Path] = []
        """Every file this writer opened, oldest first."""

    @property
    def current(self) -> Path | None:
        """The file being appended to, if one is open."""
        return self._file.path if self._file is not None else None

    def append(self, data: bytes) -> None:
        now = self._clock()
        day = datetime.fromtimestamp(now, UTC).date()
        if self._file is not None and (self._file.size >= self.max_bytes
                                       or now - self._opened >= self.max_age
                                       or day.isoformat() != self._day):
            self._close_file()
        if self._file is None:
            folder = date_folder(self.root, day)
            folder.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
            self._seq += 1
            path = folder / segment_name(self._host, self._pid, self._start, self._seq)
            self._file = AppendFile(path)
            self._opened, self._day = now, day.isoformat()
            self.files.append(path)
        self._file.append(data)

    def tick(self) -> None:
        """Close the open file if it is due (age or day) though nothing was written."""
        if self._file is None:
            return
        now = self._clock()
        if now - self._opened >= self.max_age or \
                datetime.fromtimestamp(now, UTC).date().isoformat() != self._day:
            self._close_file()

    def close(self) -> None:
        self._close_file()

    def _close_file(self) -> None:
        file, self._file = self._file, None
        if file is None:
            return
        file.close()
        if self.on_close is not None:
            self.on_close(file.path)
