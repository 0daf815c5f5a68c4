"""The ``fact-check`` layer's prompt texts and call markers (seed 004).

The labelling prompt (one batched judge call labels every claim/passage pair
supporting / contradicting / contextual, with a relevance) and the correction
prompt (rewrite contradicted and outdated claims from their evidence) of
:mod:`gateway.layers.fact_check`. Each call's user message starts with its
marker, which the tests route on.
"""

from __future__ import annotations

from gateway.layers._json_reply import arr, ids, obj
from gateway.layers._judged import ReplySchema

__all__ = ["CORRECT_PROMPT", "LABEL_PROMPT", "MARK_CORRECT", "MARK_LABEL", "correct_schema",
           "label_schema"]

MARK_LABEL = "[verity:fact-check:label]"
MARK_CORRECT = "[verity:fact-check:correct]"
"""Markers, the first line of each call's user message (tests route on them)."""

LABEL_PROMPT = """\
You are a fact checker. Each numbered PAIR holds a CLAIM taken from an AI answer and
an EVIDENCE passage taken from a source. Decide, from the passage alone (not from
your own knowledge), what the passage says about the claim:
- "supporting": the passage states the claim or something that entails it (same
  values, names, dates and direction).
- "contradicting": the passage states something incompatible with the claim (a
  different value, date or name, or the opposite direction).
- "contextual": related, but it neither confirms nor refutes the claim.
Also give "relevance" in [0, 1]: how directly the passage addresses this claim
(1 = about exactly this claim, 0 = unrelated).

Reply with JSON only, one entry per pair, no prose:
{"pairs": [{"id": "P1", "label": "supporting", "relevance": 0.9}]}"""

CORRECT_PROMPT = """\
You correct claims that the evidence shows to be wrong or out of date. For each
numbered CLAIM, write the corrected claim: change only what its EVIDENCE
contradicts, keep everything else, and state nothing the evidence does not say.

Reply with JSON only, no prose:
{"corrections": [{"id": "c1", "corrected": "..."}]}"""


def label_schema(pairs: int) -> ReplySchema:
    """The reply :data:`LABEL_PROMPT` asks for, over pairs ``P1..P<pairs>``. The
    relevance is a plain number: servers do not enforce numeric bounds, the layer
    clamps it."""
    item = obj({"id": ids(f"P{i}" for i in range(1, pairs + 1)),
                "label": {"enum": ["supporting", "contradicting", "contextual"]},
                "relevance": {"type": "number"}})
    return ReplySchema("evidence_labels", obj({"pairs": arr(item, pairs, pairs)}))


def correct_schema(claims: int) -> ReplySchema:
    """The reply :data:`CORRECT_PROMPT` asks for, over claims ``c1..c<claims>``."""
    item = obj({"id": ids(f"c{i}" for i in range(1, claims + 1)),
                "corrected": {"type": "string"}})
    return ReplySchema("corrections", obj({"corrections": arr(item, claims, claims)}))
