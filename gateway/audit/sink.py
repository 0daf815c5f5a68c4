"""The audit sink: where one record per verification outcome goes.

:class:`AuditSink` is the contract (``write(record)``, ``close()``) and the seam for
other stores (a later audit store, a queue to one): implement the two methods, and
have :func:`open_audit_sink` (or the lifespan) choose it. ``write`` is
called on the event loop for every outcome, so it must never block. A record is
a mapping, or an object with ``to_dict()`` (the engine hands over its
``Outcome`` as is and does not touch it afterwards): the sink builds the mapping
when it needs it — the null sink never does. The default :class:`JsonlAuditSink`
appends one ``orjson`` line per outcome to ``settings.audit.path`` — one file, or a
directory of rotated files (:mod:`gateway.audit.layout`) — files created with mode
0600, a batch of lines per ``write``: records arriving within ``flush_interval``
seconds (0.05 by default) of a batch's first are appended together;
:meth:`JsonlAuditSink.flush` and :meth:`JsonlAuditSink.close` cut the wait short.
Made with ``loop`` (the gateway's: ``open_engine``), the sink encodes each record in
``write``, on the loop, and appends batches from a timer on the loop
(:mod:`gateway.audit.batch`: no thread competing with the loop for the GIL; large
batches and a slow disk go to a thread). Without one, a writer thread builds,
scrubs, encodes and appends them; :meth:`JsonlAuditSink.close` writes what is queued
and joins it.

Records are scrubbed before they are written: any mapping key that names a
credential (``authorization``, ``api_key``, ``api-key``, ``x-api-key``,
``cookie``) is removed at any depth. Message content appears only when the
policy turned ``telemetry.record_content`` on (verification decides; see
``gateway.verify.outcome``): the ``content`` field, and the answer sentences in
``failed_claims`` (overall, per layer, per regenerate attempt), all through the
policy's redaction; without it ``failed_claims`` are ``[]`` beside a
``failed_claim_count``. Layer explanations and ``reasons`` never quote the answer
(see ``gateway.verify.outcome``).
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import logging
import os
import queue
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import orjson

from gateway.audit.batch import LoopBatcher
from gateway.audit.maintain import Maintainer, Retention
from gateway.audit.scrub import ShapeCache, scrub
from gateway.audit.writer import AppendFile, SegmentWriter

if TYPE_CHECKING:
    from gateway.settings import AuditConfig

__all__ = ["AuditRecord", "AuditSink", "EncodedRecord", "JsonlAuditSink", "MemoryAuditSink",
           "NullAuditSink", "encode", "open_audit_sink", "scrub"]

log = logging.getLogger("gateway.audit")

class _Recordable(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


AuditRecord = Mapping[str, Any] | _Recordable
"""A record as handed to :meth:`AuditSink.write`: the mapping, or what builds it.
What builds it may also offer ``audit_line() -> bytes``: the record already free of
credential-named keys and encoded as one JSON object (no newline) — the JSONL sink
then writes that instead of building, scrubbing and encoding the mapping (an
``Outcome``, whose own fields are fixed; :class:`EncodedRecord`)."""


class EncodedRecord:
    """A record scrubbed and encoded elsewhere (a verification worker process: the relay
    only appends it), plus ``extra`` fields the relay adds (a job's ``shadow``): the
    JSONL sink splices them into the line, so the relay never decodes, walks or
    re-encodes the record. ``line``: one JSON object as orjson writes it, none of
    ``extra``'s keys in it."""

    __slots__ = ("extra", "line")

    def __init__(self, line: bytes, extra: Mapping[str, Any] | None = None) -> None:
        self.line = line
        self.extra = extra

    def audit_line(self) -> bytes:
        extra = self.extra
        if not extra:
            return self.line
        added = orjson.dumps(scrub(extra), default=str)
        if self.line == b"{}":
            return added
        return self.line[:-1] + b"," + added[1:]

    def to_dict(self) -> dict[str, Any]:
        record: dict[str, Any] = orjson.loads(self.line)
        if self.extra:
            record.update(scrub(self.extra))
        return record


def encode(record: Mapping[str, Any]) -> bytes:
    """``record`` as an audit line (no newline) for :class:`EncodedRecord`: scrubbed of
    credential-named keys, encoded like the JSONL sink does."""
    return orjson.dumps(scrub(record), default=str)


def as_mapping(record: AuditRecord) -> Mapping[str, Any]:
    return record if isinstance(record, Mapping) else record.to_dict()


@runtime_checkable
class AuditSink(Protocol):
    """Where outcome records go.

    ``write`` takes ownership of ``record`` (the caller never changes it afterwards)
    and returns at once: it runs on the event loop, so any I/O happens elsewhere (a
    thread, a queue). A record written is scrubbed of credential-named keys
    (:func:`scrub`) before it is stored. ``close`` stores what was written and
    releases the store; it is called once, at shutdown, off the event loop.
    """

    def write(self, record: AuditRecord) -> None: ...

    def close(self) -> None: ...


class NullAuditSink:
    """Discards records (``audit.path: null``)."""

    def write(self, record: AuditRecord) -> None:
        pass

    def close(self) -> None:
        pass


class MemoryAuditSink:
    """Keeps records in a list (tests, embedding)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, record: AuditRecord) -> None:
        self.records.append(scrub(as_mapping(record)))

    def close(self) -> None:
        pass


_STOP = object()

IDLE_TICK = 60.0
"""Seconds the writer thread waits for records before it checks, in a directory
layout, whether the open file is due to be closed (age, day change)."""


class JsonlAuditSink:
    """Append-only JSONL, written by a background thread: one file (a path ending in
    ``.jsonl``) or a directory of rotated files (:mod:`gateway.audit.layout`).

    Each batch of records is appended with one ``write`` (:mod:`gateway.audit.writer`):
    whole lines, never interleaved with another process's, and a line a crash tore is
    never glued to the next record. In a directory layout, each file the writer
    closes goes to ``on_close``. With ``loop`` (made on its thread) there is no writer
    thread: :mod:`gateway.audit.batch`."""

    def __init__(self, path: str | os.PathLike[str], *, flush_interval: float = 0.05,
                 rotate_bytes: int = 64 * 1024 * 1024, rotate_seconds: float = 3600.0,
                 on_close: Callable[[Path], None] | None = None,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.path = Path(path)
        self.flush_interval = flush_interval
        self.directory = not self.path.name.endswith(".jsonl")
        self._wake = threading.Event()
        self._target: AppendFile | SegmentWriter
        if self.directory:
            self._target = SegmentWriter(self.path, max_bytes=rotate_bytes,
                                         max_age=rotate_seconds, on_close=on_close)
            self._tick: float | None = min(IDLE_TICK, rotate_seconds)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._target = AppendFile(self.path)
            self._tick = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closed = False
        self._shapes = ShapeCache()
        self._written = self._errors = 0
        self._batch: LoopBatcher | None = None
        """Set when made with ``loop`` (on its thread): no writer thread."""
        self._thread: threading.Thread | None = None
        if loop is not None:
            target = self._target
            self._batch = LoopBatcher(
                loop, target, flush_interval=flush_interval, tick=self._tick,
                idle=target.tick if isinstance(target, SegmentWriter) else None)
        else:
            self._thread = threading.Thread(target=self._run, name="audit-writer",
                                            daemon=True)
            self._thread.start()

    @property
    def written(self) -> int:
        """Records appended so far."""
        return self._written + (self._batch.written if self._batch is not None else 0)

    @property
    def errors(self) -> int:
        """Records that could not be encoded, and batches that could not be written."""
        return self._errors + (self._batch.errors if self._batch is not None else 0)

    @property
    def files(self) -> list[Path]:
        """The files written to (a directory layout: every file this process opened)."""
        target = self._target
        return list(target.files) if isinstance(target, SegmentWriter) else [self.path]

    def write(self, record: AuditRecord) -> None:
        """Encode ``record`` into the loop's batch, or queue it for the writer thread
        (the caller must not mutate it afterwards)."""
        if self._closed:
            log.warning("audit sink closed; record %s not written",
                        getattr(record, "audit_id", None) if not isinstance(record, Mapping)
                        else record.get("audit_id"))
            return
        batch = self._batch
        if batch is None:
            self._queue.put(record)
            return
        try:
            line = self._line(record)
        except Exception:  # a bad record never fails the request
            self._errors += 1
            log.exception("audit record could not be encoded")
            return
        batch.add(line)

    def _line(self, record: AuditRecord) -> bytes:
        """``record`` scrubbed and encoded, with its newline."""
        encoded = getattr(record, "audit_line", None)
        return (encoded() if encoded is not None else orjson.dumps(
            self._shapes.scrubbed(as_mapping(record)), default=str)) + b"\n"

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until everything written so far is on disk (tests, shutdown)."""
        if self._batch is not None:
            self._batch.flush(timeout)
            return
        done = threading.Event()
        self._queue.put(done)
        self._wake.set()
        done.wait(timeout)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._batch is not None:
            self._batch.close()
            return
        self._queue.put(_STOP)
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self._target.close()

    def _next(self) -> Any:
        """The next queued item; in a directory layout, closes a file that is due while
        nothing arrives."""
        while True:
            try:
                return self._queue.get(timeout=self._tick)
            except queue.Empty:
                target = self._target
                if isinstance(target, SegmentWriter):
                    self._guard(target.tick)

    def _run(self) -> None:
        while True:
            item = self._next()
            if self.flush_interval > 0:  # gather a batch: puts meanwhile wake nobody
                self._wake.wait(self.flush_interval)
                self._wake.clear()
            batch = [item]
            while True:  # take whatever else is already queued: one write per batch
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            lines: list[bytes] = []
            waiting: list[threading.Event] = []
            stop = False
            for entry in batch:
                if entry is _STOP:
                    stop = True
                elif isinstance(entry, threading.Event):
                    waiting.append(entry)
                else:
                    try:
                        lines.append(self._line(entry))
                    except Exception:  # the writer thread outlives a bad record
                        self._errors += 1
                        log.exception("audit record could not be encoded")
            if lines and self._guard(functools.partial(self._target.append, b"".join(lines))):
                self._written += len(lines)
            for event in waiting:
                event.set()
            if stop:
                return

    def _guard(self, step: Callable[[], None]) -> bool:
        try:
            step()
        except OSError:
            self._errors += 1
            log.exception("audit write to %s failed", self.path)
            return False
        return True


def open_audit_sink(config: AuditConfig | str | None, *,
                    loop: asyncio.AbstractEventLoop | None = None) -> AuditSink:
    """The sink ``config`` (``settings.audit``, or just a path) asks for: a null sink
    when the path is None/empty, else the JSONL sink — in a directory layout with
    compaction and retention when configured (:mod:`gateway.audit.maintain`).
    ``loop``: the JSONL sink writes from it, without a thread (called on it)."""
    if config is None or isinstance(config, str):
        return JsonlAuditSink(config, loop=loop) if config else NullAuditSink()
    if not config.path:
        return NullAuditSink()
    if not config.is_directory():
        return JsonlAuditSink(config.path, loop=loop)
    if config.compact and importlib.util.find_spec("duckdb") is None:
        raise RuntimeError("audit.compact needs DuckDB: pip install 'verity-gateway[audit]' "
                           "(or set audit.compact: false)")
    retention = Retention(config.retention_days,
                          None if config.retention_mb is None
                          else int(config.retention_mb * 1024 * 1024))
    maintainer = (Maintainer(Path(config.path), compact=config.compact, retention=retention,
                             max_age=config.rotate_seconds)
                  if config.compact or retention else None)
    sink = JsonlAuditSink(config.path, rotate_bytes=int(config.rotate_mb * 1024 * 1024),
                          rotate_seconds=config.rotate_seconds,
                          on_close=maintainer.closed if maintainer else None, loop=loop)
    return sink if maintainer is None else _Maintained(sink, maintainer)


class _Maintained:
    """A directory sink and its maintenance thread, closed together."""

    def __init__(self, sink: JsonlAuditSink, maintainer: Maintainer) -> None:
        self.sink = sink
        self.maintainer = maintainer

    def write(self, record: AuditRecord) -> None:
        self.sink.write(record)

    def flush(self, timeout: float = 5.0) -> None:
        self.sink.flush(timeout)

    def close(self) -> None:
        self.sink.close()  # its last file goes to the maintainer first
        self.maintainer.close()
