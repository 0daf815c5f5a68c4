"""The record of a shadow request whose job was shed as it arrived (a saturated relay:
``relay_busy``), without an :class:`~gateway.verify.outcome.Outcome`.

A saturated relay sheds almost every shadow request, and each one's record is the same
bare record but for the request's own fields (audit id, model, tenant, times, upstream,
trace id). So its fixed part — policy, version, mode, each candidate ``dropped``, the
note, ``shadow: {"result": "dropped", …}`` — is built once per policy version and
reason (:class:`ShedPlan`, kept by the caller per selection), and per request a
:class:`ShedRecord` holds only the request's own fields: no ``Outcome`` with its
thirty fields, no candidate outcomes, no shape key per record. The line is byte for
byte the one :func:`~gateway.verify.runner.record_shed` writes from an ``Outcome``
(``tests/verify/test_shed_record.py``), and :meth:`ShedRecord.to_dict` is that
record's mapping (sinks that keep mappings, ``trace.decision``).

Until it is written the request may still end early (its client leaves while the
answer is relayed): :meth:`ShedRecord.outcome` is then the full ``Outcome`` the
disconnect path writes, as before.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.audit.sink import AuditSink
from gateway.telemetry import RequestTrace, Telemetry, TraceLink
from gateway.verify.audit_line import BareTemplate, render_bare
from gateway.verify.job import PolicyRef
from gateway.verify.outcome import CandidateOutcome, Outcome, utc_now
from gateway.verify.runner import NOT_VERIFIED, SHED_NOTES, shadow_info

__all__ = ["ShedPlan", "ShedRecord"]

_WHY = "dropped"
"""What a job shed before it was built is, in its record (``shadow.result``)."""


class ShedPlan:
    """The fixed part of one policy version's shed record (for ``reason``)."""

    __slots__ = ("candidates", "mode", "note", "policy", "policy_version", "template")

    def __init__(self, policy: str, policy_version: str, candidates: Sequence[PolicyRef],
                 reason: str, mode: str = "shadow") -> None:
        self.policy, self.policy_version, self.mode = policy, policy_version, mode
        self.candidates = tuple(candidates)
        self.note = SHED_NOTES.get(reason) or NOT_VERIFIED[_WHY]
        self.template = BareTemplate(self._complete(Outcome(policy, policy_version, mode)))

    def _complete(self, o: Outcome) -> Outcome:
        """``o`` as :func:`~gateway.verify.runner.record_shed` completes it."""
        o.note = self.note
        o.candidates = [CandidateOutcome(c.name, c.version, error=_WHY)
                        for c in self.candidates]
        o.shadow = shadow_info(_WHY)
        return o


class ShedRecord:
    """One shed request's record (see the module docstring); the attributes are
    :class:`~gateway.verify.audit_line.BareFields`."""

    __slots__ = ("_t0", "audit_id", "duration_ms", "finished_at", "model", "note", "plan",
                 "response_id", "started_at", "stream", "streaming", "tenant", "trace_id",
                 "upstream", "upstream_status")

    def __init__(self, plan: ShedPlan, audit_id: str, model: str, tenant: str | None,
                 stream: bool, streaming: str | None,
                 upstream: Mapping[str, Any] | None) -> None:
        self.plan = plan
        self.audit_id = audit_id
        self.model, self.tenant, self.stream, self.streaming = model, tenant, stream, streaming
        self.upstream = upstream
        self.started_at = utc_now()
        self._t0 = time.perf_counter()
        self.finished_at: str | None = None
        self.duration_ms = 0.0
        self.response_id: str | None = None
        self.upstream_status: int | None = None
        self.note: str | None = None
        self.trace_id: str | None = None

    @property
    def policy(self) -> str:
        return self.plan.policy

    @property
    def mode(self) -> str:
        return self.plan.mode

    def outcome(self) -> Outcome:
        """This request's record as an ``Outcome`` (what it is so far: no note,
        candidates or ``shadow`` until :meth:`write`)."""
        plan = self.plan
        o = Outcome(plan.policy, plan.policy_version, plan.mode, model=self.model,
                    tenant=self.tenant, stream=self.stream, streaming=self.streaming,
                    audit_id=self.audit_id, started_at=self.started_at,
                    finished_at=self.finished_at, duration_ms=self.duration_ms,
                    response_id=self.response_id, upstream_status=self.upstream_status,
                    upstream=self.upstream, note=self.note, trace_id=self.trace_id,
                    _t0=self._t0)
        return plan._complete(o) if self.finished_at is not None else o

    def write(self, sink: AuditSink, telemetry: Telemetry,
              parent: RequestTrace | TraceLink | None) -> None:
        """Close and write the record, as :func:`~gateway.verify.runner.record_shed`
        does with an ``Outcome`` (its ``shadow audit`` trace linked to ``parent``, the
        decision when that trace records, the ``verifications`` counter)."""
        trace = telemetry.start_shadow(parent)
        self.note = self.plan.note
        self.finished_at = utc_now()
        self.duration_ms = (time.perf_counter() - self._t0) * 1000
        self.trace_id = trace.trace_id
        if trace.recording:
            trace.decision(self.to_dict())
        if telemetry.enabled:
            telemetry.count("verifications", 1, {"policy": self.plan.policy,
                                                 "mode": self.plan.mode,
                                                 "verdict": "none", "action": "none"})
        sink.write(self)
        trace.end(0, f"shadow_{_WHY}")

    def to_dict(self) -> dict[str, Any]:
        return self.outcome().to_dict()

    def audit_line(self) -> bytes:
        """The record as one JSON line (no newline), from the plan's fixed part."""
        return render_bare(self.plan.template, self)
