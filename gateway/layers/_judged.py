"""Shared plumbing of the model-based layers (``nli``, ``self-consistency``,
``semantic-entropy``, ``audit``, ``fact-check``): getting the judge, accounting for
its calls, reading the JSON their prompts ask for, and picking what to send.

Nothing here decides a verdict; each layer module owns its prompt and scoring.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.layers._citation_pairs import checkable
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

__all__ = ["JudgeTally", "answer_claims", "confidence", "excerpt", "numbered_items",
           "parse_json_reply", "require_judge", "yes_no"]

_WORDS = {"high": 0.9, "medium": 0.6, "moderate": 0.6, "low": 0.3}

NO_JUDGE = "needs a judge: configure `judge` in the gateway config"

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def parse_json_reply(text: str) -> Any:
    """The JSON value in a model reply (code fences and prose around it tolerated)."""
    cleaned = _FENCE.sub("", text.strip())
    try:
        return orjson.loads(cleaned)
    except orjson.JSONDecodeError:
        pass
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = cleaned.find(opener), cleaned.rfind(closer)
        if 0 <= start < end:
            try:
                return orjson.loads(cleaned[start:end + 1])
            except orjson.JSONDecodeError:
                continue
    raise JudgeError(f"judge reply is not JSON ({len(text)} chars)")


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

    async def ask(self, messages: Sequence[Mapping[str, Any]], *, temperature: float = 0.0,
                  max_tokens: int = 512, n: int = 1,
                  override: str | None = None) -> JudgeReply:
        # Counted when made, and reported to the pipeline's meter as it happens: a
        # call whose reply then breaks the layer (or that times out) was still made,
        # and a reply still billed.
        usage = judge_usage()
        self.calls += 1
        if usage is not None:
            usage.called()
        reply = await self.judge.complete(messages, temperature=temperature,
                                          max_tokens=max_tokens, n=n,
                                          model=self.model or None, override=override)
        if usage is not None:
            usage.replied(reply)
        self.cached += bool(reply.cached)
        self.cost += reply.cost
        self.models.append(reply.model)
        return reply

    async def ask_json(self, system: str, user: str, *, max_tokens: int,
                       override: str | None = None) -> Any:
        """One system + user prompt at temperature 0; the JSON value of the first reply."""
        reply = await self.ask([{"role": "system", "content": system},
                                {"role": "user", "content": user}],
                               max_tokens=max_tokens, override=override)
        if not reply.texts:
            raise JudgeError("judge returned no reply")
        return parse_json_reply(reply.texts[0])

    async def ask_all(self, prompts: Sequence[Sequence[Mapping[str, Any]]], *,
                      max_tokens: int = 512) -> list[str]:
        """The first reply text of each prompt (temperature 0), asked concurrently."""
        replies = await asyncio.gather(*(self.ask(p, max_tokens=max_tokens) for p in prompts))
        return [r.texts[0] if r.texts else "" for r in replies]

    @property
    def all_cached(self) -> bool:
        return self.calls > 0 and self.cached == self.calls

    def account(self, result: LayerResult) -> LayerResult:
        """Copy the tally into ``result`` (calls, cost, cache hit)."""
        result.judge_calls = self.calls
        result.cost = self.cost
        result.cache_hit = self.all_cached
        return result


def numbered_items(text: str, count: int, key: str = "results") -> dict[int, Mapping[str, Any]]:
    """Items ``1..count`` of a ``{"results": [{"id": n, …}]}`` reply (a bare list, or
    items without ids in order, are accepted). Any missing item is a :class:`JudgeError`:
    a partial verdict must not pass silently."""
    data = parse_json_reply(text)
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
