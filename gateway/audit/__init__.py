"""The audit store: where verification records go, and how they are read back.

- writing: :mod:`~gateway.audit.sink` (the :class:`~gateway.audit.sink.AuditSink`
  protocol, the seam for other stores, and the append-only JSONL sink),
  :mod:`~gateway.audit.writer` (whole-line appends, rotation) and
  :mod:`~gateway.audit.layout` (one file or a directory of per-process files);
- reading, with DuckDB (the ``audit`` extra, imported lazily):
  :mod:`~gateway.audit.schema`, :mod:`~gateway.audit.store`,
  :mod:`~gateway.audit.filters`, :mod:`~gateway.audit.report`
  (``gateway audit tail | show | report``);
- upkeep: :mod:`~gateway.audit.compact` (closed files to Parquet) and
  :mod:`~gateway.audit.maintain` (compaction and retention in the writing process).

"audit" means this store only: the seed-002 verification layer is
``gateway.layers.audit`` (the ``audit`` layer), the CLI command
``gateway.commands.audit``.
"""
