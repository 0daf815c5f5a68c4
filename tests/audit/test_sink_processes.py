"""Several processes appending to one audit file (``gateway serve --workers``, ``gateway
worker`` s on one host): every line is one whole record, none torn or lost."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

WRITER = """
import sys
from gateway.audit.sink import JsonlAuditSink
path, who, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sink = JsonlAuditSink(path, flush_interval=0)
for i in range(n):
    sink.write({"audit_id": f"{who}-{i}", "pad": who[0] * (size + i % 3000)})
sink.close()
"""


def test_processes_appending_to_one_file_never_tear_a_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    writers, n = 4, 400
    # Records of 5-8 KB: over PIPE_BUF and around the size of the file's write buffer,
    # where a writer that split a line across two write(2) calls would tear it.
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"{chr(97 + w)}w",
                               str(n), "5000"]) for w in range(writers)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    ids = []
    for line in path.read_bytes().splitlines():
        if not line:
            # The writer begins its first batch with a newline when the file it opened
            # did not end with one (gateway.audit.writer: a crash's torn line stays one
            # bad line). Opened while another process was mid-write, it can see such an
            # end: an empty line, which readers skip — never a torn or lost record.
            continue
        record = orjson.loads(line)  # a torn line would not parse
        assert set(record["pad"]) == {record["audit_id"][0]}
        ids.append(record["audit_id"])
    assert sorted(ids) == sorted(f"{chr(97 + w)}w-{i}" for w in range(writers) for i in range(n))
