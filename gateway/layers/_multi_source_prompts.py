"""The ``multi-source`` layer's prompts, call markers and reply schema (seed 000 §3).

One judge call per source: a **source** call shows one source (a request document or
a corpus entry) and the numbered claims it is about; a **knowledge** call asks a
second judge model about the claims from what it knows. Both answer the seed's
``SourceCheckSchema`` per claim: ``supports`` true/false and a ``confidence`` (its
free-text ``evidence`` left out). Each call's user message starts with its marker (the tests route
on them); the reply schema (JSON Schema) sits beside the prompts.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.layers._judged import CONFIDENCE, ReplySchema, numbered_schema

__all__ = ["MARK_KNOWLEDGE", "MARK_SOURCE", "SYSTEM", "knowledge_prompt", "reply_schema",
           "source_prompt"]

MARK_SOURCE = "[verity:multi-source:source]"
MARK_KNOWLEDGE = "[verity:multi-source:knowledge]"

SYSTEM = ("You check claims against a source and answer with strict JSON only.")

def reply_schema(count: int) -> ReplySchema:
    """Reply of either call over ``count`` claims: exactly that many results, ids an
    enum, confidence a word, no free text (the seed's ``evidence`` is left out: a small
    model runs away inside an unbounded string)."""
    return numbered_schema("source_checks", count,
                           {"supports": {"type": "boolean"}, "confidence": CONFIDENCE})


_REPLY = ("Answer with strict JSON only, one result per claim, no prose:\n"
          '{"results": [{"id": 1, "supports": true | false, '
          '"confidence": "high" | "medium" | "low"}]}')


def _listed(claims: Sequence[str]) -> str:
    return "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))


def source_prompt(source_id: str, text: str, claims: Sequence[str]) -> str:
    """A source call's user message: the source's text and the numbered claims."""
    return (f"{MARK_SOURCE}\n\nSource ({source_id}):\n\"\"\"\n{text}\n\"\"\"\n\n"
            f"Claims:\n{_listed(claims)}\n\n"
            "For each numbered claim, does this source support it? \"supports\": true "
            "only when the source states it or clearly implies it; false when the source "
            "contradicts it or does not say. Judge from the source alone, not from your "
            "own knowledge. Give your confidence.\n" + _REPLY)


def knowledge_prompt(claims: Sequence[str]) -> str:
    """The knowledge call's user message (a second judge model as a source)."""
    return (f"{MARK_KNOWLEDGE}\n\nClaims:\n{_listed(claims)}\n\n"
            "For each numbered claim, do you know it to be accurate? \"supports\": true "
            "only when you are confident it is accurate; false when it is wrong or you "
            "do not know. Give your confidence.\n" + _REPLY)
