"""Upstream clients, one module per provider kind; the contract is :mod:`.base`.

- ``openai`` — OpenAI-compatible upstreams (``kind: openai``), the hot path;
- ``anthropic`` — Anthropic's Messages API (``kind: anthropic``), translated by
  ``openai_anthropic`` (requests) and ``anthropic_openai`` (responses, errors,
  streams) to and from OpenAI's shapes;
- ``router`` — which configured upstream serves a model;
- ``judge`` — the clients model-based layers call (the judge), on httpx.

:func:`open_client` picks the class for an upstream's ``kind``.
"""

from __future__ import annotations

import aiohttp

from gateway.settings import UpstreamConfig
from gateway.upstream.base import UpstreamClient, UpstreamResponse

__all__ = ["UpstreamClient", "UpstreamResponse", "open_client"]


def open_client(config: UpstreamConfig,
                trace_configs: list[aiohttp.TraceConfig] | None = None) -> UpstreamClient:
    """A pooled client for ``config`` (close it with ``aclose()``)."""
    if config.kind == "anthropic":
        from gateway.upstream.anthropic import AnthropicUpstreamClient

        return AnthropicUpstreamClient.open(config, trace_configs)
    from gateway.upstream.openai import OpenAIUpstreamClient

    return OpenAIUpstreamClient.open(config, trace_configs)
