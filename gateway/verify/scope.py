"""What the verifications of one job share, and the context size limit.

A job verifies one answer with its policy, then with each candidate policy. The
shipped default policy and its ``grounding`` candidate read the same context the
same way and run the same model-free layers with the same configuration: verified
one after the other from scratch, the answer and the context were analysed twice.
A :class:`JobScope` lives for one job (:meth:`Verifier.run
<gateway.verify.verifier.Verifier.run>` makes one) and keeps:

- **the grounding context** per (``context`` spec, corpus): extracted, bounded by
  ``context.max_chars`` (:func:`bounded_context`) and handed to every policy that
  reads it alike — so what the layers memoize on it (the context index, the answer's
  sentences and their analysis: ``GroundingContext.memo``) is built once;
- **model-free layer results** per (layer class, config, context, answer): a
  ``cpu_only`` layer configured as one that already ran on the same context and
  answer gets that result (recorded with ``cache_hit``) instead of running again.
  Model-based layers are not shared here (the judge's own cache serves identical
  temperature-0 prompts).

A layer result is a pure function of its input and configuration for ``cpu_only``
layers (``gateway.layers.base``), and the corpus a layer sees is the one its
context was extracted with, so sharing changes no verdict.

:func:`bounded_context` is also where ``context.max_chars`` is applied (inline
preparation, verification): over it, ``truncate`` keeps the first ``max_chars``
characters of the documents in order, ``skip`` and ``refuse`` keep none and say so
(:class:`Oversize`; the verifier turns it into "not verified" or a ``fail``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.layers.base import LayerConfig, LayerResult
from gateway.sources.context import ContextSpec, Document, GroundingContext, extract_context

__all__ = ["BoundedContext", "JobScope", "Oversize", "bounded_context", "bounded_plain", "truncate"]


@dataclass(frozen=True, slots=True)
class Oversize:
    """A context over ``context.max_chars``, and what the policy does with it."""

    chars: int
    limit: int
    action: str
    """``skip``, ``truncate`` or ``refuse`` (``context.on_oversize``)."""

    def note(self) -> str:
        what = f"the context ({self.chars} characters) is over context.max_chars ({self.limit})"
        if self.action == "truncate":
            return f"{what}: verified against its first {self.limit} characters"
        if self.action == "refuse":
            return f"{what}: refused"
        return f"not verified: {what}"


@dataclass(frozen=True, slots=True)
class BoundedContext:
    context: GroundingContext
    oversize: Oversize | None = None


def truncate(context: GroundingContext, limit: int) -> GroundingContext:
    """The first ``limit`` characters of ``context``'s documents, in order (the last one
    kept is cut; the rest dropped); its corpus as is."""
    docs: list[Document] = []
    left = limit
    for doc in context.documents:
        if left <= 0:
            break
        text = doc.text if len(doc.text) <= left else doc.text[:left]
        docs.append(doc if text is doc.text else Document(doc.id, text, doc.kind, doc.attrs))
        left -= len(text)
    return GroundingContext(documents=docs, corpus=context.corpus)


def bounded_context(messages: Sequence[Mapping[str, Any]], spec: ContextSpec,
                    corpus: Mapping[str, str] | None) -> BoundedContext:
    """The grounding context of ``messages`` per ``spec``, within ``spec.max_chars``.

    The documents of a context given wholly by system messages (RAG: the same
    documents resent) are kept per text and ``spec`` (:func:`_kept_documents`): a
    fresh :class:`GroundingContext` around them (its memo is the request's own)."""
    texts = _system_texts(messages)
    if texts is not None and KEEP_MIN_CHARS <= sum(map(len, texts)) <= KEEP_MAX_CHARS:
        docs, over = _kept_documents(messages, spec, texts)
        return BoundedContext(GroundingContext(
            documents=list(docs), corpus=corpus if corpus is not None else {}), over)
    return bounded_plain(messages, spec, corpus)


def bounded_plain(messages: Sequence[Mapping[str, Any]], spec: ContextSpec,
                  corpus: Mapping[str, str] | None) -> BoundedContext:
    """:func:`bounded_context` extracted afresh (nothing kept): the reference."""
    context = extract_context(messages, spec, corpus)
    limit = spec.max_chars
    if limit is None:
        return BoundedContext(context)
    chars = sum(len(d.text) for d in context.documents)
    if chars <= limit:
        return BoundedContext(context)
    over = Oversize(chars, limit, spec.on_oversize)
    if over.action == "truncate":
        return BoundedContext(truncate(context, limit), over)
    return BoundedContext(GroundingContext(corpus=context.corpus), over)


_KEPT: dict[tuple[int, tuple[str, ...]],
            tuple[ContextSpec, tuple[Document, ...], Oversize | None]] = {}
_kept_chars = [0]
KEEP_MIN_CHARS = 1_000
"""Shorter system texts are extracted again (a look-up costs about what that does)."""
KEEP_MAX_CHARS = 200_000
"""Nor are longer ones kept (the default ``context.max_chars``)."""
KEEP_TOTAL_CHARS = 2_000_000
"""The kept texts' characters, at most (the oldest go first)."""


def _system_texts(messages: Sequence[Mapping[str, Any]]) -> tuple[str, ...] | None:
    """The system and developer messages' texts, when they alone decide the context
    :func:`extract_context` finds (for any ``spec``): every message a plain ``dict``,
    each system/developer one with string content, each other one giving no document
    (no content, or a string with no ``<`` — so no block — from neither a tool nor a
    function). Else None (extracted afresh: the key is never the question)."""
    texts: list[str] = []
    for message in messages:
        if type(message) is not dict:
            return None
        role, content = message.get("role"), message.get("content")
        if role == "system" or role == "developer":
            if type(content) is not str:
                return None
            texts.append(content)
        elif content is not None and (type(content) is not str or "<" in content
                                      or role == "tool" or role == "function"):
            return None
    return tuple(texts)


def _kept_documents(messages: Sequence[Mapping[str, Any]], spec: ContextSpec,
                    texts: tuple[str, ...]) -> tuple[tuple[Document, ...], Oversize | None]:
    """The bounded documents of ``messages`` (whose context ``texts`` decide), kept per
    ``spec`` object (a reload makes new ones) and texts. Documents are frozen and the
    blocks' attribute dicts already shared (``split_blocks_kept``): never changed."""
    key = (id(spec), texts)
    hit = _KEPT.get(key)
    if hit is not None and hit[0] is spec:
        return hit[1], hit[2]
    bounded = bounded_plain(messages, spec, None)
    docs = tuple(bounded.context.documents)
    size = sum(map(len, texts))
    if hit is None:  # else a new spec at a freed one's id: replaced, counted once
        _kept_chars[0] += size
    _KEPT[key] = (spec, docs, bounded.oversize)
    while _kept_chars[0] > KEEP_TOTAL_CHARS and _KEPT:  # oldest first (insertion order)
        old_key = next(iter(_KEPT))
        if _KEPT.pop(old_key, None) is not None:
            _kept_chars[0] -= sum(map(len, old_key[1]))
    return docs, bounded.oversize


def _same_corpus(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    return a is b or (not a and not b)


_EQUAL: dict[tuple[int, int], tuple[object, object, bool]] = {}
"""``a == b`` of two policy settings objects, by identity (the objects are kept, so
an id is not reused while its entry lives)."""
_EQUAL_MAX = 1024


def _equal(a: object, b: object) -> bool:
    """``a == b`` for two frozen settings models of loaded policies (a ``ContextSpec``,
    a layer's config): a policy's and its candidate's are compared for every job, and
    pydantic's ``==`` walks every field; the answer for the same two objects is kept
    (a loaded policy's settings are never changed: a reload makes new objects)."""
    if a is b:
        return True
    key = (id(a), id(b))
    hit = _EQUAL.get(key)
    if hit is not None and hit[0] is a and hit[1] is b:
        return hit[2]
    same = a == b
    if len(_EQUAL) >= _EQUAL_MAX:  # policies reloaded many times: start again
        _EQUAL.clear()
    _EQUAL[key] = (a, b, same)
    return same


class JobScope:
    """The work the verifications of one job share (see the module docstring)."""

    __slots__ = ("_contexts", "_results")

    def __init__(self) -> None:
        self._contexts: list[tuple[ContextSpec, Mapping[str, str], BoundedContext]] = []
        self._results: list[tuple[type, LayerConfig, GroundingContext, str, LayerResult]] = []

    def context(self, messages: Sequence[Mapping[str, Any]], spec: ContextSpec,
                corpus: Mapping[str, str]) -> BoundedContext:
        """The bounded context for ``spec`` and ``corpus``, extracted on first use."""
        for s, c, bounded in self._contexts:
            if _same_corpus(c, corpus) and _equal(s, spec):
                return bounded
        bounded = bounded_context(messages, spec, corpus)
        self._contexts.append((spec, corpus, bounded))
        return bounded

    def result(self, cls: type, config: LayerConfig, context: GroundingContext,
               answer: str) -> LayerResult | None:
        """The result of a ``cls`` layer configured as ``config`` that already ran on
        this context (the same object) and answer, if any."""
        for c, cfg, ctx, text, result in self._results:
            if c is cls and ctx is context and text == answer and _equal(cfg, config):
                return result
        return None

    def keep(self, cls: type, config: LayerConfig, context: GroundingContext, answer: str,
             result: LayerResult) -> None:
        self._results.append((cls, config, context, answer, result))
