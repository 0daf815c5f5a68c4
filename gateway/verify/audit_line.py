"""An :class:`~gateway.verify.outcome.Outcome` as one audit line (what the JSONL sink writes).

- :func:`audit_line` — the record as one JSON object (no newline), free of
  credential-named keys: :func:`full_line` for any record (``to_dict`` with the
  mappings that come from elsewhere, :data:`FOREIGN`, scrubbed), :func:`bare_line`
  for a record nothing was verified for (no layers, reasons, failed claims, attempts
  or content: a shed or dropped shadow job's, a non-answer's) — the same bytes.
- A bare record's fixed part (policy, version, mode, the empty verdict fields, the
  candidates, the note, ``shadow``) is the same for every request shed by one policy
  for one reason: :func:`bare_line` encodes it once per such shape
  (:class:`BareTemplate`, at most :data:`TEMPLATES_MAX` kept) and per record formats
  only the request's own fields (audit id, model, tenant, stream, times, duration,
  response id, upstream status and calls, trace id). A saturated relay writes one
  such record per shed request. A record whose fixed part cannot be kept (a
  redaction hook, a candidate with layers, a ``shadow`` not of plain scalars) gets a
  template of its own, used once. Tests compare all three encodings byte for byte,
  hostile values included.

Also the two value helpers ``to_dict`` shares (:func:`round6`, :func:`upstream_copy`):
here so that this module needs nothing from :mod:`gateway.verify.outcome` at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from gateway.audit.sink import scrub
from gateway.redact import redact_secrets

if TYPE_CHECKING:
    from gateway.verify.outcome import Outcome

__all__ = ["FOREIGN", "TEMPLATES_MAX", "BareFields", "BareTemplate", "audit_line", "bare_line",
           "full_line", "plain", "render_bare", "round6", "upstream_copy"]

FOREIGN = ("upstream", "attempt_history", "content", "shadow")
"""The record's fields whose keys the record does not fix (the front door's upstream
calls, regenerate attempts, recorded content, a job's shadow info)."""

_PLAIN_KEYS = frozenset({"name", "attempts", "tried", "reasons", "fallback", "model",
                         "result", "queue_ms", "worker"})
"""The keys of ``upstream`` (the front door's) and ``shadow``
(:func:`~gateway.verify.runner.shadow_info`): none names a credential."""
_PLAIN_VALUES = frozenset({str, int, float, bool, type(None)})

TEMPLATES_MAX = 256
"""Bare-record shapes whose fixed part is kept encoded; past it, the rest are encoded
whole (no eviction: the shapes of one gateway are its policies times a few reasons)."""


def round6(value: float | None) -> float | None:
    """A score as recorded: six decimals."""
    if value is None or (type(value) is float and value.is_integer()):
        return value  # 1.0 and 0.0 are common: round() is slow and gives them back as is
    return round(value, 6)


def upstream_copy(used: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A copy (the front door may hold the same mapping), None when empty."""
    return {k: list(v) if isinstance(v, list) else v for k, v in used.items()} if used else None


def plain(value: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` is a dict of :data:`_PLAIN_KEYS` whose values are scalars or
    lists of scalars: :func:`scrub` would return an equal copy, so it is encoded as is."""
    if type(value) is not dict or not value.keys() <= _PLAIN_KEYS:
        return False
    for v in value.values():
        t = type(v)
        if t is list:
            if any(type(e) not in _PLAIN_VALUES for e in v):
                return False
        elif t not in _PLAIN_VALUES:
            return False
    return True


def audit_line(o: Outcome) -> bytes:
    """``o`` as one audit line (see the module docstring)."""
    if not (o.layers or o.reasons or o.failed_claims or o.attempt_history
            or o.content is not None):
        return bare_line(o)
    return full_line(o)


def full_line(o: Outcome) -> bytes:
    """:func:`audit_line` for any record: :meth:`Outcome.to_dict
    <gateway.verify.outcome.Outcome.to_dict>` with the :data:`FOREIGN` mappings
    scrubbed (every other key of the record is fixed and names no credential)."""
    out = o.to_dict()
    for key in FOREIGN:
        value = out.get(key)
        if value:
            out[key] = scrub(value)
    return orjson.dumps(out, default=str)


def _upstream_field(upstream: Mapping[str, Any] | None) -> Any:
    return (upstream if plain(upstream) else scrub(upstream_copy(upstream))) \
        if upstream else None


def _candidates(o: Outcome) -> list[dict[str, Any]]:
    redact = o.redact or redact_secrets
    return [{"name": c.name, "version": c.version, "verdict": c.verdict,
             "score": round6(c.score), "action": c.action,
             "error": redact(c.error) if c.error else c.error, "layers": []}
            if not c.layers else c.to_dict(o.redact) for c in o.candidates]


class BareFields(Protocol):
    """The request's own fields of a bare record (what :func:`render_bare` reads): an
    :class:`~gateway.verify.outcome.Outcome`, or a shed request's
    :class:`~gateway.verify.shed.ShedRecord`."""

    audit_id: str
    model: str
    tenant: str | None
    stream: bool
    streaming: str | None
    started_at: str
    finished_at: str | None
    duration_ms: float
    response_id: str | None
    upstream_status: int | None
    upstream: Mapping[str, Any] | None
    note: str | None
    trace_id: str | None


class BareTemplate:
    """The fixed part of a bare record's line, in the three pieces between the
    request's own fields (see :func:`bare_line` for the order); ``shadow`` as it is
    when :func:`plain`, else scrubbed."""

    __slots__ = ("head", "middle", "tail")

    def __init__(self, o: Outcome) -> None:
        def inner(fields: dict[str, Any]) -> bytes:  # '"k":v,…' without the braces
            return b"," + orjson.dumps(fields, default=str)[1:-1]

        self.head = inner({"policy": o.policy, "policy_version": o.policy_version,
                           "mode": o.mode})
        self.middle = inner({
            "risk_level": o.risk_level, "verdict": o.verdict, "score": round6(o.score),
            "min_confidence": o.min_confidence, "action": o.action, "applied": o.applied,
            "attempts": o.attempts, "reasons": [], "failed_claims": [],
            "failed_claim_count": 0, "layers": [], "attempt_history": [],
            "candidates": _candidates(o)})
        shadow = o.shadow
        if shadow is not None and not plain(shadow):
            shadow = scrub(shadow)
        self.tail = (inner({"shadow": shadow}) if shadow is not None else b"") + b"}"


_templates: dict[tuple[Any, ...], BareTemplate] = {}


def _shape(o: Outcome) -> tuple[Any, ...] | None:
    """What the fixed part of ``o``'s bare line depends on (None: not templated —
    a redaction hook, a candidate with layers, or a ``shadow`` that is not plain
    scalars)."""
    if o.redact is not None:
        return None
    cands = []
    for c in o.candidates:
        if c.layers:
            return None
        cands.append((c.name, c.version, c.verdict, c.score, c.action, c.error))
    shadow = o.shadow
    if shadow is None:
        skey: tuple[Any, ...] | None = None
    else:
        if type(shadow) is not dict or not shadow.keys() <= _PLAIN_KEYS:
            return None
        for v in shadow.values():
            if type(v) not in _PLAIN_VALUES:
                return None
        skey = tuple(shadow.items())
    return (o.policy, o.policy_version, o.mode, o.risk_level, o.verdict, o.score,
            o.min_confidence, o.action, o.applied, o.attempts, tuple(cands), skey)


def bare_line(o: Outcome) -> bytes:
    """:func:`audit_line` of a record with no layers, reasons, failed claims, attempts
    or content. From its shape's :class:`BareTemplate` when there is one (made on first
    use, up to :data:`TEMPLATES_MAX`); else from a template made for ``o`` alone."""
    shape = _shape(o)
    t = _templates.get(shape) if shape is not None else None
    if t is None:
        t = BareTemplate(o)
        if shape is not None and len(_templates) < TEMPLATES_MAX:
            _templates[shape] = t
    return render_bare(t, o)


def render_bare(t: BareTemplate, o: BareFields) -> bytes:
    """A bare record's line, ``t``'s fixed part around ``o``'s own fields:
    ``{"audit_id"`` · head · the request's model to duration · middle · response id,
    upstream status, upstream · note · trace id (when set) · tail."""
    dumps = orjson.dumps
    own = dumps({"audit_id": o.audit_id}, default=str)[:-1]
    request = dumps({
        "model": o.model, "tenant": o.tenant, "stream": o.stream, "streaming": o.streaming,
        "started_at": o.started_at, "finished_at": o.finished_at,
        "duration_ms": round(o.duration_ms, 3)}, default=str)[1:-1]
    answer = dumps({
        "response_id": o.response_id, "upstream_status": o.upstream_status,
        "upstream": _upstream_field(o.upstream), "note": o.note}, default=str)[1:-1]
    if o.trace_id is not None:
        answer += b"," + dumps({"trace_id": o.trace_id}, default=str)[1:-1]
    return b"".join((own, t.head, b",", request, t.middle, b",", answer, t.tail))
