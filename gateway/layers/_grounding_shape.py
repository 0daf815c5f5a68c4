"""The shape of a request, for the ``grounding`` layer's per-shape calibration.

The layer never knows the task, but three request shapes that need different
operating points can be told from what every request shows:

- ``document`` — a long context (more than ``long_context_sentences`` sentences: an
  article to summarize, a manual): a competing value, name or clause turns up by
  chance, so contradictions are weak evidence there, and answers paraphrase freely;
  also a request for a summary (``gateway.text.task``) of a context of more than
  ``summary_context_sentences`` sentences: it is calibrated as a document (a summary
  renames and compresses), but its contradictions stay strong (the context is short
  enough that a competing slot is not there by chance);
- ``conversation`` — the dialogue task (``gateway.text.task``: an assistant message
  before the last user message, or a user message quoting two or more speaker turns
  such as ``[Human]:`` / ``User:``): a reply brings in names and small talk of its own;
- ``passage`` — anything else: a question answered from a short context.

The layer scales its evidence by ``shape_scale[shape]`` (fitted so that one policy
threshold flags about the same small share of faithful answers in every shape;
docs/layers.md has the fit and its cross-validation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.text.task import request_task

__all__ = ["SHAPES", "request_shape"]

SHAPES = ("passage", "conversation", "document")


def request_shape(messages: Sequence[Mapping[str, Any]], question: str, n_context_sentences: int,
                  long_context_sentences: int, summary_sentences: int | None = None) -> str:
    """``document``, ``conversation`` or ``passage`` (see the module docstring).

    The task is read from the request (``gateway.text.task``); a summary asked of a
    context of more than ``summary_sentences`` sentences (``None``: the same bound as
    any other request) is a ``document``."""
    if n_context_sentences > long_context_sentences:
        return "document"  # whatever the task (not read then)
    task = request_task(messages, question)
    if task == "summary" and summary_sentences is not None \
            and n_context_sentences > summary_sentences:
        return "document"
    return "conversation" if task == "dialogue" else "passage"
