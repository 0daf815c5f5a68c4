"""What may be recorded: redaction of secrets, and failures described without model text.

Two jobs of one rule — free text the gateway records (audit, spans, logs, error
bodies) never carries credentials and never quotes model text unless a policy opts
into recording content:

- :func:`redact_secrets` — the default redaction hook (:data:`Redactor`): masks API
  keys, bearer tokens and e-mail addresses. Policies add their own patterns on top.

A layer's error is recorded always — the audit record, the ``verify <layer>`` span's
``verity.layer.error``, ``{reasons}`` in a ``fail_closed`` block message and the
``x-verity-detail`` body — whether or not the policy records content. So an error
names *what* failed ("judge reply is not JSON (412 chars)", "missing key 'verdict'"),
never the judge's or the upstream's words: those may be the answer, verbatim.

- :func:`shape` — a JSON value a judge gave, as its type and size (``a string of
  7 chars``, ``an object with 2 key(s)``), for messages about an unusable value.
- :func:`exception_summary` — an exception that is not one of ours (a bug, or a
  library error such as ``float('…')``'s ``ValueError``, whose message quotes its
  input): its type and where it was raised, never its message.
- :func:`exception_trace` — the same for a log line: the traceback's frames (code
  locations and source lines) without any exception's message.

:class:`~gateway.layers.base.JudgeError` and
:class:`~gateway.layers.base.LayerUnavailable` messages are the gateway's own words
and are recorded as they are; building them from these helpers keeps them so.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable, Mapping
from pathlib import PurePath

__all__ = ["Redactor", "exception_summary", "exception_trace", "redact_secrets", "shape"]

Redactor = Callable[[str], str]
"""Redaction hook: takes a content string, returns what may be recorded."""

_SECRET = re.compile(
    r"(?i)(?:\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}"            # OpenAI-style keys
    r"|\bsk-ant-[A-Za-z0-9_\-]{8,}"                       # Anthropic keys
    r"|\bbearer\s+[A-Za-z0-9._~+/=\-]{8,}"                # Authorization values
    r"|\b(?:api[-_]?key|authorization|x-api-key)[\"']?\s*[:=]\s*[\"']?[^\s\"',;]{4,})")
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")


def redact_secrets(text: str) -> str:
    """Default redaction hook: masks API keys, bearer tokens and e-mail addresses."""
    if text.isascii() and "@" not in text:
        # Every match of _SECRET holds one of these (in any case) and every e-mail an
        # "@": without them neither pattern can match, and the text is returned as
        # is without the scan (~15 us for a layer's explanation; several per record).
        # ASCII only: case-insensitive matching also pairs "k" with the Kelvin sign,
        # "s" with a long s and "i" with a dotless i, which lower() does not.
        low = text.lower()
        if "k-" not in low and "api" not in low and "bearer" not in low \
                and "authorization" not in low:
            return text
    return _EMAIL.sub("[EMAIL]", _SECRET.sub("[REDACTED]", text))


def shape(value: object) -> str:
    """``value``'s JSON type and size, without its content."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return f"a string of {len(value)} chars" if value else "an empty string"
    if isinstance(value, Mapping):
        return f"an object with {len(value)} key(s)"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} item(s)"
    return f"a {type(value).__name__}"


def _origin(exc: BaseException) -> str:
    """``module.py:line`` of the innermost frame that raised ``exc`` ('' if unknown)."""
    tb = exc.__traceback__
    if tb is None:
        return ""
    frames = traceback.extract_tb(tb)
    if not frames:
        return ""
    last = frames[-1]
    return f"{PurePath(last.filename).name}:{last.lineno}"


def exception_summary(exc: BaseException) -> str:
    """``ValueError raised at nli.py:312``: the type and origin, never the message."""
    where = _origin(exc)
    name = type(exc).__name__
    return f"{name} raised at {where}" if where else name


def exception_trace(exc: BaseException) -> str:
    """A traceback for the log without messages: the frames of ``exc`` and of the
    exceptions chained to it (``raise … from``, or raised while handling), innermost
    call last, each ending with the exception's type only."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = "".join(traceback.format_list(traceback.extract_tb(current.__traceback__)))
        parts.append(f"Traceback (most recent call last):\n{frames}"
                     f"{type(current).__module__}.{type(current).__qualname__}"
                     " (message withheld: it may quote model text)")
        current = current.__cause__ or current.__context__
    return "\n\nchained to:\n\n".join(parts)
