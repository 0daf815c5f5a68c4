"""The audit store: where verification records go, and how they are read back.

- :mod:`~gateway.audit.sink` — the :class:`~gateway.audit.sink.AuditSink` protocol
  (the seam for other stores) and the append-only JSONL writer that implements it;
- :mod:`~gateway.audit.report` — reading a JSONL audit file and summarising it
  (``gateway audit tail | show | report``).

"audit" means this store only: the seed-002 verification layer is
``gateway.layers.audit`` (the ``audit`` layer), the CLI command
``gateway.commands.audit``.
"""
