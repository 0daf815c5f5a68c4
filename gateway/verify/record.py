"""Closing a record: the trace's decision, the verifications metric, the audit sink."""

from __future__ import annotations

from typing import Any

from gateway.audit.sink import AuditRecord, AuditSink
from gateway.telemetry import RequestTrace, Telemetry
from gateway.verify.outcome import Outcome

__all__ = ["Recorder"]


class Recorder:
    """Where every record of one gateway ends: ``trace.decision``, the
    ``verifications`` counter and the :class:`~gateway.audit.sink.AuditSink`."""

    def __init__(self, telemetry: Telemetry, sink: AuditSink) -> None:
        self.telemetry = telemetry
        self.sink = sink

    def finish(self, outcome: Outcome, trace: RequestTrace, *, write: bool = True) -> None:
        """Close ``outcome``: its decision on ``trace``, the metric, and the audit
        (unless deferred: a job writes it later).

        The sink gets the outcome itself and builds the record off the event loop (or
        never: the null sink); nothing may change ``outcome`` after it is written. The
        decision record is built only when the trace records.
        """
        outcome.finish()
        if outcome.trace_id is None:
            outcome.trace_id = trace.trace_id
        if trace.recording:
            trace.decision(outcome.to_dict())
        if self.telemetry.enabled:
            self.telemetry.count("verifications", 1, {
                "policy": outcome.policy, "mode": outcome.mode,
                "verdict": outcome.verdict or "none", "action": outcome.action or "none"})
        if write:
            self.sink.write(outcome)

    def write(self, record: AuditRecord | dict[str, Any]) -> None:
        """A record that is already closed (its decision recorded)."""
        self.sink.write(record)
