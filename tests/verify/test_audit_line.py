"""A bare record's line from its shape's template: the same bytes as the general form."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest

from gateway.audit.sink import scrub
from gateway.verify import audit_line as al
from gateway.verify.outcome import CandidateOutcome, LayerOutcome, Outcome
from gateway.verify.runner import SHED_NOTES, shadow_info

HOSTILE = ['"', "\\", '","policy":"evil', "\u2028\u2029", "\x00\x1f\x7f", "é😀\ud7ff",
           "Bearer sk-abcdefghijklmnop12", "}" * 3, "a" * 300]


def _shed(**kw: Any) -> Outcome:
    o = Outcome(policy=kw.pop("policy", "default"), policy_version="3f2a", mode="shadow",
                model=kw.pop("model", "bench"), tenant=kw.pop("tenant", None),
                stream=kw.pop("stream", False), streaming=kw.pop("streaming", None),
                upstream=kw.pop("upstream", {"name": "default", "attempts": 1}))
    o.upstream_status = kw.pop("status", 200)
    o.response_id = kw.pop("response_id", None)
    o.note = SHED_NOTES["relay_busy"]
    o.candidates = [CandidateOutcome("grounding", "v9", error="dropped")]
    o.shadow = shadow_info("dropped")
    for k, v in kw.items():
        setattr(o, k, v)
    o.finish()
    return o


def _same(o: Outcome) -> bytes:
    line = o.audit_line()
    assert line == o._full_line()
    assert orjson.loads(line) == scrub(o.to_dict())
    return line


@pytest.fixture(autouse=True)
def _fresh_templates() -> Any:
    saved = dict(al._templates)
    al._templates.clear()
    yield
    al._templates.clear()
    al._templates.update(saved)


def test_a_shed_record_from_the_template_is_the_general_encoding_byte_for_byte() -> None:
    first = _shed()
    _same(first)
    assert len(al._templates) == 1  # the shape's fixed part is now kept
    values = itertools.cycle(HOSTILE)
    for stream, tenant, trace, status, dur in itertools.product(
            (False, True), (None, "t"), (None, "ab" * 16), (200, 201), (0.0, 1.23456789, 1e9)):
        o = _shed(model=next(values), tenant=tenant and next(values), stream=stream,
                  streaming="buffer" if stream else None, status=status,
                  response_id=next(values), duration_ms=dur,
                  upstream={"name": next(values), "attempts": 2, "tried": [next(values)]})
        o.duration_ms = dur
        o.trace_id = trace
        o.audit_id = next(values)
        _same(o)
    assert len(al._templates) == 1  # one shape, whatever the request's own fields


def test_foreign_keys_in_the_request_fields_are_scrubbed_through_the_template() -> None:
    _same(_shed())
    hostile = _shed(upstream={"name": "u", "Authorization": "Bearer sk-up",
                              "tried": [{"cookie": "c", "name": "a"}]})
    line = _same(hostile)
    assert b"sk-up" not in line and b"cookie" not in line.lower()


def test_what_the_template_cannot_hold_is_encoded_directly() -> None:
    unplain = _shed()
    unplain.shadow = {"result": "dropped", "queue_ms": None, "worker": None, "api-key": "k"}
    layered = _shed()
    layered.candidates = [CandidateOutcome("c", "v2", layers=[
        LayerOutcome("g", "grounding", score=0.5, explanation="why")])]
    redacted = _shed()
    redacted.redact = lambda text: text.replace("dropped", "[x]")
    for o in (unplain, layered, redacted):
        line = _same(o)
        assert b"api-key" not in line
    assert not al._templates
    assert b'"error":"[x]"' in redacted.audit_line()


def test_shapes_differ_by_policy_candidates_and_shadow_and_stop_at_the_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _shed(policy="a"), _shed(policy="b")
    c = _shed()
    c.candidates = []
    d = _shed()
    d.shadow = None
    for o in (a, b, c, d, a, b, c, d):
        _same(o)
    assert len(al._templates) == 4
    monkeypatch.setattr(al, "TEMPLATES_MAX", 4)
    e = _shed(policy="e")
    _same(e)
    assert len(al._templates) == 4  # past the bound: encoded whole, nothing kept
