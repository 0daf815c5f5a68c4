"""Where HTTP meets verification: what happens to a request a policy applies to.

- :mod:`~gateway.modes.dispatch` — :class:`~gateway.modes.dispatch.VerityEngine`,
  what the chat front door hands a request with a policy to: selection, the mode,
  the records of requests that end early (upstream failure, client gone), and
  ``/readyz``; :func:`~gateway.modes.dispatch.open_engine` builds it in the lifespan;
- :mod:`~gateway.modes.request` — one such request (:class:`~gateway.modes.request.
  PolicyRequest`): its policy, audit id and the record it owes, as typed fields;
- :mod:`~gateway.modes.inline` (JSON, ``streaming: buffer``),
  :mod:`~gateway.modes.passthrough` (``streaming: passthrough``, with
  :mod:`~gateway.modes.holdback`) and :mod:`~gateway.modes.unverified` — inline mode;
- :mod:`~gateway.modes.shadow` — shadow mode: relay untouched, verify in the
  background (a :class:`~gateway.verify.job.VerificationJob` for the job runner);
- :mod:`~gateway.modes.relay` — reading and relaying an upstream stream for
  verification; :mod:`~gateway.modes.headers` — the ``x-verity-*`` headers.

Verification itself is :class:`~gateway.verify.verifier.Verifier` (no HTTP); the
response bodies around a verdict come from the request's
:class:`~gateway.wire.base.ResponseFormat`.
"""
