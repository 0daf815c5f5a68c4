"""What the modes and the actions need of a front door's response format.

The verification of an answer is format-free (a job's answer is read as a chat
completion: the layers see its text), but everything around it is not: how the
request's messages read, which upstream path answers it, what a readable answer
and a readable stream are, how a disclaimer is appended to *this* format's answer,
what *this* format's refusal is, how a held-back stream ends around the verdict.
A front door gives the modes and the actions a :class:`ResponseFormat`;
``gateway/wire/chat.py`` is the one for ``/v1/chat/completions``,
``gateway/wire/responses_format.py`` the one for ``/v1/responses``.

The modes hold answers in the format's own shape (``body``: what the upstream sent,
what the client gets) and hand the layers :meth:`ResponseFormat.job_answer` of it.

Adding a front door (Anthropic Messages, OpenAI Responses): a sibling module here
implementing :class:`ResponseFormat` for its shapes, a front door in
``gateway/http/`` that builds the request's exchange with its format and hands it
to the engine; ``gateway/modes/`` and ``gateway/verify/`` are not edited.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["EndWatch", "ResponseFormat", "StreamFold", "StreamHold", "StreamSummary"]


class StreamFold(Protocol):
    """A stream of the format folded into its answer as it arrives."""

    @property
    def id(self) -> str | None:
        """The answer's id, once seen."""
        ...

    @property
    def error(self) -> Any:
        """An in-band error ending the stream (the upstream failed it), else None."""
        ...

    @property
    def unreadable(self) -> int:
        """Events (or disagreements) whose content is not in :meth:`completion`: a
        stream with any is not verified."""
        ...

    @property
    def truncated(self) -> bool:
        """The stream ended without its end (read after the last byte)."""
        ...

    def feed_bytes(self, chunk: bytes) -> None:
        """Fold raw body bytes in (events may be split anywhere)."""
        ...

    def completion(self) -> dict[str, Any]:
        """The answer streamed so far, in the format's shape."""
        ...

    def drop_content(self) -> None:
        """Forget the answer gathered so far (over the size the gateway holds)."""
        ...


class StreamHold(Protocol):
    """``streaming: passthrough``: events relayed as they come, the tail a verdict may
    change held back until :meth:`end`."""

    @property
    def acc(self) -> StreamFold:
        """The answer, folded from every event fed."""
        ...

    def feed(self, data: bytes) -> bytes:
        """One event's ``data`` (as ``gateway.wire.sse.SSEParser`` yields it); the
        bytes to send now (``b""`` while holding)."""
        ...

    def end(self, *, action: str, text: str | None = None,
            verity: Mapping[str, Any] | None = None,
            error_body: Mapping[str, Any] | None = None) -> bytes:
        """The held tail around the verdict: ``disclaimer`` appends ``text`` to the
        answer, ``block`` sends ``text`` (the block message) as the answer's end,
        ``error_body`` (an OpenAI error body) ends the stream with an error; any other
        action sends the tail as it came. ``verity`` (the verdict) rides along where
        the format has room for it."""
        ...


class StreamSummary(Protocol):
    """What telemetry reads of a stream relayed without verification."""

    def feed_bytes(self, chunk: bytes) -> None:
        ...

    def completion(self) -> dict[str, Any]:
        ...


class EndWatch(Protocol):
    """Whether a stream relayed unparsed ended as a stream of the format ends (else
    the upstream just stopped: it was cut)."""

    def feed(self, chunk: bytes) -> None:
        """The next body bytes, as relayed."""
        ...

    def ended(self) -> bool:
        """After the last bytes: the stream reached its end."""
        ...


class ResponseFormat(Protocol):
    """One front door's request and response shapes (no I/O)."""

    name: str
    path: str
    """The upstream path that answers it, relative to ``/v1`` (``/chat/completions``)."""
    noun: str
    """What an answer is called in notes (``chat completion``, ``response``)."""
    chat_shaped: bool
    """Answers are chat completions already: telemetry reads them as they are (else
    through :meth:`job_answer`), and the pass-through relay tells a stream's end
    inline (:func:`gateway.wire.sse.ended_cleanly`) rather than through
    :meth:`end_watch` (the hot path: no call per chunk)."""

    # ---- the request -------------------------------------------------------------------

    def request_messages(self, payload: Mapping[str, Any]) -> list[Any]:
        """The request as chat-shaped messages: what the layers and the context read."""
        ...

    def unseen_context(self, payload: Mapping[str, Any]) -> str | None:
        """An audit note naming context the request points at but does not carry
        (server-side state the gateway cannot read), or None."""
        ...

    def structured(self, payload: Mapping[str, Any]) -> bool:
        """The client asked for JSON output (text appended to it would break parsing)."""
        ...

    def regenerate_body(self, payload: Mapping[str, Any], messages: list[Any], failed: str,
                        feedback: str, model: str | None) -> dict[str, Any]:
        """The request re-sent for a regenerate attempt: not streamed, the failed answer
        and the repair ``feedback`` added to its conversation, ``model`` when given."""
        ...

    # ---- answers -----------------------------------------------------------------------

    def is_answer(self, body: Any) -> bool:
        """``body`` (parsed JSON) is an answer of this format the layers can read."""
        ...

    def body_problem(self, data: bytes, parsed: Any) -> str:
        """Why ``data`` (a 2xx upstream body) is not such an answer (never quoting it)."""
        ...

    def job_answer(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``body`` as the chat completion the layers read (a verification job's answer)."""
        ...

    def answer_text(self, body: Mapping[str, Any]) -> str:
        """The text that is verified."""
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

    def with_text(self, body: Mapping[str, Any], text: str) -> dict[str, Any]:
        """``body`` whose verified answer text is ``text`` (an answer assembled by
        ``decompose-and-retry``); everything else kept."""
        ...

    # ---- streams -----------------------------------------------------------------------

    def stream_body(self, body: Mapping[str, Any], *, include_usage: bool) -> bytes:
        """The whole streamed response for ``body`` (a changed answer re-sent)."""
        ...

    def fold(self) -> StreamFold:
        """A new fold for one stream of this format."""
        ...

    def stream_problem(self, acc: Any) -> str:
        """Why a folded stream (:meth:`fold`'s) is not a readable stream of this format."""
        ...

    def hold(self) -> StreamHold:
        """A new passthrough hold-back for one stream of this format."""
        ...

    def summary(self) -> StreamSummary:
        """What telemetry keeps of a stream relayed unverified."""
        ...

    def end_watch(self) -> EndWatch:
        """A new end watch for one stream of this format, relayed unparsed."""
        ...

    def error_event(self, body: Mapping[str, Any], acc: Any = None) -> bytes:
        """The event that ends a stream with the gateway's error ``body`` (an OpenAI
        error body): the SDK raises ``APIError`` on it. ``acc``: the stream's fold,
        when it was folded (the event continues its numbering)."""
        ...
