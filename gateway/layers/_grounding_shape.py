"""The shape of a request, for the ``grounding`` layer's per-shape calibration.

The layer never knows the task, but three request shapes that need different
operating points can be told from what every request shows:

- ``document`` — a long context (more than ``long_context_sentences`` sentences: an
  article to summarize, a manual): a competing value, name or clause turns up by
  chance, so contradictions are weak evidence there, and answers paraphrase freely;
- ``conversation`` — earlier turns are present (an assistant message before the last
  user message, or a user message quoting two or more speaker turns such as
  ``[Human]:`` / ``User:``): a reply brings in names and small talk of its own;
- ``passage`` — anything else: a question answered from a short context.

The layer scales its evidence by ``shape_scale[shape]`` (fitted so that one policy
threshold flags about the same small share of faithful answers in every shape;
docs/layers.md has the fit and its cross-validation).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["SHAPES", "request_shape"]

SHAPES = ("passage", "conversation", "document")
_TURN = re.compile(r"(?:^|[\s\[(])(?:human|user|assistant|ai|bot|customer|agent|system)"
                   r"\]?\s*:", re.IGNORECASE)


def request_shape(messages: Sequence[Mapping[str, Any]], question: str, n_context_sentences: int,
                  long_context_sentences: int) -> str:
    """``document``, ``conversation`` or ``passage`` (see the module docstring)."""
    if n_context_sentences > long_context_sentences:
        return "document"
    roles = [m.get("role") for m in messages if isinstance(m, Mapping)]
    last_user = max((i for i, r in enumerate(roles) if r == "user"), default=-1)
    if any(r == "assistant" for r in roles[:last_user]):
        return "conversation"
    if len(_TURN.findall(question)) >= 2:
        return "conversation"
    return "passage"
