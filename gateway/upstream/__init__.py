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
from gateway.upstream.scrub import Secrets, configured_secrets

__all__ = ["Secrets", "UpstreamClient", "UpstreamResponse", "configured_secrets", "open_client"]


def open_client(config: UpstreamConfig,
                trace_configs: list[aiohttp.TraceConfig] | None = None,
                secrets: Secrets | None = None) -> UpstreamClient:
    """A pooled client for ``config`` (close it with ``aclose()``); ``secrets`` are kept
    out of the headers and error bodies it relays (default: its own key; the app passes
    :func:`configured_secrets`)."""
    if config.kind == "anthropic":
        from gateway.upstream.anthropic import AnthropicUpstreamClient

        return AnthropicUpstreamClient.open(config, trace_configs, secrets)
    from gateway.upstream.openai import OpenAIUpstreamClient

    return OpenAIUpstreamClient.open(config, trace_configs, secrets)
