"""The ``fact-decomposition`` layer's prompts, call markers and reply schemas (seed 000 §2).

Two judge calls at most per request: **decompose** (split the answer into atomic
claims, each typed ``factual`` / ``opinion`` / ``inference`` / ``uncertain``) and
**check** (the factual claims the request's context and the corpus do not already
support, numbered, each ``verified`` true/false). Each call's user message starts
with its marker, which the tests route on. The reply schemas
(:class:`~gateway.layers._judged.ReplySchema`, the strict subset) sit beside the
prompts: the judge is asked for them when it can (structured output).
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.layers._json_reply import arr, obj
from gateway.layers._judged import CONFIDENCE, ReplySchema, numbered_schema

__all__ = ["CHECK_SYSTEM", "CLAIM_TYPES", "MAX_CLAIMS_ASKED", "check_schema", "DECOMPOSE_SCHEMA",
           "DECOMPOSE_SYSTEM", "MARK_CHECK", "MARK_DECOMPOSE", "check_prompt",
           "decompose_prompt"]

MARK_DECOMPOSE = "[verity:fact-decomposition:decompose]"
MARK_CHECK = "[verity:fact-decomposition:check]"

CLAIM_TYPES = ("factual", "opinion", "inference", "uncertain")

DECOMPOSE_SYSTEM = ("You split texts into atomic claims and classify each one. "
                    "You answer with strict JSON only.")

MAX_CLAIMS_ASKED = 30
"""Claims a decompose reply may hold (the schema's bound)."""

DECOMPOSE_SCHEMA: ReplySchema = ReplySchema("atomic_claims", obj({"claims": arr(
    obj({"claim": {"type": "string"}, "type": {"enum": list(CLAIM_TYPES)}}),
    0, MAX_CLAIMS_ASKED)}))
"""Reply of the decompose call (the claims are free text: what the call is for)."""

CHECK_SYSTEM = ("You are a careful fact checker. You judge whether claims are accurate "
                "and answer with strict JSON only.")


def check_schema(count: int) -> ReplySchema:
    """Reply of the check call over ``count`` claims: exactly that many results, ids
    an enum, confidence a word (no free text)."""
    return numbered_schema("claim_checks", count,
                           {"verified": {"type": "boolean"}, "confidence": CONFIDENCE})


def decompose_prompt(answer: str, question: str) -> str:
    """The decompose call's user message: the answer (and the question it answers)."""
    asked = f'Question it answers:\n"""\n{question}\n"""\n\n' if question else ""
    return (f"{MARK_DECOMPOSE}\n\n{asked}Text:\n\"\"\"\n{answer}\n\"\"\"\n\n"
            "Decompose the text into atomic claims: each claim one short, self-contained "
            "sentence stating one thing (replace pronouns by what they refer to). "
            "Classify each claim:\n"
            '- "factual": a checkable statement of fact (names, numbers, dates, events);\n'
            '- "opinion": a judgement, preference or recommendation;\n'
            '- "inference": a conclusion drawn from other claims;\n'
            '- "uncertain": hedged or speculative ("may", "probably", "I think").\n'
            "Answer with strict JSON only, no prose:\n"
            '{"claims": [{"claim": "<one claim>", "type": "factual" | "opinion" | '
            '"inference" | "uncertain"}]}')


def check_prompt(claims: Sequence[str], context: str) -> str:
    """The check call's user message: numbered claims, with the relevant context."""
    listed = "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))
    given = (f'Context:\n"""\n{context}\n"""\n\nJudge each claim against the context; '
             "where the context says nothing about it, use your own knowledge.\n\n"
             if context else "Judge each claim with your own knowledge.\n\n")
    return (f"{MARK_CHECK}\n\n{given}Claims:\n{listed}\n\n"
            "For each numbered claim: is it factually accurate? \"verified\": true only "
            "when you are confident it is accurate; false when it is wrong or you cannot "
            "tell. Answer with strict JSON only, one result per claim, no prose:\n"
            '{"results": [{"id": 1, "verified": true | false, '
            '"confidence": "high" | "medium" | "low"}]}')
