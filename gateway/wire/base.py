"""What the modes and the actions need of a front door's response format.

The verification of an answer is format-free (a job's answer is read as a chat
completion: the layers see its text), but the responses built around a verdict are
not: a disclaimer is appended to *this* format's answer, a refusal is *this*
format's body, the verdict of a held-back stream goes out as *this* format's
events. A front door gives the modes and the actions a :class:`ResponseFormat`;
``gateway/wire/chat.py`` is the one for ``/v1/chat/completions``.

Adding a front door (Anthropic Messages, OpenAI Responses): a sibling module here
implementing :class:`ResponseFormat` for its shapes, a front door in
``gateway/http/`` that builds the request's :class:`~gateway.verify.job.
VerificationJob` (its answer translated to the chat completion the layers read)
and hands its format to the modes; ``gateway/modes/`` and ``gateway/verify/`` are
not edited.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["ResponseFormat"]


class ResponseFormat(Protocol):
    """One response shape: how answers are read and rewritten (no I/O)."""

    name: str

    def is_answer(self, body: Any) -> bool:
        """``body`` (parsed JSON) is an answer of this format the layers can read."""
        ...

    def answer_text(self, body: Mapping[str, Any]) -> str:
        """The text that is verified (the first choice's)."""
        ...

    def calls_only(self, body: Mapping[str, Any]) -> bool:
        """The answer is tool calls with no text (nothing to verify)."""
        ...

    def with_disclaimer(self, body: Mapping[str, Any], text: str) -> dict[str, Any]:
        """``body`` with ``text`` appended to the verified answer."""
        ...

    def refusal(self, body: Mapping[str, Any], message: str) -> dict[str, Any]:
        """A body of this format refusing with ``message`` (same id, model, usage)."""
        ...

    def stream_body(self, body: Mapping[str, Any], *, include_usage: bool) -> bytes:
        """The whole streamed response for ``body`` (a changed answer re-sent)."""
        ...

    def verdict_tail(self, tail: list[bytes], body: Mapping[str, Any], *, action: str,
                     text: str | None = None, verity: Mapping[str, Any] | None = None,
                     error_body: Mapping[str, Any] | None = None) -> bytes:
        """The held end of a relayed stream, rewritten around the verdict's addition."""
        ...
