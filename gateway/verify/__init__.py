"""Verification, pure: a job in, a verdict (or a record) out — no HTTP inside.

- :mod:`~gateway.verify.job` — :class:`~gateway.verify.job.VerificationJob`, what to
  verify, as a picklable value;
- :mod:`~gateway.verify.verifier` — :class:`~gateway.verify.verifier.Verifier`, the
  one entry point (inline, shadow, candidates all go through ``verify``);
- :mod:`~gateway.verify.runtime` — the resources and caches a verifier uses (judge,
  corpora, layer instances, plans, :mod:`~gateway.verify.prepare` preparations);
- :mod:`~gateway.verify.pipeline` — risk → layers → calibration → decision
  (:mod:`~gateway.verify.risk`, :mod:`~gateway.verify.calibration`);
- :mod:`~gateway.verify.actions` — what a verdict band does (a registry);
- :mod:`~gateway.verify.outcome` — the records; :mod:`~gateway.verify.content` —
  message content in them, when a policy opts in; :mod:`~gateway.verify.record` —
  closing a record (trace, metric, audit sink);
- :mod:`~gateway.verify.queue` — the job runner seam and the bounded in-process
  queue that implements it.
"""
