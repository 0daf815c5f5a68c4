"""Shared plumbing of the model-based layers (``nli``, ``self-consistency``,
``semantic-entropy``, ``audit``, ``fact-check``): getting the judge, accounting for
its calls, asking for JSON by a :class:`ReplySchema` and reading it (leniently, with
one repair call quoting the problem: :meth:`JudgeTally.ask_parsed`), and picking
what to send.

Nothing here decides a verdict; each layer module owns its prompt and scoring.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from gateway.layers._citation_pairs import checkable
from gateway.layers._json_reply import arr, ids, obj, parse_json_reply, salvage_cut
from gateway.layers.base import (
    Judge,
    JudgeError,
    JudgeReply,
    LayerResources,
    LayerResult,
    LayerUnavailable,
    judge_usage,
)
from gateway.redact import shape
from gateway.text.tokens import content_words, split_sentences, tokenize

__all__ = ["CONFIDENCE", "CUT_PROBLEM", "REPAIR_NOTE", "JudgeTally", "numbered_schema", "ReplySchema", "answer_claims", "confidence",
           "excerpt", "numbered_items", "parse_json_reply", "repair_messages", "require_judge",
           "settle", "yes_no"]

T = TypeVar("T")

CUT_PROBLEM = ("your reply was cut at the length limit: write fewer and shorter items "
               "(each string under 15 words)")
"""The repair note's problem for a reply cut at ``max_tokens`` (calls that salvage)."""

REPAIR_NOTE = ("Your previous reply could not be used: {problem}. Reply again with JSON "
               "only, exactly in the format asked above.")
"""The one repair retry's added text: our description of the problem, never the reply."""


@dataclass(frozen=True, slots=True)
class ReplySchema:
    """The JSON Schema one judge call's reply must follow, and its name (the
    ``json_schema.name`` / Anthropic tool name). Each layer builds it per call beside
    its prompt (the item count and ids are part of it)."""

    name: str
    schema: dict[str, Any]


CONFIDENCE: dict[str, Any] = {"enum": ["high", "medium", "low"]}
"""A judged confidence in a reply schema: one word (one token), read by
:func:`confidence` as 0.9 / 0.6 / 0.3; numbers are still accepted in prompt-only mode."""


def numbered_schema(name: str, count: int, props: dict[str, Any],
                    key: str = "results") -> ReplySchema:
    """``{key: [{"id": 1..count, **props}]}`` with exactly ``count`` items (the reply
    :func:`numbered_items` reads)."""
    item = obj({"id": ids(range(1, count + 1)), **props})
    return ReplySchema(name, obj({key: arr(item, count, count)}))


def repair_messages(messages: Sequence[Mapping[str, Any]],
                    problem: str) -> list[Mapping[str, Any]]:
    """``messages`` with the repair note added to the last user turn (one more turn of
    the same role would be rejected or merged by some chat templates)."""
    note = REPAIR_NOTE.format(problem=problem)
    out = list(messages)
    for i in range(len(out) - 1, -1, -1):
        if out[i].get("role") == "user" and isinstance(out[i].get("content"), str):
            out[i] = {**out[i], "content": f"{out[i]['content']}\n\n{note}"}
            return out
    return [*out, {"role": "user", "content": note}]


_WORDS = {"high": 0.9, "medium": 0.6, "moderate": 0.6, "low": 0.3}

NO_JUDGE = "needs a judge: configure `judge` in the gateway config"

def require_judge(resources: LayerResources) -> Judge:
    if resources.judge is None:
        raise LayerUnavailable(NO_JUDGE)
    return resources.judge


@dataclass(slots=True)
class JudgeTally:
    """Counts one layer run's judge calls, their cost, the models that answered and
    whether all were cached. ``model`` is the request's model (the judge's fallback)."""

    judge: Judge
    model: str
    calls: int = 0
    cached: int = 0
    cost: float = 0.0
    models: list[str] = field(default_factory=list)
    repairs: int = 0
    """Repair calls made (each also counted in ``calls``)."""
    salvaged: int = 0
    """Replies cut at ``max_tokens`` read up to their last complete item."""

    async def ask(self, messages: Sequence[Mapping[str, Any]], *, temperature: float = 0.0,
                  max_tokens: int = 512, n: int = 1, override: str | None = None,
                  schema: ReplySchema | None = None) -> JudgeReply:
        # Counted when made, and reported to the pipeline's meter as it happens: a
        # call whose reply then breaks the layer (or that times out) was still made,
        # and a reply still billed.
        usage = judge_usage()
        self.calls += 1
        if usage is not None:
            usage.called()
        extra: dict[str, Any] = {}
        if schema is not None and getattr(self.judge, "accepts_schema", False):
            extra = {"schema": schema.schema, "schema_name": schema.name}
        reply = await self.judge.complete(messages, temperature=temperature,
                                          max_tokens=max_tokens, n=n,
                                          model=self.model or None, override=override,
                                          **extra)
        if usage is not None:
            usage.replied(reply)
        self.cached += bool(reply.cached)
        self.cost += reply.cost
        self.models.append(reply.model)
        return reply

    async def ask_parsed(self, messages: Sequence[Mapping[str, Any]],
                         parse: Callable[[Any], T], *, schema: ReplySchema | None,
                         max_tokens: int, temperature: float = 0.0,
                         override: str | None = None,
                         salvage: Callable[[Any], T] | None = None) -> T:
        """Ask once for JSON (by ``schema`` when the judge can), read it leniently and
        hand it to ``parse`` (the layer's reader, raising :class:`JudgeError`). An
        unusable reply gets **one** repair call quoting the problem — our words, never
        the reply — counted like any call; then the error stands.

        A reply cut at ``max_tokens`` is not repaired (the same budget would cut it
        again) — unless the call passes ``salvage``, the reader for a cut reply's
        complete items (:func:`salvage_cut`; it raises when they are not enough).
        Such a call reads what is complete, and when that fails gets one repair call
        asking for fewer, shorter items (:data:`CUT_PROBLEM`)."""
        reply = await self.ask(messages, temperature=temperature, max_tokens=max_tokens,
                               override=override, schema=schema)
        try:
            return parse(_first_json(reply))
        except JudgeError as exc:
            problem = str(exc)
            if reply.truncated:
                if salvage is None:
                    raise
                kept = self._salvage(reply, salvage)
                if kept is not None:
                    return kept[0]
                problem = CUT_PROBLEM
            usage = judge_usage()
            if usage is not None and usage.over_budget():
                raise JudgeError(f"{exc} (no repair retry: cost budget spent)") from None
        self.repairs += 1
        again = await self.ask(repair_messages(messages, problem), temperature=temperature,
                               max_tokens=max_tokens, override=override, schema=schema)
        try:
            return parse(_first_json(again))
        except JudgeError as exc:
            if again.truncated and salvage is not None:
                kept = self._salvage(again, salvage)
                if kept is not None:
                    return kept[0]
            raise JudgeError(f"{exc} (after a repair retry)") from None

    def _salvage(self, reply: JudgeReply, read: Callable[[Any], T]) -> tuple[T] | None:
        """``(read(complete items),)`` of a cut reply, or ``None`` when nothing usable."""
        value = salvage_cut(reply.texts[0]) if reply.texts else None
        if value is None:
            return None
        try:
            out = read(value)
        except JudgeError:
            return None
        self.salvaged += 1
        return (out,)

    async def ask_json(self, system: str, user: str, *, max_tokens: int,
                       override: str | None = None, schema: ReplySchema | None = None,
                       parse: Callable[[Any], T] | None = None,
                       salvage: Callable[[Any], T] | None = None) -> Any:
        """One system + user prompt at temperature 0; ``parse`` of the first reply's
        JSON value (the value itself without ``parse``), see :meth:`ask_parsed`."""
        return await self.ask_parsed([{"role": "system", "content": system},
                                      {"role": "user", "content": user}],
                                     parse or _same, schema=schema, max_tokens=max_tokens,
                                     override=override, salvage=salvage)

    async def ask_all(self, calls: Sequence[tuple[Sequence[Mapping[str, Any]],
                                                  Callable[[Any], T], ReplySchema | None]],
                      *, max_tokens: int = 512) -> list[T]:
        """:meth:`ask_parsed` for each ``(messages, parse, schema)`` (temperature 0),
        concurrently; results in call order."""
        return await settle([self.ask_parsed(m, parse, schema=s, max_tokens=max_tokens)
                             for m, parse, s in calls])

    @property
    def all_cached(self) -> bool:
        return self.calls > 0 and self.cached == self.calls

    def account(self, result: LayerResult) -> LayerResult:
        """Copy the tally into ``result`` (calls, cost, cache hit)."""
        result.judge_calls = self.calls
        result.cost = self.cost
        result.cache_hit = self.all_cached
        if self.repairs:
            result.details["judge_repairs"] = self.repairs
        if self.salvaged:
            result.details["judge_salvaged"] = self.salvaged
        return result


async def settle(calls: Sequence[Awaitable[T]]) -> list[T]:
    """Await ``calls`` concurrently, **all** of them, then raise the first failure (in
    call order) or return the results. Unlike a bare ``gather``, a failing call does
    not leave the others running unaccounted: every judge call made has its reply
    (and its cost) counted before the layer fails."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return cast(list[T], results)


def _same(value: Any) -> Any:
    return value


def _first_json(reply: JudgeReply) -> Any:
    if not reply.texts:
        raise JudgeError("judge returned no reply")
    return parse_json_reply(reply.texts[0], truncated=reply.truncated)


def numbered_items(data: Any, count: int, key: str = "results") -> dict[int, Mapping[str, Any]]:
    """Items ``1..count`` of a ``{"results": [{"id": n, …}]}`` reply's JSON value (a
    bare list, or items without ids in order, are accepted). Any missing item is a
    :class:`JudgeError`: a partial verdict must not pass silently."""
    items = data.get(key) if isinstance(data, Mapping) else data
    if isinstance(data, Mapping) and items is None and count == 1:
        items = [data]  # one item answered as a bare object
    if not isinstance(items, list):
        raise JudgeError(f"judge reply has no {key!r} list (got {shape(data)})")
    out: dict[int, Mapping[str, Any]] = {}
    for pos, item in enumerate(items, 1):
        if not isinstance(item, Mapping):
            continue
        raw = item.get("id", pos)
        try:
            n = int(str(raw).strip().lstrip("#"))
        except ValueError:
            n = pos
        if 1 <= n <= count:
            out.setdefault(n, item)
    missing = [n for n in range(1, count + 1) if n not in out]
    if missing:
        raise JudgeError(f"judge reply misses items {missing[:10]} of 1..{count}")
    return out


def confidence(item: Mapping[str, Any], default: float = 1.0) -> float:
    """``item["confidence"]`` in [0, 1] (percentages and numeric strings accepted)."""
    raw = item.get("confidence")
    if raw is None:
        return default
    word = str(raw).strip().lower()
    if word in _WORDS:
        return _WORDS[word]
    try:
        value = float(word.rstrip("%"))
    except ValueError:
        value = float("nan")
    if isinstance(raw, bool) or math.isnan(value):
        raise JudgeError(f"judge gave an unusable confidence ({shape(raw)})")
    if value > 1.0:
        value /= 100.0
    return min(1.0, max(0.0, value))


def yes_no(raw: object, yes: Collection[str], no: Collection[str], what: str) -> bool:
    """A judge's boolean verdict: JSON ``true``/``false``, or one of the ``yes`` / ``no``
    words (any case). Anything else is a :class:`JudgeError` naming ``what``."""
    if isinstance(raw, bool):
        return raw
    word = str(raw).strip().lower()
    if word in yes:
        return True
    if word in no:
        return False
    raise JudgeError(f"judge gave no usable {what} ({shape(raw)})")


def answer_claims(text: str, limit: int) -> list[str]:
    """The answer's checkable sentences (three content words, or a number), first ``limit``."""
    return [s.text for s in split_sentences(text) if checkable(s.text)][:limit]


def excerpt(text: str, queries: Sequence[str], max_chars: int) -> tuple[str, bool]:
    """``text``, or when longer than ``max_chars`` its sentences sharing most content
    words with ``queries`` (kept in document order). Returns ``(text, truncated)``."""
    if len(text) <= max_chars:
        return text, False
    want = content_words(tokenize(" ".join(queries)))
    spans = split_sentences(text)
    ranked = sorted(range(len(spans)), key=lambda i: (
        -len(want & content_words(tokenize(spans[i].text))), i))
    keep: list[int] = []
    used = 0
    for i in ranked:
        size = len(spans[i].text) + 5
        if used + size > max_chars:
            continue
        keep.append(i)
        used += size
    if not keep:
        return text[:max_chars], True
    return " … ".join(spans[i].text for i in sorted(keep)), True
