"""Anthropic ⇄ OpenAI mapping tables, shared by both translation directions.

The upstream translator (:mod:`gateway.upstream.anthropic_openai`: Anthropic answers
read as OpenAI ones) and the inbound front door (:mod:`gateway.wire.anthropic_response`,
:mod:`gateway.wire.anthropic_errors`: OpenAI answers written as Anthropic ones) read
the same tables, so the two directions cannot drift apart.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ERROR_TYPES", "FINISH_REASONS"]

FINISH_REASONS: Final[dict[str, str]] = {
    "end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop",
    "max_tokens": "length", "model_context_window_exceeded": "length",
    "tool_use": "tool_calls", "refusal": "content_filter",
}
"""Anthropic ``stop_reason`` -> OpenAI ``finish_reason``."""

ERROR_TYPES: Final[dict[str, tuple[str, str | None]]] = {
    "invalid_request_error": ("invalid_request_error", None),
    "authentication_error": ("authentication_error", "invalid_api_key"),
    "permission_error": ("permission_denied", "permission_denied"),
    "not_found_error": ("invalid_request_error", "not_found"),
    "request_too_large": ("invalid_request_error", "request_too_large"),
    "rate_limit_error": ("rate_limit_error", "rate_limit_exceeded"),
    "billing_error": ("billing_error", "billing_error"),
    "api_error": ("server_error", "upstream_error"),
    "overloaded_error": ("service_unavailable", "overloaded"),
    "timeout_error": ("upstream_error", "upstream_timeout"),
}
"""Anthropic error ``type`` -> (OpenAI error ``type``, ``code``)."""
