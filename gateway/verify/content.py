"""Message content in the record and the trace: only when the policy opts in.

A policy's ``telemetry.record_content`` decides whether the request's messages and
the answer are recorded (the audit record's ``content``, the trace's GenAI message
attributes), and its ``telemetry.redact`` patterns are applied on top of the
default hook (:func:`gateway.redact.redact_secrets`). Failed claims are content too
(answer sentences): the outcome keeps them only through the same redaction
(``Outcome.redact``; see ``gateway.verify.outcome``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gateway.redact import Redactor, redact_secrets
from gateway.sources.context import message_text
from gateway.telemetry import RequestTrace

if TYPE_CHECKING:
    from gateway.policy.loader import Policy
    from gateway.verify.outcome import Outcome

__all__ = ["content_redactor", "record_content"]


def content_redactor(policy: Policy) -> Redactor | None:
    """The policy's content redaction (default hook, then its patterns), or None when
    the policy does not record content."""
    spec = policy.spec.telemetry
    if not spec.record_content:
        return None
    patterns = [re.compile(p) for p in spec.redact]

    def redact(text: str) -> str:
        text = redact_secrets(text)
        for p in patterns:
            text = p.sub("[REDACTED]", text)
        return text

    return redact


def record_content(policy: Policy, outcome: Outcome, trace: RequestTrace,
                   messages: Sequence[Mapping[str, Any]], output: str) -> None:
    """Message content in the record and trace, only when the policy opts in."""
    redact = content_redactor(policy)
    if redact is None:
        return
    outcome.content = {
        "messages": [{"role": m.get("role"), "content": redact(message_text(m))}
                     for m in messages if isinstance(m, Mapping)],
        "output": redact(output),
    }
    outcome.redact = redact  # failed claims are content: recorded only now, redacted
    trace.content(messages, output, redact)
