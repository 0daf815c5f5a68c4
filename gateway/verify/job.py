"""The verification job: what to verify, as a value.

A :class:`VerificationJob` is everything verification needs of one request and
its upstream answer — no HTTP object, no policy object, no trace object — so it can
be queued, pickled, sent to another process and verified there by a
:class:`~gateway.verify.verifier.Verifier` built from the same settings and
policies directory. The policy is named (name and version): the verifier resolves
it in its policy store, which keeps recently replaced versions so a job queued
before a reload is verified with the version that was selected.

Inline, shadow, the candidate policies and ``gateway eval`` (through a real
gateway) all verify through :meth:`Verifier.verify <gateway.verify.verifier.
Verifier.verify>`; a background job (shadow, candidates) is run whole by
:meth:`Verifier.run <gateway.verify.verifier.Verifier.run>`, which returns the
audit record (an :class:`~gateway.verify.outcome.Outcome`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.telemetry import TraceLink

__all__ = ["JobKind", "PolicyRef", "VerificationJob"]

JobKind = Literal["verify", "candidates"]


@dataclass(frozen=True, slots=True)
class PolicyRef:
    """A policy as a job names it: its name and its version (content hash)."""

    name: str
    version: str


@dataclass(frozen=True, slots=True)
class VerificationJob:
    """One answer to verify with one policy (see the module docstring)."""

    messages: Sequence[Mapping[str, Any]]
    """The request's ``messages`` exactly as the client sent them (another front
    door's request as chat-shaped messages,
    :meth:`~gateway.wire.base.ResponseFormat.request_messages`)."""
    answer: Mapping[str, Any]
    """The upstream's answer as the layers read it: a chat completion (its ``choices``;
    a stream is folded into one; another front door's answer translated,
    :meth:`~gateway.wire.base.ResponseFormat.job_answer`). Choice 0 is verified."""
    policy: PolicyRef
    audit_id: str
    mode: str
    """What the record says: ``inline`` or ``shadow``."""
    model: str = ""
    route: str = "/v1/chat/completions"
    stream: bool = False
    tenant: str | None = None
    key_name: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    upstream_status: int | None = None
    upstream: Mapping[str, Any] | None = None
    """The upstream that answered and the calls it took (the record's ``upstream``)."""
    streaming: str | None = None
    """The policy's ``streaming`` setting when the request streamed (the record's)."""
    started_at: str = ""
    """When the request started (the record's ``started_at``; ISO 8601, UTC)."""
    t0: float = 0.0
    """``time.perf_counter()`` when the request started: the record's ``duration_ms``
    counts from it (the same host's clock)."""
    candidates: tuple[PolicyRef, ...] = ()
    """Candidate policies evaluated on the same answer (never affecting it)."""
    kind: JobKind = "verify"
    """``verify``: verify with ``policy`` (and the candidates) and record it;
    ``candidates``: the live verdict is already decided (``decided``), only the
    candidates are evaluated, and the record is completed with them."""
    decided: Mapping[str, Any] | None = None
    """For ``kind="candidates"``: the live record (its wire form)."""
    trace: TraceLink | None = None
    """The request's span, to link the background trace to (dropped when pickled
    down to its W3C context)."""
    note: str | None = None
    """What the record's note says of the request itself: context it points at that
    the gateway cannot see (a Responses ``previous_response_id``), so the verdict is
    on what the request carries."""

    def with_answer(self, answer: Mapping[str, Any]) -> VerificationJob:
        """The same job for another answer (a regenerate attempt's)."""
        return self._with(answer=answer)

    def with_policy(self, policy: PolicyRef) -> VerificationJob:
        """The same answer for another policy (a candidate's)."""
        return self._with(policy=policy, candidates=())

    def _with(self, **changes: Any) -> VerificationJob:
        """``dataclasses.replace(self, **changes)`` without its per-field checks (half
        the cost; every field is an ``__init__`` field and nothing runs after
        ``__init__``, which ``tests/verify/test_job.py`` holds)."""
        new = object.__new__(VerificationJob)
        put = object.__setattr__
        for name in _FIELDS:
            put(new, name, changes[name] if name in changes else getattr(self, name))
        return new


_FIELDS = tuple(f.name for f in dataclasses.fields(VerificationJob))
