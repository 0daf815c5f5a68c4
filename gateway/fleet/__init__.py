"""Fleet mode: verification jobs on a Redis Stream, verified by ``gateway worker`` s.

When one machine cannot verify what its relays serve, the relays publish each
background :class:`~gateway.verify.job.VerificationJob` (shadow audits, candidate
policies) to a Redis Stream, and ``gateway worker`` processes or pods — anywhere —
read them through a consumer group, verify them with a runtime of their own
(``gateway.runtime.open_runtime``), write the audit records and export the telemetry.
``shadow.runner: redis`` turns it on; without it the jobs run in the relay.

- :mod:`~gateway.fleet.codec` — a job as data (versioned JSON, never pickle: a
  compromised Redis must not run code in the workers), bounded and checked on the way in.
- :mod:`~gateway.fleet.connect` — the Redis client from the settings (the optional
  ``redis`` package: ``pip install 'verity-gateway[redis]'``).
- :mod:`~gateway.fleet.stream` — the stream commands both sides share (the group, its
  backlog, delivery counts, trimming) and reading Redis' replies.
- :mod:`~gateway.fleet.publisher` — :class:`~gateway.fleet.publisher.RedisRunner`, the
  relay's :class:`~gateway.verify.runner.JobRunner`: ``submit`` never waits; a bounded
  buffer is published in the background; Redis down, slow or backed up → the job is
  shed, counted and recorded as not verified.
- :mod:`~gateway.fleet.ledger` — exactly one record per job: the commit claim
  (a Lua script) and the audit-file check that settles a claim whose worker died.
- :mod:`~gateway.fleet.consumer` — :class:`~gateway.fleet.consumer.FleetWorker`, what
  ``gateway worker`` runs: read, re-claim what dead workers left pending, verify,
  record, acknowledge; a job delivered ``max_deliveries`` times is recorded as failed.
  Its pieces: :mod:`~gateway.fleet.claim` (re-claiming what dead workers left pending:
  ``XAUTOCLAIM``), :mod:`~gateway.fleet.settle` (recording once, acknowledging,
  counting) and :mod:`~gateway.fleet.outage` (throttled warnings while Redis is down).

This package sits above ``gateway.verify`` (it runs jobs) and below the composition
root (``gateway.runtime``) and the entry points: it takes a
:class:`~gateway.verify.runtime.Runtime`, never opens one, and never imports HTTP.
It is the only package that imports ``redis``.
"""
