"""Shared small types."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Headers", "LowerCaseHeaders", "RequestInfo"]

Headers = list[tuple[bytes, bytes]]
"""Raw HTTP headers as ASGI carries them: ``(name, value)`` byte pairs."""


class LowerCaseHeaders(dict[str, str]):
    """Decoded headers whose names are all lower-case (as ASGI gives them): policy
    selection looks a name up directly, without trying other spellings."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What policy selection may look at for one request."""

    model: str
    route: str
    """The request path, e.g. ``/v1/chat/completions``."""
    headers: Mapping[str, str]
    """Lower-case header names; never includes credentials for matching purposes."""
    tenant: str | None = None
    key_name: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    requested_policy: str | None = None
    """Value of the ``x-verity-policy`` request header, if any."""
    policy_selection: bool = True
    """Whether the caller may choose its policy (``x-verity-policy``, or headers /
    metadata a policy matches on): its gateway key's ``policy_selection`` grant;
    always in forward mode, where there is no key to grant it."""
    stream: bool = False
