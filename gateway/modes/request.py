"""One request a policy applies to, on its way through its mode: :class:`PolicyRequest`.

Typed per-request state, beside the HTTP exchange: the selected policy (and its
candidates), the request's audit id (known before the upstream call: the inline
context preparation is keyed by it), and the record the request owes should it end
early — the *tracked* outcome, written if the client disconnects, with how much of
a stream it got.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.http.exchange import ChatExchange
from gateway.policy.loader import Policy
from gateway.policy.select import Selection
from gateway.verify.job import JobKind, PolicyRef, VerificationJob
from gateway.verify.outcome import Outcome, new_audit_id
from gateway.verify.shed import ShedRecord

__all__ = ["PolicyRequest", "Progress"]

Progress = Callable[[], tuple[str, "str | None"]]
"""How much of the response the client got: (the note's wording, the response id seen)."""


def _ref(policy: Policy) -> PolicyRef:
    return PolicyRef(policy.name, policy.version)


@dataclass(slots=True, eq=False)
class PolicyRequest:
    """A request with its policy (see the module docstring)."""

    x: ChatExchange
    selection: Selection
    audit_id: str = field(default_factory=new_audit_id)
    tracked: Outcome | ShedRecord | None = None
    """The record written if the client disconnects before it is finished (a shed
    request's :class:`~gateway.verify.shed.ShedRecord` becomes an ``Outcome`` then)."""
    progress: Progress | None = None
    """How much of a stream the client got (kept once given)."""
    salvage: Callable[[], bool] | None = None
    """Called first if the client disconnects: True when it took over the record (a
    shadow stream whose whole answer was relayed is still verified)."""

    @property
    def policy(self) -> Policy:
        return self.selection.policy

    def track(self, outcome: Outcome | ShedRecord, progress: Progress | None = None) -> None:
        """Make ``outcome`` the record written if the client disconnects before it is
        finished; ``progress`` (kept once given) tells how much of a stream it got."""
        self.tracked = outcome
        if progress is not None:
            self.progress = progress

    def untrack(self) -> None:
        """A background job writes the record from now on (not the disconnect path)."""
        self.tracked = None

    def new_outcome(self, mode: str) -> Outcome:
        """The request's record (its audit id), started now."""
        x, policy = self.x, self.policy
        return Outcome(policy=policy.name, policy_version=policy.version, mode=mode,
                       model=x.info.model, tenant=x.info.tenant, stream=x.stream,
                       streaming=policy.spec.streaming if x.stream else None,
                       audit_id=self.audit_id, upstream=x.served)

    def job(self, answer: Mapping[str, Any], outcome: Outcome, *, kind: JobKind = "verify",
            policy: Policy | None = None, decided: Mapping[str, Any] | None = None,
            background: bool = False) -> VerificationJob:
        """The verification job of ``answer`` (in the front door's format): this
        request's, recorded as ``outcome`` (``background``: it runs after the
        response, its trace linked to this one)."""
        x, info = self.x, self.x.info
        return VerificationJob(
            messages=x.messages, answer=x.fmt.job_answer(answer),
            policy=_ref(policy or self.policy),
            audit_id=outcome.audit_id, mode=outcome.mode, model=info.model,
            route=info.route, stream=info.stream, tenant=info.tenant,
            key_name=info.key_name, metadata=info.metadata,
            upstream_status=outcome.upstream_status, streaming=outcome.streaming,
            upstream=dict(x.served) if x.served else None,
            started_at=outcome.started_at, t0=outcome.t0,
            candidates=tuple(_ref(c) for c in self.selection.candidates), kind=kind,
            decided=decided, trace=x.trace.link() if background else None,
            note=x.fmt.unseen_context(x.payload))
