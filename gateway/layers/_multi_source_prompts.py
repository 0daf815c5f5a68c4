"""The ``multi-source`` layer's prompts, call markers and reply schema (seed 000 §3).

One judge call per source: a **source** call shows one source (a request document or
a corpus entry) and the numbered claims it is about; a **knowledge** call asks a
second judge model about the claims from what it knows. Both answer the seed's
``SourceCheckSchema`` per claim: ``supports`` true/false, a ``confidence`` and the
key ``evidence``. Each call's user message starts with its marker (the tests route
on them); the reply schema (JSON Schema) sits beside the prompts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["MARK_KNOWLEDGE", "MARK_SOURCE", "REPLY_SCHEMA", "SYSTEM", "knowledge_prompt",
           "reply_schema", "source_prompt"]

MARK_SOURCE = "[verity:multi-source:source]"
MARK_KNOWLEDGE = "[verity:multi-source:knowledge]"

SYSTEM = ("You check claims against a source and answer with strict JSON only.")

REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"results": {"type": "array", "items": {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "supports": {"type": "boolean"},
                       "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                       "evidence": {"type": "string"}},
        "required": ["id", "supports", "confidence"], "additionalProperties": False}}},
    "required": ["results"], "additionalProperties": False,
}
"""Reply of either call (the seed's ``SourceCheckSchema``, one per claim)."""


def reply_schema(count: int) -> dict[str, Any]:
    """:data:`REPLY_SCHEMA` for a call about ``count`` claims: exactly that many results
    (a small judge under constrained decoding otherwise stops early, and a missing item
    is an error)."""
    results = {**REPLY_SCHEMA["properties"]["results"], "minItems": count, "maxItems": count}
    return {**REPLY_SCHEMA, "properties": {"results": results}}

_REPLY = ("Answer with strict JSON only, one result per claim, no prose:\n"
          '{"results": [{"id": 1, "supports": true | false, '
          '"confidence": <number from 0 to 1>, "evidence": "<the key words, briefly>"}]}')


def _listed(claims: Sequence[str]) -> str:
    return "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))


def source_prompt(source_id: str, text: str, claims: Sequence[str]) -> str:
    """A source call's user message: the source's text and the numbered claims."""
    return (f"{MARK_SOURCE}\n\nSource ({source_id}):\n\"\"\"\n{text}\n\"\"\"\n\n"
            f"Claims:\n{_listed(claims)}\n\n"
            "For each numbered claim, does this source support it? \"supports\": true "
            "only when the source states it or clearly implies it; false when the source "
            "contradicts it or does not say. Judge from the source alone, not from your "
            "own knowledge. Give your confidence (0-1) and the key evidence.\n" + _REPLY)


def knowledge_prompt(claims: Sequence[str]) -> str:
    """The knowledge call's user message (a second judge model as a source)."""
    return (f"{MARK_KNOWLEDGE}\n\nClaims:\n{_listed(claims)}\n\n"
            "For each numbered claim, do you know it to be accurate? \"supports\": true "
            "only when you are confident it is accurate; false when it is wrong or you "
            "do not know. Give your confidence (0-1) and the key evidence.\n" + _REPLY)
