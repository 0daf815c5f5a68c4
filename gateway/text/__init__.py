"""The text library the model-free layers share (pure: no I/O, no gateway state).

- :mod:`~gateway.text.tokens` — sentences, tokens, content words, word variants,
  entity candidates, negation cues;
- :mod:`~gateway.text.quantities` — dates and numbers, normalized and compared
  (the candidate scans in ``_quantity_scan``); :mod:`~gateway.text.facts` — the
  numbers and dates of whole documents;
- :mod:`~gateway.text.index` — an index of grounding text (sentences, an inverted
  index, facts, negation), and a bounded cache of them;
- :mod:`~gateway.text.answer` — an answer's sentences with their entities, dates and
  numbers, analyzed once per request;
- :mod:`~gateway.text.claims` — seed 001's factual claim detector (the fast scans in
  ``_claim_scan``), shared by layers and the risk assessor;
- :mod:`~gateway.text.memo` — the per-request memo protocol the above store results in.

Nothing here imports the rest of the gateway.
"""
