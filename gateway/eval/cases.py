"""Labeled evaluation cases: load them from JSONL and turn one into chat traffic.

The format is documented in ``docs/evaluation.md`` (the shipped sets are
``data/halueval/halueval-dev.jsonl`` and ``tests/data/rag-dev.jsonl``): one JSON
object per line with ``id``, ``source``, ``context_input``, ``question``,
``model_output`` and ``label`` (``faithful`` | ``hallucinated``), optionally
``kind`` (the error or hard-negative kind; ``gateway eval`` then reports per
kind) and ``note`` (free text, ignored). Seed 002-style cases may give ``expected_credit_score`` (1–5) instead of or
beside ``label`` (4–5 → faithful, 1–3 → hallucinated); ``gateway eval`` then
also reports the zone confusion matrix.

A case becomes traffic as: the context (verbatim) as the system message (the text
the assistant must answer from), the question as the user message, and
``model_output`` as the assistant's answer (:func:`to_messages`). The system
message carries no instruction text, so nothing but the context is grounding.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Case", "CaseError", "group_key", "iter_cases", "load_cases", "to_messages"]

LABELS = ("faithful", "hallucinated")
_ROW = re.compile(r"^(?P<group>.+)-(?:faithful|hallucinated)$")


class CaseError(ValueError):
    """A case file line is not a valid case; the message names file and line."""


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    source: str
    context: str
    question: str
    answer: str
    label: str
    expected_credit_score: int | None = None
    """Seed 002 1–5 label, when the case file gives one (zone confusion metrics)."""
    kind: str | None = None
    """The error kind (hallucinated) or hard-negative kind (faithful) the case tests,
    when the case file names one (per-kind metrics)."""

    @property
    def hallucinated(self) -> bool:
        return self.label == "hallucinated"


def _parse(obj: Any, where: str) -> Case:
    if not isinstance(obj, dict):
        raise CaseError(f"{where}: expected a JSON object")
    credit = obj.get("expected_credit_score")
    if credit is not None and (not isinstance(credit, int) or not 1 <= credit <= 5):
        raise CaseError(f"{where}: expected_credit_score must be an integer 1-5, got {credit!r}")
    if credit is not None and "label" not in obj:
        # Seed 002: 4-5 is GOOD (at most one low-severity deviation); 1-3 has errors.
        obj = {**obj, "label": "faithful" if credit >= 4 else "hallucinated"}
    if isinstance(obj.get("id"), int):
        obj = {**obj, "id": str(obj["id"])}
    if credit is not None and "question" not in obj:  # seed 002 cases audit a given output
        obj = {**obj, "question": ""}
    missing = [k for k in ("id", "context_input", "question", "model_output", "label")
               if not isinstance(obj.get(k), str)]
    if missing:
        raise CaseError(f"{where}: missing or non-string field(s): {', '.join(missing)}")
    if obj["label"] not in LABELS:
        raise CaseError(f"{where}: label must be one of {LABELS}, got {obj['label']!r}")
    kind = obj.get("kind")
    if kind is not None and (not isinstance(kind, str) or not kind.strip()):
        raise CaseError(f"{where}: kind must be a non-empty string, got {kind!r}")
    return Case(
        id=obj["id"], source=str(obj.get("source") or obj.get("tag") or "unknown"),
        context=obj["context_input"], question=obj["question"],
        answer=obj["model_output"], label=obj["label"], expected_credit_score=credit,
        kind=kind,
    )


def iter_cases(path: str | Path) -> Iterator[Case]:
    """Yield the cases of a JSONL file; blank lines are skipped."""
    with Path(path).open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CaseError(f"{path}:{n}: invalid JSON: {exc.msg}") from exc
            yield _parse(obj, f"{path}:{n}")


def load_cases(path: str | Path, source: str | None = None) -> list[Case]:
    """All cases of a JSONL file, optionally only those whose ``source`` matches."""
    return [c for c in iter_cases(path) if source is None or c.source == source]


def to_messages(case: Case) -> list[dict[str, str]]:
    """The chat ``messages`` for a case: context as system message, question as user."""
    return [
        {"role": "system", "content": case.context},
        {"role": "user", "content": case.question},
    ]


def group_key(case: Case) -> str:
    """The id without its label suffix: both answers of one data row share it.

    ``halueval-qa-8879-faithful`` -> ``halueval-qa-8879``. Splits for
    cross-validation must keep a group together.
    """
    m = _ROW.match(case.id)
    return m.group("group") if m else case.id
