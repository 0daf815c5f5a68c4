"""What one verification produced: per-layer outcomes and the outcome record.

- :class:`LayerOutcome` — one layer's run: calibrated and raw score, its own
  verdict, latency, error (timeout / unavailable / exception), judge cost.
- :class:`Verification` — the pipeline's result for one answer: risk level, the
  layer outcomes, the verdict band and the overall (weighted mean) score.
- :class:`Outcome` — the record of one request's verification as written to the
  audit sink and handed to ``trace.decision``: policy, mode, verdict, action,
  attempts, candidate policies' outcomes, timestamps. ``to_dict()`` is the wire
  form (plain JSON types). It never holds credentials; message content only when
  the policy sets ``telemetry.record_content`` (see ``gateway.verify.content``).

Content rule for the wire form (audit record, ``trace.decision``, the
``x-verity-detail`` body): **failed claims are content** — sentences of the
answer — so ``failed_claims`` (per layer, overall and per regenerate attempt)
hold them only when :attr:`Outcome.redact` is set (the engine sets it when the
policy records content), each passed through it (the default hook and the
policy's ``redact`` patterns); otherwise they are ``[]`` and
``failed_claim_count`` still says how many there were. Layer explanations,
reasons and errors describe *what* failed (counts, rules, scores) and never
quote the answer — that is every layer's contract (the ``keyword`` layer names
its rule, not the match); they are recorded always, through the same redaction
(the default hook when content is not recorded), as defence in depth.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from gateway.redact import Redactor, redact_secrets
from gateway.verify.audit_line import audit_line, full_line
from gateway.verify.audit_line import round6 as _round
from gateway.verify.audit_line import upstream_copy as _upstream

if TYPE_CHECKING:
    from gateway.verify.job import VerificationJob

__all__ = ["AuditIds", "Band", "CandidateOutcome", "LayerOutcome", "Outcome", "Redactor", "Verification",
           "claims_entry", "new_audit_id", "utc_now"]

Band = Literal["pass", "marginal", "fail"]
MAX_SOURCES = 20
"""Source ids a :class:`Verification` keeps for ``request-sources``."""
BAND_ORDER: dict[str, int] = {"pass": 0, "marginal": 1, "fail": 2}


_ID_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_ID_SET = (0x4000 << 64) | (0x8000 << 48)  # version 4, RFC 4122 variant


def new_audit_id() -> str:
    """A random (version 4) UUID as 32 hex digits, like ``uuid.uuid4().hex``.

    Sixteen fresh bytes from ``os.urandom`` per id: nothing is kept between calls, so
    a forked worker never repeats its parent's ids.
    """
    n = int.from_bytes(os.urandom(16), "big")
    return f"{(n & _ID_CLEAR) | _ID_SET:032x}"


_IDS_PER_DRAW = 256
"""Audit ids an :class:`AuditIds` takes from one ``os.urandom`` call."""

_VERSION_4 = bytes((b & 0x0F) | 0x40 for b in range(256))
_VARIANT = bytes((b & 0x3F) | 0x80 for b in range(256))


class AuditIds:
    """Audit ids as :func:`new_audit_id` makes them (random version 4 UUIDs as 32 hex
    digits), 256 from one ``os.urandom`` call: one system call — which releases the
    GIL, so a busy relay's loop waits to get it back from another thread — per 256
    requests instead of one per request, and the hex formatted once per draw. Owned
    by whoever serves requests (the engine). The random bytes are never shared with a
    forked child: after a fork (``os.register_at_fork``; no ``getpid`` system call
    per id) the child draws fresh ones first."""

    __slots__ = ("_fork", "_hex", "_pos")

    def __init__(self) -> None:
        self._hex = ""
        self._pos = 0
        self._fork = -1

    def __call__(self) -> str:
        pos = self._pos
        if pos >= len(self._hex) or self._fork != _forks:
            self._draw()
            pos = 0
        self._pos = pos + 32
        return self._hex[pos:pos + 32]

    def _draw(self) -> None:
        raw = bytearray(os.urandom(16 * _IDS_PER_DRAW))
        raw[6::16] = raw[6::16].translate(_VERSION_4)  # version 4
        raw[8::16] = raw[8::16].translate(_VARIANT)  # the RFC 4122 variant
        self._hex, self._fork = raw.hex(), _forks


_forks = 0
"""Forks this process is into (0 in the process that started): :class:`AuditIds`
draws afresh in a child."""


def _forked() -> None:
    global _forks
    _forks += 1


if hasattr(os, "register_at_fork"):  # not on Windows (no fork there)
    os.register_at_fork(after_in_child=_forked)


_second: tuple[int, str] = (-1, "")
"""The last whole second :func:`utc_now` formatted, and its text up to the seconds."""
_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))
"""``.000Z`` … ``.999Z``: a stamp's end, formatted once."""


def utc_now() -> str:
    """Now as ISO 8601 UTC to the millisecond (``2026-11-25T10:00:00.123Z``), as
    ``datetime.isoformat(timespec="milliseconds")`` writes it; the date and time up to
    the second are formatted once per second, the milliseconds taken from a table
    (every record takes two stamps)."""
    global _second
    now = time.time()
    whole = int(now)
    micro = round((now - whole) * 1_000_000)  # as datetime rounds a timestamp
    if micro >= 1_000_000:
        whole, micro = whole + 1, micro - 1_000_000
    second = _second
    if second[0] != whole:
        second = _second = (whole, datetime.fromtimestamp(whole, UTC).strftime(
            "%Y-%m-%dT%H:%M:%S"))
    return second[1] + _MILLIS[micro // 1000]


@dataclass(slots=True)
class LayerOutcome:
    """One layer's run as the pipeline saw it."""

    key: str
    name: str
    score: float | None = None
    """Calibrated score in [0, 1]; ``None`` when the layer errored."""
    raw_score: float | None = None
    passed: bool | None = None
    latency_ms: float = 0.0
    label: str | None = None
    explanation: str = ""
    error: str | None = None
    """``timeout after … ms``, ``unavailable: …``, ``JudgeError: <what failed>`` or
    ``<ExceptionType> raised at <file>:<line>``; None when it ran. Never model text
    (``gateway.redact``)."""
    error_type: str | None = None
    cache_hit: bool = False
    judge_calls: int = 0
    """Judge calls the layer made (cache hits included), also when it then failed."""
    cost: float = 0.0
    """Judge USD of those calls (cache hits cost 0), also when the layer failed."""
    judge_input_tokens: int = 0
    judge_output_tokens: int = 0
    """Tokens the judge reported for those calls (cache hits: 0)."""
    failed_claims: list[str] = field(default_factory=list)
    skipped: bool = False
    credit_score: int | None = None
    weight: float = 1.0

    @property
    def counted(self) -> bool:
        """Whether this outcome takes part in the decision: it ran, was not skipped,
        and has a weight (``weight: 0`` makes a layer report-only)."""
        return self.error is None and not self.skipped and self.weight > 0

    def header_value(self) -> str:
        """``key=0.9120:pass`` for the ``x-verity-layers`` header, four decimals like
        ``x-verity-score`` (``:report`` for a weight-0, report-only layer: its score never
        takes part in the verdict)."""
        if self.error is not None:
            return f"{self.key}=error"
        if self.skipped:
            return f"{self.key}=skipped"
        status = "report" if self.weight <= 0 else "pass" if self.passed else "fail"
        return f"{self.key}={(self.score or 0.0):.4f}:{status}"

    def to_dict(self, content: Redactor | None = None) -> dict[str, Any]:
        """The wire form. ``content``: the policy's redaction when it records content
        (failed claims are kept, through it); None withholds them (count only)."""
        text = content or redact_secrets
        score, raw, claims = self.score, self.raw_score, self.failed_claims
        # Written out (no ``**`` merge): several per record.
        return {
            "key": self.key, "name": self.name,
            "score": _round(score), "raw_score": _round(raw), "passed": self.passed,
            "latency_ms": round(self.latency_ms, 3), "label": self.label,
            "explanation": text(self.explanation) if self.explanation else self.explanation,
            "error": text(self.error) if self.error else self.error,
            "error_type": self.error_type,
            "cache_hit": self.cache_hit, "judge_calls": self.judge_calls, "cost": self.cost,
            "judge_input_tokens": self.judge_input_tokens,
            "judge_output_tokens": self.judge_output_tokens,
            "failed_claims": [content(c) for c in claims] if content is not None else [],
            "failed_claim_count": len(claims), "skipped": self.skipped,
            "credit_score": self.credit_score, "weight": self.weight,
        }


@dataclass(slots=True)
class Verification:
    """The pipeline's verdict on one answer."""

    risk_level: str
    layers: list[LayerOutcome]
    verdict: Band
    score: float | None
    """Weighted mean of the counted layers' calibrated scores (None: nothing counted)."""
    min_confidence: float
    reasons: list[str] = field(default_factory=list)
    failed_claims: list[str] = field(default_factory=list)
    errors: int = 0
    fail_closed: bool = False
    """True when a layer error forced the verdict to ``fail`` (``on_error: fail_closed``)."""
    note: str | None = None
    """Why nothing was verified (e.g. an answer made only of tool calls), else None."""
    sources: list[str] = field(default_factory=list)
    """Ids of the sources the request offers to cite (its documents, and a small
    corpus's entries; at most :data:`MAX_SOURCES`): what ``request-sources`` lists.
    Not in the wire form."""

    @property
    def cost(self) -> float:
        return sum(o.cost for o in self.layers)

    def judge_usage(self) -> dict[str, Any]:
        """The judge calls, USD and tokens of every layer (failed ones included)."""
        return {"judge_calls": sum(o.judge_calls for o in self.layers), "cost": self.cost,
                "judge_input_tokens": sum(o.judge_input_tokens for o in self.layers),
                "judge_output_tokens": sum(o.judge_output_tokens for o in self.layers)}

    def layers_header(self) -> str:
        return ",".join(o.header_value() for o in self.layers)

    def to_dict(self, content: Redactor | None = None) -> dict[str, Any]:
        """The wire form; ``content`` as for :meth:`LayerOutcome.to_dict`."""
        text = content or redact_secrets
        return {
            "risk_level": self.risk_level, "verdict": self.verdict, "score": _round(self.score),
            "min_confidence": self.min_confidence, "reasons": [text(r) for r in self.reasons],
            **_claims(self.failed_claims, content), "errors": self.errors,
            "fail_closed": self.fail_closed,
            "layers": [o.to_dict(content) for o in self.layers],
        }


@dataclass(slots=True)
class CandidateOutcome:
    """A candidate policy evaluated in shadow on the live response."""

    name: str
    version: str = ""
    verdict: str | None = None
    score: float | None = None
    action: str | None = None
    """The action the candidate *would* have taken (never applied)."""
    layers: list[LayerOutcome] = field(default_factory=list)
    error: str | None = None
    """``dropped`` (shadow queue full), ``cancelled`` (shutdown) or an exception."""

    def to_dict(self, content: Redactor | None = None) -> dict[str, Any]:
        """The wire form; ``content`` as for :meth:`LayerOutcome.to_dict`."""
        error = (content or redact_secrets)(self.error) if self.error else self.error
        return {"name": self.name, "version": self.version, "verdict": self.verdict,
                "score": _round(self.score), "action": self.action, "error": error,
                "layers": [o.to_dict(content) for o in self.layers]}


@dataclass(slots=True)
class Outcome:
    """The record of one request's verification (audit line, ``trace.decision``)."""

    policy: str
    policy_version: str
    mode: str
    model: str = ""
    tenant: str | None = None
    stream: bool = False
    streaming: str | None = None
    """The policy's ``streaming`` setting when the request streamed."""
    audit_id: str = field(default_factory=new_audit_id)
    started_at: str = field(default_factory=utc_now)
    finished_at: str | None = None
    duration_ms: float = 0.0
    risk_level: str | None = None
    verdict: str | None = None
    score: float | None = None
    min_confidence: float | None = None
    action: str | None = None
    applied: bool = False
    """False in shadow mode: ``action`` is what *would* have happened."""
    attempts: int = 0
    """Regenerate attempts made (0 when the action was not ``regenerate``)."""
    reasons: list[str] = field(default_factory=list)
    failed_claims: list[str] = field(default_factory=list)
    layers: list[LayerOutcome] = field(default_factory=list)
    attempt_history: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[CandidateOutcome] = field(default_factory=list)
    response_id: str | None = None
    upstream_status: int | None = None
    upstream: Mapping[str, Any] | None = None
    """The upstream that answered and the calls it took: ``{"name", "attempts"[,
    "tried", "reasons", "fallback", "model"]}`` (retries and fallbacks; None: no
    upstream answered). Filled by the front door once the answer's call is made."""
    note: str | None = None
    trace_id: str | None = None
    """The trace its verification ran in (a shadow audit's own trace): the record's link
    to it in a trace viewer; None with telemetry off."""
    content: dict[str, Any] | None = None
    """Request messages and answer text (redacted); only when the policy opts in."""
    redact: Redactor | None = field(default=None, repr=False)
    """The policy's content redaction, set (with :attr:`content`) only when the policy
    records content: failed claims are then recorded through it; None withholds them."""
    shadow: dict[str, Any] | None = None
    """For a background job (shadow, candidates): how it ran — ``result``
    (``verified``, ``abandoned``, ``failed``, ``dropped``, ``cancelled``), ``queue_ms``
    (its wait in the queue) and ``worker`` (the pid that verified it). See
    ``gateway.verify.queue``."""
    _t0: float = field(default_factory=time.perf_counter, repr=False)

    @property
    def t0(self) -> float:
        """``time.perf_counter()`` when the record started (its ``duration_ms`` counts
        from it)."""
        return self._t0

    @classmethod
    def for_job(cls, job: VerificationJob) -> Outcome:
        """The record of ``job`` (its audit id, and its request's start and clock)."""
        return cls(policy=job.policy.name, policy_version=job.policy.version, mode=job.mode,
                   model=job.model, tenant=job.tenant, stream=job.stream,
                   streaming=job.streaming, audit_id=job.audit_id,
                   started_at=job.started_at or utc_now(), upstream_status=job.upstream_status,
                   response_id=job.answer.get("id"),
                   upstream=dict(job.upstream) if job.upstream else None,
                   _t0=job.t0 or time.perf_counter())

    def record(self, v: Verification) -> None:
        """Take the verdict, score and layers of ``v`` (the final answer's verification)."""
        self.risk_level = v.risk_level
        self.verdict = v.verdict
        self.score = v.score
        self.min_confidence = v.min_confidence
        self.reasons = list(v.reasons)
        self.failed_claims = list(v.failed_claims)
        self.layers = list(v.layers)
        if v.note is not None:
            self.note = v.note

    def finish(self) -> None:
        self.finished_at = utc_now()
        self.duration_ms = (time.perf_counter() - self._t0) * 1000

    def _head(self) -> dict[str, Any]:
        """The record's own fields, ``audit_id`` to ``attempts`` (no outside data):
        the start of :meth:`to_dict`."""
        return {
            "audit_id": self.audit_id, "policy": self.policy,
            "policy_version": self.policy_version, "mode": self.mode, "model": self.model,
            "tenant": self.tenant, "stream": self.stream, "streaming": self.streaming,
            "started_at": self.started_at, "finished_at": self.finished_at,
            "duration_ms": round(self.duration_ms, 3), "risk_level": self.risk_level,
            "verdict": self.verdict, "score": _round(self.score),
            "min_confidence": self.min_confidence, "action": self.action,
            "applied": self.applied, "attempts": self.attempts,
        }

    def to_dict(self) -> dict[str, Any]:
        """The wire form (see the module docstring for what holds content)."""
        content = self.redact
        text = content or redact_secrets
        out = self._head()
        out.update({
            "reasons": [text(r) for r in self.reasons],
            **_claims(self.failed_claims, content),
            "layers": [o.to_dict(content) for o in self.layers],
            "attempt_history": [claims_entry(a, content) for a in self.attempt_history],
            "candidates": [c.to_dict(content) for c in self.candidates],
            "response_id": self.response_id, "upstream_status": self.upstream_status,
            "upstream": _upstream(self.upstream), "note": self.note,
        })
        if self.trace_id is not None:
            out["trace_id"] = self.trace_id
        if self.content is not None:
            out["content"] = self.content
        if self.shadow is not None:
            out["shadow"] = self.shadow
        return out

    def audit_line(self) -> bytes:
        """The audit record as one JSON line, without the newline (what the JSONL sink
        writes): :mod:`gateway.verify.audit_line` (credential-named keys removed from
        the mappings that come from elsewhere; a record nothing was verified for — a
        shed shadow job's — from its shape's precomputed fixed part)."""
        return audit_line(self)

    def _full_line(self) -> bytes:
        """:meth:`audit_line` through the general form (tests compare the two)."""
        return full_line(self)


def _claims(claims: list[str], content: Redactor | None) -> dict[str, Any]:
    """``failed_claims`` (through ``content``, or withheld: ``[]``) and their count."""
    return {"failed_claims": [content(c) for c in claims] if content is not None else [],
            "failed_claim_count": len(claims)}


def claims_entry(entry: Mapping[str, Any], content: Redactor | None) -> dict[str, Any]:
    """A regenerate ``attempt_history`` entry with its ``failed_claims`` (when it has
    them) kept through ``content`` or withheld, like :func:`_claims`."""
    out = dict(entry)
    claims = out.get("failed_claims")
    if isinstance(claims, list):
        out.update(_claims([str(c) for c in claims], content))
    error = out.get("error")
    if isinstance(error, str):
        out["error"] = (content or redact_secrets)(error)
    return out
