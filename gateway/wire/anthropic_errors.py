"""Anthropic-shaped errors for the Messages front door: pure, no I/O.

Anthropic's error body is ``{"type": "error", "error": {"type": ..., "message": ...}}``
(the API adds a ``request_id``), with the HTTP status documented per error type:

====== ========================= =========================================
status type                      here also for
====== ========================= =========================================
400    ``invalid_request_error``  any other 4xx (as Anthropic documents), and
                                  a verification ``block`` (``style: error``,
                                  422 by default)
401    ``authentication_error``
402    ``billing_error``
403    ``permission_error``
404    ``not_found_error``
413    ``request_too_large``
429    ``rate_limit_error``
500    ``api_error``              any other 5xx (502 too)
503    ``overloaded_error``       the gateway not ready, an upstream overloaded
504    ``timeout_error``
529    ``overloaded_error``
====== ========================= =========================================

The status a client gets is the gateway's own (a 503 stays a 503: the Anthropic SDK
raises ``ServiceUnavailableError`` and retries it, as it does a 529). The type is taken
from the OpenAI error's ``(type, code)`` where that pair is one the anthropic upstream's
translator produces (:data:`gateway.wire.anthropic_tables.ERROR_TYPES`, read
backwards, so both directions share one table), else from the status.

- :func:`error_body` / :func:`error_type` — the body and the type for a status.
- :func:`error_from_gateway` — any :class:`~gateway.errors.GatewayError`.
- :func:`error_from_openai` — an OpenAI-compatible upstream's error response.
- :func:`error_event` — the in-stream form (``event: error``), which ends a stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.errors import GatewayError
from gateway.wire.anthropic_tables import ERROR_TYPES

__all__ = ["ERROR_TYPES_BY_STATUS", "error_body", "error_event", "error_from_gateway",
           "error_from_openai", "error_type"]

ERROR_TYPES_BY_STATUS: Mapping[int, str] = {
    400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
    403: "permission_error", 404: "not_found_error", 413: "request_too_large",
    429: "rate_limit_error", 500: "api_error", 503: "overloaded_error",
    504: "timeout_error", 529: "overloaded_error",
}

_BY_OPENAI: Mapping[tuple[str, str | None], str] = {
    pair: atype for atype, pair in ERROR_TYPES.items() if pair[1] is not None}
"""(OpenAI type, code) -> Anthropic type, for the pairs that name one type only."""

_SNIPPET = 200


def error_type(status: int, openai_type: str | None = None, code: str | None = None) -> str:
    """The Anthropic error type for a status (and, when known, the OpenAI type/code)."""
    if openai_type is not None:
        found = _BY_OPENAI.get((openai_type, code))
        if found is not None:
            return found
    known = ERROR_TYPES_BY_STATUS.get(status)
    if known is not None:
        return known
    return "api_error" if status >= 500 else "invalid_request_error"


def error_body(type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type, "message": message}}


def error_from_gateway(err: GatewayError) -> tuple[int, dict[str, Any]]:
    """(status, body) for an error the gateway raised; the status is unchanged."""
    return err.status, error_body(error_type(err.status, err.type, err.code), err.message)


def error_from_openai(status: int, data: bytes | Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
    """(status, body) for an OpenAI-compatible upstream's error response (its body as
    bytes or parsed). Bodies of another shape keep their first 200 characters."""
    parsed: Any = data
    if isinstance(data, (bytes, bytearray)):
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            parsed = None
    err = parsed.get("error") if isinstance(parsed, Mapping) else None
    if isinstance(err, Mapping) and isinstance(err.get("message"), str):
        otype = err.get("type") if isinstance(err.get("type"), str) else None
        code = err.get("code") if isinstance(err.get("code"), str) else None
        return status, error_body(error_type(status, otype, code), err["message"])
    if isinstance(data, (bytes, bytearray)):
        snippet = bytes(data[:_SNIPPET]).decode("utf-8", "replace").strip()
    else:
        snippet = ""
    message = f"upstream answered {status}" + (f": {snippet}" if snippet else "")
    return status, error_body(error_type(status), message)


def error_event(body: Mapping[str, Any]) -> bytes:
    """``event: error`` with ``body`` (from :func:`error_body` and friends): sent in
    place of the rest of a stream whose response has started; the SDK raises it."""
    return b"event: error\ndata: " + orjson.dumps(body) + b"\n\n"
