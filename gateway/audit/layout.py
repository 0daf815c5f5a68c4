"""Where audit files live: the directory layout, and finding the files to read.

Two layouts (``audit.path``):

- **one file** — a path ending in ``.jsonl``: every process appends whole lines to it;
  it is never rotated (the default, ``verity-audit.jsonl``).
- **a directory** — any other path. Each writing process (a gateway worker, a pod)
  has files of its own, so none ever waits for or tears another's lines::

      <dir>/date=2026-11-25/verity-<host>-<pid>-<start>-<seq>.jsonl

  ``<host>`` is the host name (a pod's name), ``<pid>`` the process, ``<start>`` when
  its writer started (``yyyymmddThhmmssffffff``, UTC: two writers of one process never
  share a name) and ``<seq>`` counts its files. The
  folder is the UTC day the file was *opened*; a file is closed and the next begun
  past ``audit.rotate_mb``, after ``audit.rotate_seconds`` and at every UTC day
  change. A closed ``X.jsonl`` may be compacted (:mod:`gateway.audit.compact`) into
  ``X.records.parquet``, ``X.layers.parquet`` and ``X.candidates.parquet``; a reader
  takes the Parquet files of a stem once ``X.records.parquet`` exists (renamed into
  place last) and the JSONL otherwise, so a crash in between never counts a record
  twice. Names starting with ``.`` are temporary and never read.

A reader (:func:`find_files`) is given a file, a directory (walked; ``date=`` folders
outside the time range skipped) or a glob, and returns the files grouped as
:class:`AuditFiles`. Nothing here writes.
"""

from __future__ import annotations

import glob
import os
import re
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

__all__ = ["ROLLUP_ANY", "ROLLUP_SUFFIX", "TABLES", "AuditFiles", "AuditPathError", "DATE_DIR", "closed_segments",
           "date_folder", "find_files", "host_name", "segment_name", "writer_of"]

TABLES = ("layers", "candidates", "records")
"""The Parquet tables a compacted file becomes, in the order they are renamed into place
(``records`` last: its presence is what makes a reader take the Parquet files)."""
DATE_DIR = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")
ROLLUP_SUFFIX = ".rollup-v1.parquet"
"""A compacted stem's rollup (:mod:`gateway.audit.rollup`; the version is in the name)."""
ROLLUP_ANY = re.compile(r"\.rollup(-v\d+)?\.parquet$")
"""Any version's rollup (what retention deletes with its stem)."""
_SEGMENT = re.compile(r"^(?P<writer>.+)-(?P<seq>\d{5,})\.jsonl$")
_GLOB_CHARS = frozenset("*?[")


class AuditPathError(Exception):
    """The audit path given to a reader does not exist or holds no audit file."""


def host_name() -> str:
    """The host's name, safe in a file name (a pod's name in Kubernetes)."""
    return re.sub(r"[^A-Za-z0-9.]+", "_", socket.gethostname())[:63] or "host"


def date_folder(root: Path, day: date) -> Path:
    return root / f"date={day.isoformat()}"


def segment_name(host: str, pid: int, start: datetime, seq: int) -> str:
    """``verity-<host>-<pid>-<start>-<seq>.jsonl`` (see the module docstring)."""
    return f"verity-{host}-{pid}-{start:%Y%m%dT%H%M%S%f}-{seq:05d}.jsonl"


def writer_of(path: Path) -> tuple[str, int] | None:
    """``(writer, seq)`` of a segment file name (its writer: everything before the
    sequence number; one writer's files span day folders), or None for another name."""
    m = _SEGMENT.match(path.name)
    return (m["writer"], int(m["seq"])) if m else None


@dataclass
class AuditFiles:
    """The files a reader reads: open (or uncompacted) JSONL files, and the compacted
    Parquet tables, each list sorted by path."""

    jsonl: list[Path] = field(default_factory=list)
    records: list[Path] = field(default_factory=list)
    layers: list[Path] = field(default_factory=list)
    candidates: list[Path] = field(default_factory=list)
    rollups: list[Path] = field(default_factory=list)
    """The current-version rollup of each compacted stem that has one
    (:mod:`gateway.audit.rollup`)."""
    rolled_up: set[Path] = field(default_factory=set)
    """The ``X.records.parquet`` files whose stem has one of ``rollups``."""

    def __bool__(self) -> bool:
        return bool(self.jsonl or self.records)

    def all(self) -> list[Path]:
        return [*self.jsonl, *self.records, *self.layers, *self.candidates, *self.rollups]

    def directories(self) -> list[Path]:
        """The folders holding these files (what a reader may open, and nothing else)."""
        return sorted({p.parent.resolve() for p in self.all()})

    def signature(self) -> tuple[tuple[str, int, int], ...]:
        """(path, size, mtime) of every file: changes whenever anything was written."""
        out = []
        for p in self.all():
            try:
                st = p.stat()
            except OSError:
                continue
            out.append((str(p), st.st_size, st.st_mtime_ns))
        return tuple(out)


def _stem(path: Path) -> tuple[str, str] | None:
    """``(stem, kind)``: kind is ``jsonl`` or a table name; None for other files."""
    name = path.name
    if name.startswith("."):
        return None
    if name.endswith(".jsonl"):
        return str(path)[:-len(".jsonl")], "jsonl"
    for table in TABLES:
        suffix = f".{table}.parquet"
        if name.endswith(suffix):
            return str(path)[:-len(suffix)], table
    if name.endswith(ROLLUP_SUFFIX):
        return str(path)[:-len(ROLLUP_SUFFIX)], "rollup"
    return None


def _in_range(day: str, since: datetime | None, until: datetime | None) -> bool:
    """Whether a ``date=`` folder can hold records started in [since, until]: a record is
    written on its start day or later (one day of slack: a file opened before midnight
    holds records until it rotates)."""
    d = date.fromisoformat(day)
    if since is not None and d < since.date() - timedelta(days=1):
        return False
    return not (until is not None and d > until.date() + timedelta(days=1))


def _walk(root: Path, since: datetime | None, until: datetime | None) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        keep = []
        for name in sorted(dirnames):
            if name.startswith("."):
                continue
            m = DATE_DIR.match(name)
            if m is None or _in_range(m[1], since, until):
                keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            yield Path(dirpath) / name


def _expand(spec: str, since: datetime | None, until: datetime | None) -> Iterator[Path]:
    if _GLOB_CHARS & set(spec):
        for match in sorted(glob.glob(os.path.expanduser(spec), recursive=True)):
            path = Path(match)
            if path.is_dir():
                yield from _walk(path, since, until)
            else:
                yield path
        return
    path = Path(spec).expanduser()
    if path.is_dir():
        yield from _walk(path, since, until)
    elif path.exists():
        yield path
    else:
        raise AuditPathError(f"no audit file or directory at {path.resolve()}")


def group(paths: Iterable[Path]) -> AuditFiles:
    """Audit files by kind: for each stem its Parquet tables once ``records`` exists,
    else its JSONL file; anything else is ignored."""
    stems: dict[str, dict[str, Path]] = {}
    for path in paths:
        got = _stem(path)
        if got is not None:
            stems.setdefault(got[0], {})[got[1]] = path
    out = AuditFiles()
    for kinds in (stems[s] for s in sorted(stems)):
        if "records" in kinds:
            out.records.append(kinds["records"])
            for table in ("layers", "candidates"):
                if table in kinds:
                    getattr(out, table).append(kinds[table])
            if "rollup" in kinds:
                out.rollups.append(kinds["rollup"])
                out.rolled_up.add(kinds["records"])
        elif "jsonl" in kinds:
            out.jsonl.append(kinds["jsonl"])
    return out


def find_files(spec: str, *, since: datetime | None = None,
               until: datetime | None = None) -> AuditFiles:
    """The audit files under ``spec`` (a file, a directory or a glob), ``date=`` folders
    outside ``[since, until]`` (naive UTC) left out. Raises :class:`AuditPathError` when
    ``spec`` names nothing."""
    return group(_expand(spec, since, until))


def closed_segments(root: Path, *, now: float, max_age: float) -> list[Path]:
    """The JSONL files of a directory layout no writer appends to any more: each writer's
    files but its newest, and any file untouched for longer than ``max_age`` seconds
    (a writer rotates a file at that age even when idle, so an older file's writer has
    stopped). Oldest first."""
    newest: dict[str, int] = {}
    segments: list[tuple[Path, str, int]] = []
    for path in _walk(root, None, None):
        if not path.name.endswith(".jsonl") or path.name.startswith("."):
            continue
        ident = writer_of(path)
        writer, seq = ident if ident is not None else (str(path), 0)
        segments.append((path, writer, seq))
        newest[writer] = max(newest.get(writer, seq), seq)
    out = []
    for path, writer, seq in segments:
        if seq < newest[writer]:
            out.append(path)
            continue
        try:
            idle = now - path.stat().st_mtime
        except OSError:
            continue
        if idle > max_age:
            out.append(path)
    return sorted(out, key=_age_key)


def _age_key(path: Path) -> tuple[str, float]:
    m = DATE_DIR.match(path.parent.name)
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = 0.0
    return (m[1] if m else "", mtime)
