"""The task a request asks for, told from the request's own text.

Verification needs a different operating point per task (a summary renames and
compresses freely; a dialogue reply brings in small talk and names of its own; a
question answered from a passage should stay inside it), but the gateway is never
told the task. What it can read is the request's shape:

- ``summary`` — the user asks for a summary, a recap, a gist, the key points, a TL;DR
  or to condense the text (a verb or noun of summarising in the question; "answer in
  one sentence" is a length limit, not a summary);
- ``dialogue`` — the question quotes two or more speaker turns (``[Human]:``,
  ``User:``, ``Assistant:`` …) or opens with a user's speaker label (a one-turn
  transcript: "[Human]: Do you know …?"), or an assistant turn precedes the last user
  message;
- ``qa`` — anything else: a question (or an instruction) answered from a context.

Only the *form* of the request is read: no topic words, no list of data-set prompts.
``gateway.layers._grounding_shape`` maps the task (and the context's length) to the
grounding layer's calibration shape.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

__all__ = ["TASKS", "Task", "is_summary_request", "request_task", "speaker_turns"]

Task = Literal["summary", "dialogue", "qa"]
TASKS: tuple[Task, ...] = ("summary", "dialogue", "qa")

MAX_SCAN_CHARS = 4000
"""Only this many characters at the end of the question are read (the instruction is
at the end of a long pasted request; bounded work on hostile input)."""

_SUMMARY = re.compile(
    r"\b(?:summari[sz](?:e|es|ed|ing|ation)|summary|summaries|sum\s+(?:it\s+|this\s+|that\s+)?up"
    r"|recap(?:itulate)?|tl;?\s?dr|gist|condense|synopsis|abstract\s+of"
    r"|key\s+(?:points|takeaways)|main\s+points)\b",
    re.IGNORECASE)
_TURN = re.compile(r"(?:^|[\s\[(])(?:human|user|assistant|ai|bot|customer|agent|system)"
                   r"\]?\s*:", re.IGNORECASE)


_OPENING_TURN = re.compile(r"\A\s*\[?(?:human|user|customer)\]?\s*:", re.IGNORECASE)
"""A user message that *opens* with a speaker label ("[Human]: Do you know …?") is a
transcript to continue, even with one turn quoted."""


def speaker_turns(text: str) -> int:
    """How many speaker-turn labels (``[Human]:``, ``User:`` …) ``text`` quotes."""
    return len(_TURN.findall(text[-MAX_SCAN_CHARS:]))


def is_summary_request(question: str) -> bool:
    """Does the user ask for a summary (recap, gist, key points, TL;DR, "in a few
    sentences")? Read on the end of the question only."""
    return _SUMMARY.search(question[-MAX_SCAN_CHARS:]) is not None


def request_task(messages: Sequence[Mapping[str, Any]], question: str) -> Task:
    """``summary``, ``dialogue`` or ``qa`` (module docstring). A quoted conversation
    wins over a summary word inside it ("[User]: can you sum up…" is still a turn)."""
    roles = [m.get("role") for m in messages if isinstance(m, (dict, Mapping))]
    last_user = max((i for i, r in enumerate(roles) if r == "user"), default=-1)
    if any(r == "assistant" for r in roles[:last_user]) or speaker_turns(question) >= 2 \
            or _OPENING_TURN.match(question):
        return "dialogue"
    if is_summary_request(question):
        return "summary"
    return "qa"
