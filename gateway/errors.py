"""Every error the gateway itself produces, with its HTTP status and OpenAI body.

Error tree::

    GatewayError                      500 server_error (base; also "internal")
    ├── InvalidRequest                400 invalid_request_error
    │   └── InvalidJSON               400 invalid_request_error / code invalid_json
    ├── AuthenticationFailed          401 authentication_error / invalid_api_key
    ├── PermissionDenied              403 permission_denied / policy_not_allowed
    ├── NotFound                      404 invalid_request_error
    │   └── ModelNotFound             404 invalid_request_error / model_not_found
    ├── PayloadTooLarge               413 invalid_request_error / request_too_large
    ├── VerificationBlocked           per policy (default 422) / content_filter
    ├── NotReady                      503 service_unavailable
    └── UpstreamError                 502 upstream_error (base for upstream failures)
        ├── UpstreamConnectError      502 upstream_connect_error
        ├── UpstreamTimeout           504 upstream_timeout
        ├── UpstreamUnavailable       503 upstream_unavailable (every upstream of the model open)
        ├── UpstreamTooLarge          502 upstream_response_too_large (over max_response_bytes)
        └── UpstreamStreamError       502 upstream_stream_error (a stream cut mid-way)
            └── UpstreamTruncated     502 upstream_stream_truncated (ended without its end)

Library exceptions are converted at the boundary (``gateway.upstream``) with
``raise ... from exc``. Messages never contain credentials.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = [
    "AuthenticationFailed",
    "GatewayError",
    "InvalidJSON",
    "InvalidRequest",
    "ModelNotFound",
    "NotFound",
    "NotReady",
    "PayloadTooLarge",
    "PermissionDenied",
    "UpstreamConnectError",
    "UpstreamError",
    "UpstreamStreamError",
    "UpstreamTimeout",
    "UpstreamTooLarge",
    "UpstreamTruncated",
    "UpstreamUnavailable",
    "VerificationBlocked",
    "error_body",
]


def error_body(message: str, type: str, code: str | None = None,
               param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class GatewayError(Exception):
    status: int = 500
    type: str = "server_error"
    code: str | None = "internal_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None,
                 status: int | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.code, self.param)

    def body_bytes(self) -> bytes:
        return orjson.dumps(self.body())


class InvalidRequest(GatewayError):
    status = 400
    type = "invalid_request_error"
    code: str | None = None


class InvalidJSON(InvalidRequest):
    code = "invalid_json"


class AuthenticationFailed(GatewayError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class PermissionDenied(GatewayError):
    status = 403
    type = "permission_denied"
    code = "permission_denied"


class NotFound(GatewayError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class ModelNotFound(NotFound):
    code = "model_not_found"


class MethodNotAllowed(GatewayError):
    status = 405
    type = "invalid_request_error"
    code = "method_not_allowed"


class PayloadTooLarge(GatewayError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class VerificationBlocked(GatewayError):
    status = 422
    type = "content_filter"
    code = "content_filter"


class NotReady(GatewayError):
    status = 503
    type = "service_unavailable"
    code = "not_ready"


class UpstreamError(GatewayError):
    status = 502
    type = "upstream_error"
    code = "upstream_error"


class UpstreamConnectError(UpstreamError):
    code = "upstream_connect_error"


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"


class UpstreamUnavailable(UpstreamError):
    """Every upstream that serves the model is open (failing; ``routing.health``), and
    the pool may not panic: nothing was sent."""

    status = 503
    code = "upstream_unavailable"


class UpstreamStreamError(UpstreamError):
    code = "upstream_stream_error"


class UpstreamTooLarge(UpstreamError):
    """An upstream body the gateway would have to hold is over ``max_response_bytes``
    (counted decompressed, while reading)."""

    code = "upstream_response_too_large"


class UpstreamTruncated(UpstreamStreamError):
    """A chat completion stream that ended cleanly on the wire but before its end: no
    ``[DONE]`` and no finish reason."""

    code = "upstream_stream_truncated"
