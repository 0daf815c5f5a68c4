"""What the text library asks of a per-request memo, as a Protocol.

The grounding context (:class:`gateway.sources.context.GroundingContext`) is one: the
layers of one request share the answer's analysis (:func:`gateway.text.answer.
answer_sentences`) and the context's index (:func:`gateway.text.index.context_index`)
through it. Stated here, structurally, so that ``gateway.text`` imports nothing of
the gateway above it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = ["Memo", "TextDocument", "TextSource"]


class Memo(Protocol):
    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        """``build()`` once per request under ``key``; later calls return that value."""
        ...


class TextDocument(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def text(self) -> str: ...


class TextSource(Memo, Protocol):
    """A memo over documents: what :func:`gateway.text.index.context_index` indexes."""

    @property
    def documents(self) -> Sequence[TextDocument]: ...
