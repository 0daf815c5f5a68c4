"""The judge on Anthropic's Messages API (``judge.kind: anthropic``), through the
``anthropic`` SDK (see ``gateway.upstream.judge``). That API accepts ``temperature``
0–1 (OpenAI's 0–2) and has no ``n``: the judge clamps the temperature into 0–1 (as
the ``anthropic`` upstream does) and asks ``n`` times for ``n`` samples. A reply
schema becomes a forced tool call whose ``input_schema`` is the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from gateway.layers.base import JudgeError, JudgeReply
from gateway.sources.context import message_text
from gateway.upstream._capped_httpx import capped_transport
from gateway.upstream._judge_common import Ask, CachingJudge, concurrently, strict_schema

if TYPE_CHECKING:
    from gateway.settings import JudgeConfig

__all__ = ["ANTHROPIC_MAX_TEMPERATURE", "AnthropicJudge"]

ANTHROPIC_MAX_TEMPERATURE = 1.0
"""The Messages API rejects a ``temperature`` above this (OpenAI's limit is 2)."""


class AnthropicJudge(CachingJudge):
    """Anthropic's Messages API at API version ``2023-06-01``, as the ``anthropic``
    upstream speaks it. The ``anthropic`` SDK 2.x sends ``2026-10-21`` by default,
    which rejects ``temperature`` (any value, 400), and its ``messages.create`` has no
    ``temperature`` argument (a ``TypeError``); the judge needs temperature (0 for
    stable, cacheable verdicts, > 0 for sampling), so it pins the version and sends
    ``temperature`` in the body. The key also goes out as that version's
    ``x-api-key`` (the SDK 2.x sends only ``Authorization: Bearer``)."""

    def __init__(self, config: JudgeConfig, api_key: str | None,
                 base_url: str | None = None) -> None:
        super().__init__(config)
        import anthropic

        from gateway.upstream.openai_anthropic import ANTHROPIC_VERSION

        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        self._anthropic = anthropic
        import httpx2  # the SDK's own httpx fork

        http = httpx2.AsyncClient(timeout=config.timeout, transport=capped_transport(
            httpx2, config.max_response_bytes, limits=httpx2.Limits(
                max_connections=config.max_concurrency,
                max_keepalive_connections=config.max_concurrency)))
        self.http = http
        """The SDK's HTTP client (traced like the OpenAI judge's, see :func:`create_judge`)."""
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url,
                                                timeout=config.timeout, max_retries=0,
                                                default_headers=headers, http_client=http)

    async def _call(self, messages: list[Mapping[str, Any]], model: str, ask: Ask,
                    n: int) -> JudgeReply:
        # The Messages API has no system/developer role: their text is the top-level system.
        system = "\n\n".join(message_text(m) for m in messages
                             if m.get("role") in ("system", "developer"))
        turns = [{"role": m["role"], "content": message_text(m)} for m in messages
                 if m.get("role") in ("user", "assistant")]
        # A layer may ask for up to 2 (OpenAI's range); Anthropic rejects more than 1.
        temperature = min(max(ask.temperature, 0.0), ANTHROPIC_MAX_TEMPERATURE)
        kwargs: dict[str, Any] = {"model": model, "max_tokens": ask.max_tokens,
                                  "messages": turns, "extra_body": {"temperature": temperature}}
        if system:
            kwargs["system"] = system
        if ask.schema is not None:  # a forced tool call: its input follows the schema
            kwargs["tools"] = [{"name": ask.schema_name,
                                "input_schema": strict_schema(ask.schema),
                                "description": "Record your reply."}]
            kwargs["tool_choice"] = {"type": "tool", "name": ask.schema_name}
        if n == 1:
            return await self._create(kwargs, model)
        # The Messages API has no `n`: n requests, in flight together (each under a slot).
        return await concurrently([self._create(kwargs, model) for _ in range(n)])

    async def _create(self, kwargs: dict[str, Any], model: str) -> JudgeReply:
        try:
            async with self._sem:
                msg = await self._client.messages.create(**kwargs)
        except self._anthropic.APIError as exc:
            raise JudgeError(f"anthropic judge failed: {type(exc).__name__}") from exc
        tool = next((b for b in msg.content if getattr(b, "type", "") == "tool_use"), None)
        text = (orjson.dumps(getattr(tool, "input", None)).decode() if tool is not None
                else "".join(getattr(b, "text", "") for b in msg.content))
        return JudgeReply(texts=[text], input_tokens=msg.usage.input_tokens,
                          output_tokens=msg.usage.output_tokens, model=model,
                          truncated=getattr(msg, "stop_reason", None) == "max_tokens")

    async def aclose(self) -> None:
        await self._client.close()
