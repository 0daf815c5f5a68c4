"""The one entry point of verification: a job in, a verdict (or a record) out.

:meth:`Verifier.verify` verifies a :class:`~gateway.verify.job.VerificationJob`'s
answer with its policy — context, layers, calibration, decision — and returns the
:class:`~gateway.verify.outcome.Verification`. It is pure in the sense that matters:
no HTTP, no response, no upstream call; everything it needs is in the job and the
:class:`~gateway.verify.runtime.Runtime`. Inline mode calls it for the answer and
for each regenerate attempt, the candidate policies go through it, and so does a
background job:

- :meth:`Verifier.run` — a ``verify`` job whole (shadow): the verdict, the action
  that *would* have been taken, the content (when the policy records it), the
  candidates; it fills the job's :class:`~gateway.verify.outcome.Outcome`.
- :meth:`Verifier.run_candidates` — a ``candidates`` job (after an inline answer):
  the candidates' outcomes, added to the live record the job carries.
"""

from __future__ import annotations

import logging
from typing import Any

from gateway.layers.base import VerifyInput
from gateway.policy.loader import Policy
from gateway.redact import exception_summary, exception_trace
from gateway.sources.context import GroundingContext
from gateway.telemetry import RequestTrace
from gateway.verify.actions import band_action
from gateway.verify.content import content_redactor, record_content
from gateway.verify.job import PolicyRef, VerificationJob
from gateway.verify.outcome import MAX_SOURCES, CandidateOutcome, Outcome, Verification
from gateway.verify.pipeline import Budget, min_confidence_for, run_pipeline
from gateway.verify.runtime import Runtime
from gateway.verify.scope import BoundedContext, JobScope, Oversize
from gateway.wire.chat import answer_text, calls_only

__all__ = ["ABANDONED", "Verifier", "abandoned", "citable"]

log = logging.getLogger("gateway.engine")

_NO_TRACE = RequestTrace()


ABANDONED = "abandoned: over budget"
"""The note (and a candidate's error) of verification stopped at its time budget."""


def _not_verified(policy: Policy, note: str) -> Verification:
    """A pass with no layers run (``score: null``): the answer flows unchanged."""
    level = policy.spec.risk.level
    level = "low" if level == "assess" else level  # what the assessor says of no text
    return Verification(risk_level=level, layers=[], verdict="pass", score=None,
                        min_confidence=min_confidence_for(policy, level), note=note)


def citable(context: GroundingContext) -> list[str]:
    """Ids of the sources a request offers: its documents, then the corpus's entries
    when all fit (at most :data:`~gateway.verify.outcome.MAX_SOURCES`; a large corpus
    is not listed)."""
    ids = list(dict.fromkeys(d.id for d in context.documents))[:MAX_SOURCES]
    corpus = context.corpus
    if corpus and len(ids) + len(corpus) <= MAX_SOURCES:
        ids += [k for k in corpus if k not in ids]
    return ids


def _oversize(policy: Policy, over: Oversize) -> Verification:
    """``skip``: not verified; ``refuse``: a ``fail`` with the reason."""
    v = _not_verified(policy, over.note())
    if over.action == "refuse":
        v.verdict = "fail"
        v.reasons = [f"context: {over.chars} characters, over context.max_chars "
                     f"({over.limit})"]
    return v


def abandoned(policy: Policy, elapsed_ms: float) -> Verification:
    """The verification of an answer stopped at ``budget.total_ms``: an error, which
    ``on_error`` decides (``fail_closed``: ``fail``; else a pass with no score)."""
    v = _not_verified(policy, f"{ABANDONED} ({elapsed_ms:.0f} ms, budget.total_ms "
                              f"{policy.spec.budget.total_ms})")
    v.errors = 1
    if policy.spec.on_error == "fail_closed":
        v.verdict, v.fail_closed = "fail", True
        v.reasons = [f"verification: error ({ABANDONED})"]
    return v


class Verifier:
    """Verifies jobs with the policies and resources of one :class:`Runtime`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def policy(self, ref: PolicyRef) -> Policy | None:
        return self.runtime.policy(ref)

    async def verify(self, job: VerificationJob, *, policy: Policy | None = None,
                     trace: RequestTrace | None = None,
                     budget: Budget | None = None,
                     scope: JobScope | None = None) -> Verification:
        """Verify ``job.answer`` (choice 0) with the job's policy.

        ``policy`` is that policy when the caller holds it already (inline: the
        selected one; a candidate: the candidate, with the live job); else it is
        resolved from the job (``LookupError`` when its version is not known).
        ``trace`` gets the ``verify`` spans (none without it); ``budget`` is shared by
        every attempt of one request (a fresh one per call without it); ``scope`` is
        the job's shared work (its context and model-free layer results, reused by its
        candidates: :mod:`gateway.verify.scope`).
        """
        if policy is None:
            policy = self.policy(job.policy)
            if policy is None:
                raise LookupError(f"policy {job.policy.name!r} version {job.policy.version} "
                                  "is not loaded")
        completion = job.answer
        text = answer_text(completion)
        if not text and calls_only(completion):  # a tool call: no text to verify
            return _not_verified(policy, "not verified: the answer is tool calls only")
        trace = (trace or _NO_TRACE).for_policy(policy.name)  # its spans name the policy
        runtime = self.runtime
        bounded: BoundedContext | None = await runtime.prepared.context(job.audit_id, policy)
        if bounded is None:
            corpus = runtime.corpus(policy)
            scope = scope or JobScope()
            bounded = scope.context(job.messages, policy.spec.context, corpus)
        over = bounded.oversize
        if over is not None and over.action != "truncate":
            return _oversize(policy, over)
        # brief: the pipeline keeps no layer's evidence or details (LayerOutcome).
        inp = VerifyInput(messages=job.messages, response_text=text, context=bounded.context,
                          model=job.model, metadata=job.metadata, brief=True)
        v = await run_pipeline(policy, inp, layer_for=runtime.layer_factory(policy),
                               trace=trace, telemetry=runtime.telemetry, budget=budget,
                               plans=runtime.plans, scope=scope)
        if over is not None:
            v.note = over.note()
        n = len(completion.get("choices") or ())
        if n > 1:  # n > 1: the verdict is choice 0's alone (docs/policies.md, Runtime)
            only = f"only choice 0 verified; choices 1-{n - 1} of n={n} were not"
            v.note = f"{v.note}; {only}" if v.note else only
        if job.note:
            v.note = f"{v.note}; {job.note}" if v.note else job.note
        v.sources = citable(bounded.context)
        return v

    async def run(self, job: VerificationJob, trace: RequestTrace,
                  outcome: Outcome | None = None) -> Outcome:
        """A ``verify`` job whole: fill ``outcome`` (a new one for the job without it)
        as it goes — verdict and layers, the band's action (not applied), the content
        when the policy records it, then each candidate's outcome — and return it.
        The caller closes the record (:class:`~gateway.verify.record.Recorder`)."""
        outcome = outcome or Outcome.for_job(job)
        policy = self.policy(job.policy)
        if policy is None:
            outcome.note = (f"not verified: policy version {job.policy.version} is no "
                            f"longer loaded")
            return outcome
        scope, budget = JobScope(), Budget.for_policy(policy)
        v = await self.verify(job, policy=policy, trace=trace, budget=budget, scope=scope)
        outcome.record(v)
        outcome.action = band_action(policy.spec.actions, v.verdict).type
        if policy.spec.telemetry.record_content:  # else nothing is recorded: no answer text
            record_content(policy, outcome, trace, job.messages, answer_text(job.answer))
        for ref in job.candidates:
            outcome.candidates.append(await self.candidate(job, ref, trace, scope, budget))
        return outcome

    async def run_candidates(self, job: VerificationJob, trace: RequestTrace,
                             into: list[CandidateOutcome]) -> None:
        """A ``candidates`` job: each candidate's outcome, appended to ``into`` as it
        is known (the caller writes :meth:`candidates_record` whatever happens). The
        job's time is the live policy's ``budget.total_ms``."""
        live = self.policy(job.policy)
        budget = Budget.for_policy(live) if live is not None else None
        scope = JobScope()
        for ref in job.candidates:
            into.append(await self.candidate(job, ref, trace, scope, budget))

    def candidates_record(self, job: VerificationJob,
                          candidates: list[CandidateOutcome]) -> dict[str, Any]:
        """The live record of a ``candidates`` job with ``candidates`` in it (their
        failed claims through the live policy's content redaction, as the live ones)."""
        policy = self.policy(job.policy)
        redact = content_redactor(policy) if policy is not None else None
        record: dict[str, Any] = dict(job.decided or {})
        record["candidates"] = [c.to_dict(redact) for c in candidates]
        return record

    async def candidate(self, job: VerificationJob, ref: PolicyRef, trace: RequestTrace,
                        scope: JobScope | None = None,
                        job_budget: Budget | None = None) -> CandidateOutcome:
        """Candidate policy ``ref`` on the job's answer: what it would have decided.
        A broken candidate never affects anything else: its failure is its outcome.
        ``job_budget``: the job's time (a candidate gets its own ``budget.total_ms`` or
        what is left of the job's, whichever is less; none left: ``abandoned``)."""
        try:
            cand = self.policy(ref)
            if cand is None:
                return CandidateOutcome(ref.name, ref.version,
                                        error="policy version no longer loaded")
            budget = Budget.for_policy(cand)
            if job_budget is not None:
                left = job_budget.remaining_ms()
                if left <= 0:
                    return CandidateOutcome(cand.name, cand.version, error=ABANDONED)
                budget.total_ms = min(budget.total_ms, left)
            # A span of its own: its verify spans are told apart from the live policy's
            # (and its decision is counted beside the live policy's name).
            with trace.for_policy(job.policy.name).candidate(cand.name) as ctrace:
                # The job as is: with ``policy`` given, verify reads the answer, messages
                # and request fields of the job, never its policy (no copy per candidate).
                v = await self.verify(job, policy=cand, trace=ctrace, budget=budget,
                                      scope=scope)
                out = CandidateOutcome(cand.name, cand.version, verdict=v.verdict,
                                       score=v.score,
                                       action=band_action(cand.spec.actions, v.verdict).type,
                                       layers=v.layers)
                ctrace.decision({"policy": cand.name, "mode": "candidate",
                                 "verdict": out.verdict, "score": out.score,
                                 "action": out.action})
        except Exception as exc:  # a broken candidate never affects anything else
            # Its type and where, never its message (which may quote the answer).
            log.error("candidate policy %r failed: %s", ref.name, exception_trace(exc))
            return CandidateOutcome(ref.name, ref.version, error=exception_summary(exc))
        return out


