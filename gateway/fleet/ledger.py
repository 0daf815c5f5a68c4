"""Exactly one audit record per job, however often the stream delivers it.

A stream delivers a job at least once: a worker that dies before it acknowledges
leaves the job pending, and another worker claims it; a worker too slow for
``claim_idle_seconds`` can be overtaken. So a worker that has verified a job first
*claims the right to record it* (:meth:`Ledger.claim`, one Lua script, atomic in
Redis): the job must still be pending (not acknowledged by anyone) and its claim key
(``{stream}:claim:<audit id>``) free — then it is this delivery's. The worker writes
the record, makes sure it reached the audit file (the sink's flush), and then
acknowledges the entry and deletes the claim in one transaction (:meth:`Ledger.ack`).

What a crash leaves behind is always resolvable:

- dead before the claim: the job is pending, nobody claimed it — the next delivery
  verifies and records it;
- dead after the ack: done, and the entry is no longer delivered;
- dead between the claim and the ack: the next delivery finds the claim held by a
  token that is not its own (:class:`Held`). Whether the record reached the audit
  file is then read from the file itself (:func:`recorded`, the tail of the file
  this worker writes): present, the job is acknowledged without a second record;
  absent, the claim is taken over (``force``) and the record written. Workers on one
  host share the file — or, with a directory ``audit.path``, write files named by
  their host (``gateway.audit.layout``), which :func:`recorded` reads — so this is
  exact there for a recent record; a worker on another host cannot read the dead
  worker's files and writes the record — the one case where the same audit id may
  appear twice (the same verdict, once per file), documented in docs/deploy.md.

A job acknowledged by another delivery meanwhile (:data:`DONE`) is dropped without a
record. In Redis Cluster the claim key shares the stream's hash slot (the stream's
name in braces, unless it has a hash tag already), as a script's keys must.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from gateway.audit.layout import DATE_DIR, host_name

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["DONE", "MINE", "Held", "Ledger", "recorded"]

_CLAIM = """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 then return 0 end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[3] and ARGV[5] ~= '1' then return holder end
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
return 1
"""
"""KEYS: stream, claim key. ARGV: group, entry id, token, ttl ms, force ('1')."""

DONE: Final = "done"
"""The entry was acknowledged already: someone recorded the job."""
MINE: Final = "mine"
"""This delivery holds the claim: record the job, then :meth:`Ledger.ack`."""

CLAIM_TTL_MS = 7 * 24 * 3600 * 1000
"""A claim outlives any redelivery of its entry (it is deleted with the ack)."""


@dataclass(frozen=True, slots=True)
class Held:
    """Another delivery claimed the job and did not acknowledge it (it died, or is
    stuck past ``claim_idle_seconds``): its token."""

    token: str


class Ledger:
    """The claim and acknowledgement of jobs on one stream and group."""

    def __init__(self, client: Redis, stream: str, group: str) -> None:
        self.client = client
        self.stream = stream
        self.group = group
        self._claim = client.register_script(_CLAIM)
        self._prefix = (f"{stream}:claim:" if "{" in stream and "}" in stream
                        else f"{{{stream}}}:claim:")

    def key(self, audit_id: str) -> str:
        return self._prefix + audit_id

    async def claim(self, entry: str, audit_id: str, token: str, *,
                    force: bool = False) -> str | Held:
        """:data:`MINE`, :data:`DONE` or :class:`Held` (see the module docstring)."""
        got: Any = await self._claim(keys=[self.stream, self.key(audit_id)],
                                     args=[self.group, entry, token, CLAIM_TTL_MS,
                                           "1" if force else "0"])
        if got == 1:
            return MINE
        if got == 0:
            return DONE
        return Held(got.decode() if isinstance(got, bytes) else str(got))

    async def ack(self, done: list[tuple[str, str]]) -> None:
        """Acknowledge ``(entry id, audit id)`` pairs and drop their claims, atomically."""
        if not done:
            return
        pipe = self.client.pipeline(transaction=True)
        pipe.xack(self.stream, self.group, *[entry for entry, _ in done])
        pipe.delete(*[self.key(audit_id) for _, audit_id in done if audit_id])
        await pipe.execute()


TAIL_BYTES = 64 * 1024 * 1024
"""How far back from its end :func:`recorded` reads an audit file (in a directory
layout: the newest files, that much in all)."""
DAY_FOLDERS = 3
"""The ``date=`` folders (newest first) :func:`recorded` looks in, in a directory layout."""


def recorded(path: str | os.PathLike[str] | None, audit_id: str, *,
             tail: int = TAIL_BYTES) -> bool:
    """Whether the audit at ``path`` holds a record of ``audit_id`` (blocking: call it
    in a thread): it looks for ``"audit_id":"<id>"`` as the sink writes it (compact
    JSON) in the last ``tail`` bytes of a JSONL file or, when ``path`` is a directory
    (``gateway.audit.layout``), in the newest JSONL files this host's processes wrote
    (the last :data:`DAY_FOLDERS` days), newest first, ``tail`` bytes in all. A record
    already compacted to Parquet, or written on another host, is not found: the job
    is then recorded again (a duplicate, never a loss)."""
    if not path:
        return False
    needle = b'"audit_id":"' + audit_id.encode() + b'"'
    root = Path(path)
    files = _host_files(root) if root.is_dir() else [root]
    left = tail
    for file in files:
        found, read = _tail_holds(file, needle, left)
        if found:
            return True
        left -= read
        if left <= 0:
            break
    return False


def _host_files(root: Path) -> list[Path]:
    """This host's JSONL files in the newest ``date=`` folders under ``root``, the most
    recently written first."""
    days = sorted((d for d in root.iterdir() if d.is_dir() and DATE_DIR.match(d.name)),
                  key=lambda d: d.name, reverse=True)[:DAY_FOLDERS]
    prefix = f"verity-{host_name()}-"
    found: list[tuple[float, Path]] = []
    for folder in days:
        for file in folder.glob(f"{glob.escape(prefix)}*.jsonl"):
            try:
                found.append((file.stat().st_mtime, file))
            except OSError:  # compacted or deleted meanwhile
                continue
    return [f for _, f in sorted(found, key=lambda t: t[0], reverse=True)]


def _tail_holds(path: Path, needle: bytes, tail: int) -> tuple[bool, int]:
    """Whether the last ``tail`` bytes of ``path`` hold ``needle``; and the bytes read."""
    read = 0
    try:
        with path.open("rb") as f:
            end = f.seek(0, os.SEEK_END)
            chunk = 1 << 20
            pos, carry = end, b""
            while pos > 0 and end - pos < tail:
                step = min(chunk, pos)
                pos -= step
                f.seek(pos)
                block = f.read(step) + carry
                read += step
                if needle in block:
                    return True, read
                carry = block[:len(needle)]
    except (FileNotFoundError, IsADirectoryError):
        return False, read
    return False, read
