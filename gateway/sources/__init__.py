"""Where grounding text comes from: the request's own messages, and a corpus.

- :mod:`~gateway.sources.context` — a policy's ``context`` spec and
  :func:`~gateway.sources.context.extract_context`: system/developer messages,
  delimited blocks, tool results (and the deprecated function results) become the
  request's :class:`~gateway.sources.context.GroundingContext`;
- :mod:`~gateway.sources.blocks` — the ``<tag …>…</tag>`` block finder;
- :mod:`~gateway.sources.corpus` — a directory of source documents citations are
  resolved against, and the cache that reuses it while its files are unchanged.

Pure apart from the corpus's file reads; nothing here imports HTTP or policies.
"""
