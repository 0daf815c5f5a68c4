"""The Responses API front door: ``POST /v1/responses``.

The chat completions front door (:class:`~gateway.http.chat.ChatEndpoint`) with the
Responses API's path and :data:`~gateway.wire.responses_format.RESPONSES` format:
the same authentication, routing by ``model``, policy selection (``route:
/v1/responses``), pass-through without a policy and the engine with one. The
layers read the request as chat-shaped messages
(:func:`gateway.wire.responses.read_request`: ``instructions``, the ``input`` items,
``<context>`` blocks, ``function_call_output`` tool results) and the answer's
``output_text``; the upstream is called on ``/responses`` — which an upstream
without the Responses API answers through chat completions
(:mod:`gateway.upstream.responses_bridge`).

Server-side state (``previous_response_id``, ``conversation``, stored prompts,
``item_reference`` items) is not seen: the answer is verified against what the
request carries, and the audit note names what it pointed at.
"""

from __future__ import annotations

from typing import Any

from gateway.http.chat import ChatEndpoint
from gateway.wire.base import ResponseFormat
from gateway.wire.responses import check_input
from gateway.wire.responses_format import RESPONSES

__all__ = ["RESPONSES_PATH", "ResponsesEndpoint"]

RESPONSES_PATH = "/v1/responses"


class ResponsesEndpoint(ChatEndpoint):
    """The Responses API endpoint of one app."""

    path = RESPONSES_PATH
    fmt: ResponseFormat = RESPONSES

    def check_shape(self, payload: dict[str, Any]) -> None:
        """Nothing beyond a model: ``input`` is optional (a stored prompt, a previous
        response), its shapes are the upstream's to judge when nothing reads them."""

    def check_verified(self, payload: dict[str, Any]) -> None:
        check_input(payload)
