"""Anthropic-shaped errors (gateway.wire.anthropic_errors): bodies parsed by the anthropic
SDK, and the exception class the SDK raises for each status."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import orjson
import pytest
from anthropic.types import ErrorResponse
from wire.anthropic_sdk_check import no_extras

from gateway.errors import (
    AuthenticationFailed,
    GatewayError,
    InvalidJSON,
    InvalidRequest,
    ModelNotFound,
    NotReady,
    PayloadTooLarge,
    PermissionDenied,
    UpstreamConnectError,
    UpstreamError,
    UpstreamTimeout,
    UpstreamTooLarge,
    VerificationBlocked,
)
from gateway.upstream.anthropic_openai import error_to_openai
from gateway.wire.anthropic_errors import (
    error_body,
    error_event,
    error_from_gateway,
    error_from_openai,
    error_type,
)


def sdk_error(status: int, body: dict[str, Any]) -> anthropic.APIStatusError:
    """What the Anthropic SDK raises for this response."""
    client = anthropic.Anthropic(api_key="test", base_url="http://127.0.0.1:9")
    try:
        response = httpx2.Response(status, content=orjson.dumps(body), request=httpx2.Request(
            "POST", "http://127.0.0.1:9/v1/messages"))
        return client._make_status_error_from_response(response)
    finally:
        client.close()


def valid(body: dict[str, Any]) -> None:
    if body["error"]["type"] == "request_too_large":  # documented, not in the SDK's union
        assert set(body) == {"type", "error"} and set(body["error"]) == {"type", "message"}
        return
    no_extras(ErrorResponse.model_validate(body))


@pytest.mark.parametrize("status, atype", [
    (400, "invalid_request_error"), (401, "authentication_error"), (402, "billing_error"),
    (403, "permission_error"), (404, "not_found_error"), (413, "request_too_large"),
    (422, "invalid_request_error"), (451, "invalid_request_error"),
    (429, "rate_limit_error"), (500, "api_error"), (502, "api_error"),
    (503, "overloaded_error"), (504, "timeout_error"), (529, "overloaded_error"),
])
def test_type_per_status(status: int, atype: str) -> None:
    assert error_type(status) == atype
    valid(error_body(atype, "x"))


@pytest.mark.parametrize("err, status, atype, sdk_class", [
    (InvalidRequest("bad"), 400, "invalid_request_error", anthropic.BadRequestError),
    (InvalidJSON("bad json"), 400, "invalid_request_error", anthropic.BadRequestError),
    (AuthenticationFailed("who"), 401, "authentication_error", anthropic.AuthenticationError),
    (PermissionDenied("no"), 403, "permission_error", anthropic.PermissionDeniedError),
    (ModelNotFound("no model"), 404, "not_found_error", anthropic.NotFoundError),
    (PayloadTooLarge("big"), 413, "request_too_large", anthropic.ContentTooLargeError),
    (VerificationBlocked("blocked"), 422, "invalid_request_error",
     anthropic.UnprocessableEntityError),
    (UpstreamError("bad"), 502, "api_error", anthropic.InternalServerError),
    (UpstreamConnectError("down"), 502, "api_error", anthropic.InternalServerError),
    (UpstreamTooLarge("big"), 502, "api_error", anthropic.InternalServerError),
    (NotReady("starting"), 503, "overloaded_error", anthropic.ServiceUnavailableError),
    (UpstreamTimeout("slow"), 504, "timeout_error", anthropic.GatewayTimeoutError),
    (GatewayError("oops"), 500, "api_error", anthropic.InternalServerError),
])
def test_gateway_errors(err: GatewayError, status: int, atype: str,
                        sdk_class: type[anthropic.APIStatusError]) -> None:
    got_status, body = error_from_gateway(err)
    assert (got_status, body) == (status, {"type": "error", "error": {
        "type": atype, "message": err.message}})
    valid(body)
    raised = sdk_error(got_status, body)
    assert type(raised) is sdk_class
    assert isinstance(raised.body, dict) and raised.body["error"]["type"] == atype


@pytest.mark.parametrize("atype", [
    "invalid_request_error", "authentication_error", "permission_error", "not_found_error",
    "request_too_large", "rate_limit_error", "billing_error", "api_error",
    "overloaded_error", "timeout_error"])
def test_types_survive_a_trip_through_the_openai_shape(atype: str) -> None:
    """Anthropic error -> OpenAI shape (the anthropic upstream's translator) -> back."""
    status = {"invalid_request_error": 400, "authentication_error": 401,
              "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
              "rate_limit_error": 429, "billing_error": 402, "api_error": 500,
              "overloaded_error": 529, "timeout_error": 504}[atype]
    mapped, openai_body = error_to_openai(status, orjson.dumps(error_body(atype, "m")))
    assert error_from_openai(mapped, openai_body)[1] == error_body(atype, "m")


def test_openai_upstream_error_bodies() -> None:
    body = {"error": {"message": "Rate limit reached", "type": "requests",
                      "param": None, "code": "rate_limit_exceeded"}}
    assert error_from_openai(429, orjson.dumps(body)) == (429, error_body(
        "rate_limit_error", "Rate limit reached"))
    assert error_from_openai(400, body)[1]["error"]["type"] == "invalid_request_error"
    status, out = error_from_openai(502, b"<html>Bad Gateway</html>" + b"x" * 500)
    assert status == 502 and out["error"]["type"] == "api_error"
    assert out["error"]["message"].startswith("upstream answered 502: <html>Bad Gateway")
    assert len(out["error"]["message"]) < 240
    assert error_from_openai(503, b"")[1] == error_body("overloaded_error",
                                                        "upstream answered 503")
    assert error_from_openai(500, {"detail": "x"})[1]["error"]["message"] == \
        "upstream answered 500"


def test_error_event_is_what_the_sdk_raises_in_a_stream() -> None:
    data = error_event(error_body("overloaded_error", "Overloaded"))
    assert data == (b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
                    b'"message":"Overloaded"}}\n\n')
