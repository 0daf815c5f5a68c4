"""A verification job as bytes on the stream, and back: versioned JSON, never pickle.

Whoever can write to the Redis Stream can hand a worker any bytes, so a job travels as
plain data: :func:`encode_job` writes the :class:`~gateway.verify.job.VerificationJob`
fields as one JSON object with a format version (``v``); :func:`decode_job` reads it
back and checks every field's type and bounds, raising :class:`JobFormatError` for
anything else (an unknown version, a missing field, a wrong type). Decoding runs no
code and builds nothing but dicts, lists, strings and numbers.

The request's start (``t0``, a ``perf_counter`` reading, meaningless on another host)
travels as its age when published plus the publishing host's wall clock; the worker
rebuilds a local ``t0`` from them, so the record's ``duration_ms`` still counts from
the request's start (give or take the hosts' clock difference, clamped at zero).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from gateway.telemetry import TraceLink
from gateway.verify.job import PolicyRef, VerificationJob

__all__ = ["FORMAT", "AUDIT_ID", "JobFormatError", "decode_job", "encode_job", "peek_audit_id"]

FORMAT = 1
"""The version of the encoding; a worker refuses any other (a relay and its workers are
upgraded together, or the workers first once a later version reads this one)."""

AUDIT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What an audit id may be (the gateway's are 32 hex digits): safe in a Redis key."""

_MODES = frozenset({"shadow", "inline"})
_KINDS = frozenset({"verify", "candidates"})
_MAX_AGE = 86_400.0


class JobFormatError(ValueError):
    """The bytes are not a job this worker can read (the message says which field)."""


def encode_job(job: VerificationJob, *, wall: Callable[[], float] = time.time,
               perf: Callable[[], float] = time.perf_counter) -> bytes:
    """``job`` as JSON bytes (see the module docstring)."""
    now = perf()
    out: dict[str, Any] = {
        "v": FORMAT, "kind": job.kind, "audit_id": job.audit_id, "mode": job.mode,
        "policy": [job.policy.name, job.policy.version],
        "candidates": [[c.name, c.version] for c in job.candidates],
        "messages": job.messages, "answer": job.answer, "model": job.model,
        "route": job.route, "stream": job.stream, "tenant": job.tenant,
        "key_name": job.key_name, "metadata": job.metadata,
        "upstream_status": job.upstream_status, "streaming": job.streaming,
        "started_at": job.started_at, "sent_at": wall(),
        "age": max(0.0, now - job.t0) if job.t0 else 0.0, "decided": job.decided,
    }
    if job.trace is not None:
        out["trace"] = [job.trace.traceparent, job.trace.tracestate]
    return orjson.dumps(out, default=_plain)


def _plain(value: Any) -> Any:
    """Mappings and sequences that are not dicts and lists (the job's are read-only
    views at times) as plain JSON values; anything else as its ``str``."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    return str(value)


def peek_audit_id(data: bytes) -> str | None:
    """The audit id of an encoded job that does not decode, if it has a readable one
    (its failure can then be recorded under it)."""
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    audit_id = raw.get("audit_id") if isinstance(raw, dict) else None
    return audit_id if isinstance(audit_id, str) and AUDIT_ID.fullmatch(audit_id) else None


def decode_job(data: bytes, *, max_bytes: int,
               wall: Callable[[], float] = time.time,
               perf: Callable[[], float] = time.perf_counter) -> VerificationJob:
    """The job ``data`` encodes; :class:`JobFormatError` for anything else."""
    if len(data) > max_bytes:
        raise JobFormatError(f"job of {len(data)} bytes is over max_job_bytes ({max_bytes})")
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise JobFormatError(f"not JSON: {exc.msg}") from None
    if not isinstance(raw, dict):
        raise JobFormatError("not a JSON object")
    f = _Fields(raw)
    if raw.get("v") != FORMAT:
        raise JobFormatError(f"format version {_short(raw.get('v'))} (this worker reads "
                             f"{FORMAT})")
    audit_id = f.text("audit_id")
    if not AUDIT_ID.fullmatch(audit_id):
        raise JobFormatError("audit_id: not an audit id")
    kind, mode = f.text("kind"), f.text("mode")
    if kind not in _KINDS or mode not in _MODES:
        raise JobFormatError(f"kind/mode: unknown ({_short(kind)}, {_short(mode)})")
    messages = f.items("messages")
    if not all(isinstance(m, dict) for m in messages):
        raise JobFormatError("messages: not a list of objects")
    sent_at, age = f.number("sent_at"), f.number("age")
    delay = min(max(wall() - sent_at, 0.0), _MAX_AGE)
    trace = raw.get("trace")
    link = None
    if trace is not None:
        if not (isinstance(trace, list) and len(trace) == 2
                and all(isinstance(t, str) and len(t) <= 512 for t in trace)):
            raise JobFormatError("trace: not [traceparent, tracestate]")
        link = TraceLink(trace[0], trace[1])
    decided = raw.get("decided")
    if decided is not None and not isinstance(decided, dict):
        raise JobFormatError("decided: not an object")
    if kind == "candidates" and decided is None:
        raise JobFormatError("decided: missing for a candidates job")
    return VerificationJob(
        messages=messages, answer=f.obj("answer"), policy=f.ref(raw.get("policy"), "policy"),
        audit_id=audit_id, mode=mode, model=f.text("model"), route=f.text("route"),
        stream=f.flag("stream"), tenant=f.opt_text("tenant"), key_name=f.opt_text("key_name"),
        metadata=f.obj("metadata"), upstream_status=f.opt_int("upstream_status"),
        streaming=f.opt_text("streaming"), started_at=f.text("started_at"),
        t0=perf() - min(max(age, 0.0), _MAX_AGE) - delay,
        candidates=tuple(f.ref(c, "candidates") for c in f.items("candidates")),
        kind=kind, decided=decided, trace=link)  # type: ignore[arg-type]  # kind checked


def _short(value: Any) -> str:
    """A value read from the stream, for a message: its ``repr``, at most 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Fields:
    """Typed reads of the decoded object; a wrong or missing field is a JobFormatError."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    def _get(self, key: str, types: tuple[type, ...], what: str) -> Any:
        value = self.raw.get(key)
        # bool is an int to isinstance: a number field must not take true/false.
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise JobFormatError(f"{key}: not {what}")
        return value

    def text(self, key: str) -> str:
        value: str = self._get(key, (str,), "a string")
        return value

    def opt_text(self, key: str) -> str | None:
        return None if self.raw.get(key) is None else self.text(key)

    def flag(self, key: str) -> bool:
        value: bool = self._get(key, (bool,), "a boolean")
        return value

    def number(self, key: str) -> float:
        return float(self._get(key, (int, float), "a number"))

    def opt_int(self, key: str) -> int | None:
        if self.raw.get(key) is None:
            return None
        value: int = self._get(key, (int,), "an integer")
        return value

    def items(self, key: str) -> list[Any]:
        value: list[Any] = self._get(key, (list,), "a list")
        return value

    def obj(self, key: str) -> dict[str, Any]:
        value: dict[str, Any] = self._get(key, (dict,), "an object")
        return value

    @staticmethod
    def ref(value: Any, key: str) -> PolicyRef:
        if not (isinstance(value, list) and len(value) == 2
                and all(isinstance(v, str) for v in value)):
            raise JobFormatError(f"{key}: not [name, version]")
        return PolicyRef(value[0], value[1])
