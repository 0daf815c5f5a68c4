"""A shed request's record without an ``Outcome`` (gateway.verify.shed): the same line,
mapping, trace decision and counter as ``record_shed`` writes from an ``Outcome``."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from gateway.audit.sink import scrub
from gateway.telemetry import RequestTrace, Telemetry, TraceLink
from gateway.verify.job import PolicyRef
from gateway.verify.outcome import Outcome
from gateway.verify.record import Recorder
from gateway.verify.runner import record_shed
from gateway.verify.shed import ShedPlan, ShedRecord

HOSTILE = ['"', "\\", '","policy":"evil', "\u2028\u2029", "\x00\x1f\x7f", "é😀\ud7ff",
           "Bearer sk-abcdefghijklmnop12", "}" * 3, "a" * 300, ""]
UPSTREAMS: list[Mapping[str, Any] | None] = [
    None, {}, {"name": "default", "attempts": 1},
    {"name": "b", "attempts": 2, "tried": ["a", "b"], "reasons": ["timeout"], "fallback": True},
    {"name": "x", "api_key": "sk-live-abcdefghijklmnop", "nested": {"token": "t"}},
]


class _Sink:
    def __init__(self) -> None:
        self.records: list[Any] = []

    def write(self, record: Any) -> None:
        self.records.append(record)

    def close(self) -> None:
        pass


class _Trace(RequestTrace):
    recording = True

    def __init__(self, trace_id: str | None) -> None:
        self._id = trace_id
        self.decisions: list[dict[str, Any]] = []
        self.ended: list[tuple[int, str | None]] = []

    @property
    def trace_id(self) -> str | None:
        return self._id

    def decision(self, record: Mapping[str, Any]) -> None:
        self.decisions.append(dict(record))

    def end(self, status: int, error_type: str | None = None) -> None:
        self.ended.append((status, error_type))


class _Telemetry(Telemetry):
    enabled = True

    def __init__(self, trace_id: str | None) -> None:
        self.trace_id = trace_id
        self.traces: list[_Trace] = []
        self.counts: list[tuple[str, int, dict[str, Any]]] = []
        self.parents: list[Any] = []

    def start_shadow(self, parent: RequestTrace | TraceLink | None,
                     name: str = "shadow audit") -> RequestTrace:
        self.parents.append(parent)
        t = _Trace(self.trace_id)
        self.traces.append(t)
        return t

    def count(self, name: str, value: int = 1,
              attributes: Mapping[str, Any] | None = None) -> None:
        self.counts.append((name, value, dict(attributes or {})))


def _pair(policy: str, candidates: list[PolicyRef], *, model: str, tenant: str | None,
          stream: bool, upstream: Mapping[str, Any] | None, status: int,
          telemetry: Telemetry) -> tuple[Outcome, ShedRecord, _Sink, _Sink]:
    """The same shed request written both ways; the times of the first copied over."""
    streaming = "buffer" if stream else None
    plan = ShedPlan(policy, "3f2a", candidates, "relay_busy")
    rec = ShedRecord(plan, "a" * 32, model, tenant, stream, streaming, upstream)
    rec.upstream_status = status
    o = Outcome(policy=policy, policy_version="3f2a", mode="shadow", model=model,
                tenant=tenant, stream=stream, streaming=streaming, audit_id="a" * 32,
                upstream=upstream)
    o.upstream_status = status
    old, new = _Sink(), _Sink()
    record_shed(Recorder(telemetry, old), telemetry, o, candidates,  # type: ignore[arg-type]
                None, reason="relay_busy")
    rec.write(new, telemetry, None)  # type: ignore[arg-type]
    rec.started_at, rec.finished_at, rec.duration_ms = o.started_at, o.finished_at, o.duration_ms
    return o, rec, old, new


def test_a_shed_record_is_record_sheds_line_and_mapping_byte_for_byte() -> None:
    values = itertools.cycle(HOSTILE)
    cands = [[], [PolicyRef("grounding", "v9")],
             [PolicyRef(next(values), next(values)), PolicyRef("c2", "")]]
    n = 0
    for stream, tenant, upstream, status, cs in itertools.product(
            (False, True), (None, "t", '"x'), UPSTREAMS, (200, 201), cands):
        o, rec, old, new = _pair(next(values) or "p", cs, model=next(values), tenant=tenant,
                                 stream=stream, upstream=upstream, status=status,
                                 telemetry=Telemetry())
        assert old.records == [o] and new.records == [rec]
        line = rec.audit_line()
        assert line == o.audit_line() == o._full_line()
        assert orjson.loads(line) == scrub(o.to_dict())
        assert rec.to_dict() == o.to_dict()
        n += 1
    assert n == 2 * 3 * len(UPSTREAMS) * 2 * 3


def test_the_trace_decision_counter_and_span_are_record_sheds() -> None:
    for trace_id in (None, "ab" * 16):
        tel = _Telemetry(trace_id)  # record_shed's calls first, then the ShedRecord's
        o, rec, _, _ = _pair("default", [PolicyRef("grounding", "v9")], model="m",
                             tenant="t", stream=False, upstream={"name": "u", "attempts": 1},
                             status=200, telemetry=tel)
        assert rec.trace_id == o.trace_id == trace_id
        assert tel.counts[0] == tel.counts[1]
        assert tel.counts[0][:2] == ("verifications", 1)
        assert len(tel.counts) == 2 and len(tel.traces) == 2
        old, new = tel.traces
        assert old.ended == new.ended == [(0, "shadow_dropped")]
        assert len(old.decisions) == len(new.decisions) == 1
        d_old, d_new = old.decisions[0], new.decisions[0]
        for key in ("started_at", "finished_at", "duration_ms"):  # two clocks
            d_old.pop(key)
            d_new.pop(key)
        assert d_new == d_old
        assert d_new["candidates"][0]["error"] == "dropped"


def test_before_it_is_written_it_becomes_the_outcome_the_disconnect_path_writes() -> None:
    plan = ShedPlan("default", "3f2a", [PolicyRef("grounding", "v9")], "relay_busy")
    rec = ShedRecord(plan, "b" * 32, "m", None, True, "buffer", {"name": "u", "attempts": 1})
    rec.upstream_status = 200
    o = rec.outcome()
    assert (o.audit_id, o.started_at, o.t0, o.upstream_status) == \
        (rec.audit_id, rec.started_at, rec._t0, 200)
    assert o.candidates == [] and o.shadow is None and o.note is None  # not shed yet
    assert o.finished_at is None


@pytest.mark.parametrize("reason", ["relay_busy", "full"])
def test_the_note_is_the_reasons(reason: str) -> None:
    plan = ShedPlan("default", "v", [], reason)
    expected = {"relay_busy": "not verified: the relay was saturated (shadow sample reduced)",
                "full": "not verified: shadow queue full"}[reason]
    assert plan.note == expected
