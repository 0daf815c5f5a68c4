"""What every judge shares (``gateway.upstream.judge``): :class:`CachingJudge` — pricing
(``price_per_1k_*``), the concurrency bound and the temperature-0 reply cache —, one
call's :class:`Ask`, :func:`concurrently` (several requests' replies merged into one),
and :func:`strict_schema` (a reply schema in the subset strict providers take).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import orjson
from cachetools import LRUCache

from gateway.layers.base import JudgeError, JudgeReply, reply_served

if TYPE_CHECKING:
    from gateway.settings import JudgeConfig

__all__ = ["Ask", "CachingJudge", "concurrently", "strict_schema"]


class CachingJudge:
    """Shared pricing, concurrency bound and temperature-0 cache."""

    accepts_schema: ClassVar[bool] = True
    """``complete`` takes ``schema`` / ``schema_name`` (see ``gateway.layers.base.Judge``)."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self._sem = asyncio.Semaphore(config.max_concurrency)
        self._cache: LRUCache[str, JudgeReply] | None = (
            LRUCache(config.cache_size) if config.cache_size else None)

    def _price(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.config.price_per_1k_input
                + output_tokens * self.config.price_per_1k_output) / 1000

    async def complete(self, messages: Sequence[Mapping[str, Any]], *,
                       temperature: float = 0.0, max_tokens: int = 512, n: int = 1,
                       model: str | None = None, override: str | None = None,
                       schema: Mapping[str, Any] | None = None,
                       schema_name: str = "reply") -> JudgeReply:
        name = override or self.config.model or model
        if not name:
            raise JudgeError("no judge model: set judge.model or pass the request's model")
        key = None
        if self._cache is not None and temperature == 0.0:
            key = hashlib.sha256(orjson.dumps(
                [name, list(messages), max_tokens, n, schema, schema_name],
                option=orjson.OPT_SORT_KEYS)).hexdigest()
            hit = self._cache.get(key)
            if hit is not None:
                reply_served(self, key)
                return JudgeReply(texts=list(hit.texts), cost=0.0, cached=True, model=hit.model,
                                  truncated=hit.truncated)
        ask = Ask(temperature, max_tokens, dict(schema) if schema is not None else None,
                   schema_name)
        reply = await self._call(list(messages), name, ask, n)
        del reply.texts[n:]  # some servers return more choices than asked: n means n
        reply.cost = self._price(reply.input_tokens, reply.output_tokens)
        if key is not None and self._cache is not None:
            self._cache[key] = reply
            reply_served(self, key)
        return reply

    def forget(self, key: str) -> None:
        """Drop one cached reply (see :func:`gateway.layers.base.uncache_on_error`)."""
        if self._cache is not None:
            self._cache.pop(key, None)

    async def _call(self, messages: list[Mapping[str, Any]], model: str, ask: Ask,
                    n: int) -> JudgeReply:
        """The reply to one ``complete``: one or more HTTP requests, each holding
        ``self._sem`` (``max_concurrency`` bounds requests in flight, not calls)."""
        raise NotImplementedError

    async def aclose(self) -> None:
        pass


class Ask:
    """What one ``complete`` asks besides the messages (the same for every request
    it makes)."""

    __slots__ = ("max_tokens", "schema", "schema_name", "temperature")

    def __init__(self, temperature: float, max_tokens: int, schema: dict[str, Any] | None,
                 schema_name: str) -> None:
        self.temperature, self.max_tokens = temperature, max_tokens
        self.schema, self.schema_name = schema, schema_name


_GRAMMAR_ONLY = frozenset({"maxLength", "minLength"})
"""Schema keywords a grammar-constrained server enforces (llama.cpp's and
llama-cpp-python's schema-to-grammar) but OpenAI's strict ``json_schema`` and
Anthropic's tool ``input_schema`` do not list as supported: stripped there."""


def strict_schema(schema: Any) -> Any:
    """``schema`` without the :data:`_GRAMMAR_ONLY` keywords, at every depth (a
    property *named* ``maxLength`` is kept: only keyword positions are walked)."""
    if isinstance(schema, list):
        return [strict_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _GRAMMAR_ONLY:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: strict_schema(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf", "oneOf", "allOf", "$defs", "definitions"):
            out[key] = ({name: strict_schema(sub) for name, sub in value.items()}
                        if isinstance(value, dict) and key in ("$defs", "definitions")
                        else strict_schema(value))
        else:
            out[key] = value
    return out


async def concurrently(calls: list[Coroutine[Any, Any, JudgeReply]]) -> JudgeReply:
    """Await ``calls`` at once and merge their replies (texts in call order). The first
    failure cancels the rest and is raised as itself."""
    failed: BaseException | None = None
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(c) for c in calls]
    except ExceptionGroup as eg:  # TaskGroup wraps: callers handle JudgeError
        failed = eg.exceptions[0]
    if failed is not None:
        raise failed  # as itself, with its own __cause__ (the HTTP or SDK error)
    replies = [t.result() for t in tasks]
    merged = JudgeReply(texts=[], model=replies[0].model if replies else "")
    for r in replies:
        merged.texts += r.texts
        merged.input_tokens += r.input_tokens
        merged.output_tokens += r.output_tokens
        merged.truncated = merged.truncated or r.truncated
    return merged
