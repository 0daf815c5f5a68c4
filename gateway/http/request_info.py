"""What policy selection sees of a request: :func:`request_info`, one place for the
chat and Messages front doors (so the headers they hide from policy matching and the
fields they read cannot drift apart)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.http.auth import Principal
from gateway.types import LowerCaseHeaders, RequestInfo

__all__ = ["HIDDEN_HEADERS", "request_info"]

HIDDEN_HEADERS = (b"authorization", b"api-key", b"x-api-key", b"cookie")
"""Credentials: never matched by a policy (nor held by the request's info)."""


def request_info(*, model: str, route: str, headers: Mapping[bytes, bytes],
                 principal: Principal | None, payload: Mapping[str, Any]) -> RequestInfo:
    """The :class:`RequestInfo` of a request for ``model`` on ``route``: its headers
    (names lower-case, as ASGI gives them) but the credentials, the caller's tenant and key, the body's ``metadata`` (an
    object, else none), the policy the client asks for (``x-verity-policy``, honoured
    only where the key allows it) and whether it streams."""
    metadata = payload.get("metadata")
    requested = headers.get(b"x-verity-policy")
    return RequestInfo(
        model=model, route=route,
        headers=LowerCaseHeaders({k.decode("latin-1"): v.decode("latin-1")
                                  for k, v in headers.items() if k not in HIDDEN_HEADERS}),
        tenant=principal.tenant if principal else None,
        key_name=principal.key_name if principal else None,
        metadata=metadata if isinstance(metadata, dict) else {},
        requested_policy=requested.decode("latin-1") if requested else None,
        policy_selection=principal.policy_selection if principal else True,
        stream=payload.get("stream") is True,
    )
