"""Judges: the models that model-based verification layers call.

Two kinds, one contract (:class:`gateway.layers.base.Judge`), built by
:func:`create_judge` from ``judge.*`` (by default the first upstream):

- :class:`~gateway.upstream.judge_openai.OpenAIJudge` — any OpenAI-compatible
  ``/chat/completions`` endpoint, over an ``httpx.AsyncClient``; it finds, per model,
  how the endpoint takes a reply schema, and how it takes ``n``
  (:mod:`gateway.upstream.judge_openai`).
- :class:`~gateway.upstream.judge_anthropic.AnthropicJudge` — Anthropic's Messages API
  through the ``anthropic`` SDK (:mod:`gateway.upstream.judge_anthropic`).

Both count tokens and cost (``price_per_1k_*``), bound concurrency, and cache
temperature-0 replies for identical prompts (``JudgeReply.cached``):
:mod:`gateway.upstream._judge_common`. Library errors become
:class:`~gateway.layers.base.JudgeError` there, at the boundary.

**Structured output.** A call may carry ``schema`` (a JSON Schema in the strict
subset, see ``gateway.layers._json_reply``) and ``schema_name``. The Anthropic
judge forces a tool call whose ``input_schema`` is the schema; the OpenAI judge asks
down a chain of :data:`STRUCTURED_MODES` (``json_schema`` → ``json_object`` →
``prompt``). :func:`strict_schema` drops ``maxLength``, which neither OpenAI's
strict subset nor Anthropic's ``input_schema`` lists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.layers.base import Judge
from gateway.upstream._judge_common import strict_schema
from gateway.upstream.judge_anthropic import ANTHROPIC_MAX_TEMPERATURE, AnthropicJudge
from gateway.upstream.judge_openai import STRUCTURED_MODES, OpenAIJudge

if TYPE_CHECKING:
    from gateway.settings import Settings
    from gateway.telemetry import Telemetry

__all__ = ["ANTHROPIC_MAX_TEMPERATURE", "STRUCTURED_MODES", "AnthropicJudge", "OpenAIJudge",
           "create_judge", "strict_schema"]


def create_judge(settings: Settings, telemetry: Telemetry | None = None) -> Judge | None:
    """The configured judge, or None when there is nothing to call."""
    import os

    cfg = settings.judge
    if cfg.base_url:
        key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
        base_url: str = cfg.base_url
        kind = cfg.kind or "openai"
    else:
        upstream = next((u for u in settings.upstreams if u.name == cfg.upstream),
                        None) if cfg.upstream else (settings.upstreams[0]
                                                    if settings.upstreams else None)
        if upstream is None:
            return None
        key, base_url = upstream.api_key(), upstream.base_url
        kind = cfg.kind or upstream.kind
    if kind == "anthropic":
        # The SDK adds /v1/messages itself; our base URLs include /v1.
        root = base_url.rstrip("/").removesuffix("/v1")
        anthropic_judge = AnthropicJudge(cfg, key, root)
        if telemetry is not None:  # its HTTP spans, as the OpenAI judge's
            telemetry.instrument_httpx(anthropic_judge.http)
        return anthropic_judge
    judge = OpenAIJudge(cfg, base_url, key)
    if telemetry is not None:
        telemetry.instrument_httpx(judge.client)
    return judge
