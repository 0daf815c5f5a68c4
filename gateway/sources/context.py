"""Grounding context: where a policy finds the text an answer must be faithful to.

A policy's ``context`` section (:class:`ContextSpec`) names the sources:

- ``system`` — the system/developer messages' text;
- ``blocks`` — delimited blocks inside any message, e.g. ``<context>…</context>``
  or ``<document id="x">…</document>`` (tags configurable);
- ``tools`` — tool-result messages (``role: tool``, and the deprecated
  function-calling results, ``role: function``);
- ``corpus`` — a configured directory of text / JSONL documents keyed by source id
  (used to resolve citations; see ``gateway.sources.corpus``).

:func:`extract_context` turns a request's messages into a :class:`GroundingContext`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_MAX_CONTEXT_CHARS", "ContextSpec", "Document", "GroundingContext", "extract_context", "message_text"]

ContextSource = Literal["system", "blocks", "tools", "corpus"]

DEFAULT_MAX_CONTEXT_CHARS = 200_000
"""``context.max_chars`` by default: ~30,000 words, ~0.2 s of the model-free layers."""


class ContextSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sources: tuple[ContextSource, ...] = ("system", "blocks", "tools")
    block_tags: tuple[str, ...] = Field(default=("context", "document", "source"))
    """Tag names recognised as delimited context blocks: ``<tag ...>…</tag>``."""
    corpus_dir: str | None = None
    """Directory of ``*.txt`` / ``*.md`` (id = file stem) and ``*.jsonl``
    (``{"id", "text", …metadata}``); see ``gateway.sources.corpus``."""
    max_chars: int | None = Field(DEFAULT_MAX_CONTEXT_CHARS, ge=1)
    """Largest grounding context verified (its documents' text, in characters); None:
    no limit. The model-free layers cost about 0.9 ms per 1,000 context characters."""
    on_oversize: Literal["skip", "truncate", "refuse"] = "skip"
    """A context over ``max_chars``: ``skip`` — not verified (a pass with no score, the
    record says why); ``truncate`` — verify against its first ``max_chars`` characters;
    ``refuse`` — the verdict is ``fail`` (the ``fail`` action applies)."""


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    text: str
    kind: str
    """``system`` | ``block`` | ``tool`` | ``corpus``."""
    attrs: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class GroundingContext:
    documents: list[Document] = field(default_factory=list)
    corpus: Mapping[str, str] = field(default_factory=dict)
    """Source id -> text, for citation resolution (not searched for grounding)."""
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)
    """Per-request memo shared by layers (e.g. a built index); keyed by layer-chosen name."""

    @property
    def text(self) -> str:
        return "\n\n".join(d.text for d in self.documents)

    def __bool__(self) -> bool:
        return bool(self.documents)

    def memo(self, key: str, build: Any) -> Any:
        """Return ``build()`` once per request under ``key`` (an index, tokens, …)."""
        cache = self._cache
        value = cache.get(key, _MISSING)  # (no KeyError raised on the first look-up)
        if value is _MISSING:
            value = cache[key] = build()
        return value


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text: string content, or its text parts joined (images etc. left out).

    Never raises: anything else (not an object, content of another type, parts that
    are not text objects) has no text."""
    # dict first: a JSON body's objects are dicts; the ABC check alone costs 4x
    if not isinstance(message, (dict, Mapping)):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "\n".join(
            text
            for part in content
            if isinstance(part, Mapping) and part.get("type") in ("text", "input_text")
            and isinstance(text := part.get("text"), str)
        )
    return ""


_SCANNERS: list[Any] = []
_MISSING = object()


def _block_scanners() -> tuple[Any, Any]:
    """``gateway.sources.blocks``' ``find_blocks`` and ``split_blocks_kept``, imported on first
    use (keeps the import off pass-through) and then kept: an import statement in the
    function ran the import machinery on every request (~1 % of a warm verification)."""
    if not _SCANNERS:
        from gateway.sources.blocks import find_blocks, split_blocks_kept
        _SCANNERS.extend((find_blocks, split_blocks_kept))
    return _SCANNERS[0], _SCANNERS[1]


def extract_context(
    messages: Sequence[Mapping[str, Any]],
    spec: ContextSpec,
    corpus: Mapping[str, str] | None = None,
) -> GroundingContext:
    """Collect the grounding documents named by ``spec`` from ``messages``.

    Never raises on a message's shape: one that is not an object, or has no text, adds
    nothing (the proxy rejects the invalid shapes before a policy sees them)."""
    find_blocks, split_blocks_kept = _block_scanners()
    docs: list[Document] = []
    n = 0
    sources, tags = spec.sources, spec.block_tags
    want_blocks, want_system = "blocks" in sources, "system" in sources
    for message in messages:
        if not isinstance(message, (dict, Mapping)):
            continue
        role = message.get("role")
        text = message_text(message)
        if not text:
            continue
        system = role in ("system", "developer")
        rest = text
        blocks: Sequence[tuple[str, dict[str, str], str]] = ()
        if want_blocks and system and want_system:  # its blocks and the rest: one scan
            blocks, rest = split_blocks_kept(text, tags)
        elif want_blocks:
            blocks = find_blocks(text, tags)
        for tag, attrs, body in blocks:
            n += 1
            docs.append(Document(id=attrs.get("id") or f"{tag}-{n}", text=body,
                                 kind="block", attrs=attrs))
        if system and want_system:
            # A system message made only of blocks is not counted twice (``rest``: the
            # text without its blocks).
            if rest.strip():
                n += 1
                docs.append(Document(id=f"system-{n}", text=rest, kind="system"))
        elif role == "tool" and "tools" in spec.sources and not blocks:
            n += 1
            docs.append(Document(id=str(message.get("tool_call_id") or f"tool-{n}"),
                                 text=text, kind="tool"))
        elif role == "function" and "tools" in spec.sources and not blocks:
            # A legacy function-calling result: no call id; the function's name (not
            # unique: one function may be called twice) goes in ``attrs``.
            n += 1
            name = message.get("name")
            docs.append(Document(id=f"function-{n}", text=text, kind="tool",
                                 attrs={"name": name} if isinstance(name, str) and name
                                 else {}))
    # The corpus mapping is shared as is (no per-request copy; keeps ``Corpus.meta``).
    return GroundingContext(documents=docs, corpus=corpus if corpus is not None else {})
