"""The audit sink made with the gateway's loop: no writer thread, batches appended from
the loop, large batches and a slow disk handed to a thread, nothing lost at close."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.audit import batch as batch_mod
from gateway.audit.batch import LoopBatcher
from gateway.audit.sink import JsonlAuditSink, open_audit_sink
from gateway.settings import AuditConfig


def ids(path: Path) -> list[str]:
    return [orjson.loads(x)["audit_id"] for x in path.read_bytes().splitlines()]


def audit_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("audit")]


def test_a_loop_sink_appends_from_the_loop_without_a_thread(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    seen: dict[str, Any] = {}

    async def main() -> None:
        sink = JsonlAuditSink(path, flush_interval=0.01, loop=asyncio.get_running_loop())
        assert sink._thread is None
        for i in range(50):
            sink.write({"audit_id": str(i), "authorization": "Bearer sk-x"})
        assert not path.read_bytes()  # buffered: one batch, after the interval
        while sink.written < 50:
            await asyncio.sleep(0.005)
        seen["threads"] = audit_threads()
        seen["batches"] = sink._batch.threaded if sink._batch else None
        await asyncio.to_thread(sink.close)  # as the lifespan closes it

    asyncio.run(main())
    assert seen == {"threads": [], "batches": 0}
    assert ids(path) == [str(i) for i in range(50)]
    assert b"sk-x" not in path.read_bytes()


def test_close_after_the_loop_ended_writes_what_was_buffered(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"

    async def main() -> JsonlAuditSink:
        sink = JsonlAuditSink(path, flush_interval=60.0, loop=asyncio.get_running_loop())
        for i in range(3):
            sink.write({"audit_id": str(i)})
        return sink

    sink = asyncio.run(main())
    sink.close()
    assert ids(path) == ["0", "1", "2"]
    sink.write({"audit_id": "late"})  # ignored, not an error
    sink.close()
    assert ids(path) == ["0", "1", "2"]


def test_flush_from_another_thread_while_the_loop_runs(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"

    async def main() -> None:
        sink = JsonlAuditSink(path, flush_interval=60.0, loop=asyncio.get_running_loop())
        sink.write({"audit_id": "a"})
        await asyncio.to_thread(sink.flush)  # a test reading the audit of a live server
        assert ids(path) == ["a"]
        sink.write({"audit_id": "b"})
        await asyncio.to_thread(sink.close)

    asyncio.run(main())
    assert ids(path) == ["a", "b"]


def test_a_bad_record_is_counted_and_the_rest_written(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"

    class Broken:
        def to_dict(self) -> dict[str, Any]:
            raise ValueError("no")

    async def main() -> JsonlAuditSink:
        sink = JsonlAuditSink(path, flush_interval=0.0, loop=asyncio.get_running_loop())
        sink.write({"audit_id": "a"})
        sink.write(Broken())
        sink.write({"audit_id": "b"})
        await asyncio.to_thread(sink.close)
        return sink

    sink = asyncio.run(main())
    assert ids(path) == ["a", "b"]
    assert (sink.written, sink.errors) == (2, 1)


def test_a_large_batch_is_written_by_a_thread_in_order(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_mod, "BATCH_BYTES", 10 ** 9)
    monkeypatch.setattr(batch_mod, "THREAD_BYTES", 2000)
    path = tmp_path / "a.jsonl"

    async def main() -> int:
        sink = JsonlAuditSink(path, flush_interval=0.001, loop=asyncio.get_running_loop())
        for i in range(100):  # one batch of ~2.5 kB: over THREAD_BYTES
            sink.write({"audit_id": str(i), "pad": "x" * 10})
        await asyncio.sleep(0.05)
        for i in range(100, 103):  # small, but queued behind the threaded batch
            sink.write({"audit_id": str(i)})
        await asyncio.to_thread(sink.close)
        return sink._batch.threaded if sink._batch else 0

    assert asyncio.run(main()) >= 1
    assert ids(path) == [str(i) for i in range(103)]


class SlowTarget:
    """A target whose first append 'takes' a second on the scripted clock."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.calls: list[tuple[bytes, str]] = []
        self.closed = False

    def append(self, data: bytes) -> None:
        if not self.calls:
            self.clock[0] += 1.0
        self.calls.append((data, threading.current_thread().name))

    def close(self) -> None:
        self.closed = True


def test_a_slow_disk_moves_the_next_batches_off_the_loop() -> None:
    clock = [100.0]

    async def main() -> SlowTarget:
        loop = asyncio.get_running_loop()
        target = SlowTarget(clock)
        batcher = LoopBatcher(loop, target, flush_interval=60.0, clock=lambda: clock[0])
        loop_thread = threading.current_thread().name
        batcher.add(b"1\n")
        batcher._flush_on_loop()  # on the loop, slow: the disk is now slow
        batcher.add(b"2\n")
        batcher._flush_on_loop()  # handed to the thread
        await asyncio.to_thread(batcher.flush)
        assert [name == loop_thread for _, name in target.calls] == [True, False]
        clock[0] += batch_mod.SLOW_HOLD_S  # the hold is over: back on the loop
        batcher.add(b"3\n")
        batcher._flush_on_loop()
        assert target.calls[-1] == (b"3\n", loop_thread)
        await asyncio.to_thread(batcher.close)
        return target

    target = asyncio.run(main())
    assert [d for d, _ in target.calls] == [b"1\n", b"2\n", b"3\n"]
    assert target.closed


def test_a_full_buffer_is_appended_before_the_interval(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_mod, "BATCH_BYTES", 500)
    path = tmp_path / "a.jsonl"

    async def main() -> None:
        sink = JsonlAuditSink(path, flush_interval=60.0, loop=asyncio.get_running_loop())
        for i in range(40):
            sink.write({"audit_id": str(i)})
        assert path.read_bytes()  # the interval is a minute: the size flushed it
        await asyncio.to_thread(sink.close)

    asyncio.run(main())
    assert ids(path) == [str(i) for i in range(40)]


def test_a_directory_loop_sink_rotates_between_whole_lines(tmp_path: Path) -> None:
    root = tmp_path / "audit"

    async def main() -> list[Path]:
        sink = open_audit_sink(AuditConfig(path=str(root), compact=False, rotate_mb=0.001),
                               loop=asyncio.get_running_loop())
        assert isinstance(sink, JsonlAuditSink)
        for i in range(60):
            sink.write({"audit_id": str(i), "pad": "y" * 40})
            if i % 20 == 19:
                await asyncio.to_thread(sink.flush)
        await asyncio.to_thread(sink.close)
        return sink.files

    files = asyncio.run(main())
    assert len(files) >= 2
    got = [orjson.loads(x)["audit_id"] for f in files for x in f.read_bytes().splitlines()]
    assert got == [str(i) for i in range(60)]


def test_a_torn_last_line_stays_one_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"audit_id": "old"}\n{"audit_id": "to')

    async def main() -> None:
        sink = JsonlAuditSink(path, loop=asyncio.get_running_loop())
        sink.write({"audit_id": "new"})
        await asyncio.to_thread(sink.close)

    asyncio.run(main())
    lines = path.read_bytes().splitlines()
    assert lines[1] == b'{"audit_id": "to'
    assert orjson.loads(lines[2]) == {"audit_id": "new"}
