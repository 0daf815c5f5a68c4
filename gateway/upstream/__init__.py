"""Upstream clients, one module per provider kind.

- ``client`` — OpenAI-compatible upstreams (``kind: openai``), the hot path;
- ``anthropic`` — Anthropic's Messages API (``kind: anthropic``), translated by
  ``openai_anthropic`` (requests) and ``anthropic_openai`` (responses, errors,
  streams) to and from OpenAI's shapes.

:func:`open_client` picks the class for an upstream's ``kind``.
"""

from __future__ import annotations

import aiohttp

from gateway.settings import UpstreamConfig
from gateway.upstream.client import UpstreamClient, UpstreamResponse

__all__ = ["UpstreamClient", "UpstreamResponse", "open_client"]


def open_client(config: UpstreamConfig,
                trace_configs: list[aiohttp.TraceConfig] | None = None) -> UpstreamClient:
    """A pooled client for ``config`` (close it with ``aclose()``)."""
    if config.kind == "anthropic":
        from gateway.upstream.anthropic import AnthropicUpstreamClient

        return AnthropicUpstreamClient.open(config, trace_configs)
    return UpstreamClient.open(config, trace_configs)
