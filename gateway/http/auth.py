"""Client authentication.

Two modes:

- **gateway keys** (``auth.keys`` configured): clients send
  ``Authorization: Bearer <gateway key>``; a missing or wrong key is a 401 that
  never reaches upstream, and upstream calls carry the upstream's own key. Each key
  may call only its allowed routes (:mod:`gateway.http.routes`; by default chat
  completions, models and embeddings): every tenant shares the upstream's key, so
  a route reaching upstream state (files, batches, …) is opt-in.
- **forward** (no keys configured): the client's ``Authorization`` is sent
  upstream as is; every route is allowed unless ``auth.routes`` is set.

Keys are compared by SHA-256 digest, so the table holds no plaintext. A request with
more than one ``Authorization`` header is refused in both modes (:func:`authorization`):
a proxy in front that checks one of them and a gateway (or upstream) that reads the
other would disagree on who is calling.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.errors import AuthenticationFailed
from gateway.http.routes import RouteSet
from gateway.settings import AuthConfig

__all__ = ["Authenticator", "Principal", "authorization"]


_ALL_ROUTES = RouteSet(None)


@dataclass(frozen=True, slots=True)
class Principal:
    key_name: str
    tenant: str
    routes: RouteSet = _ALL_ROUTES
    """What the key may call, compiled at load (``auth.keys[].routes`` and fallbacks)."""
    policy_selection: bool = False
    """The key may choose its verification policy (``auth.keys[].policy_selection``)."""


def authorization(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The request's ``Authorization`` header (``headers``: the ASGI scope's, names
    lower-case), None without one; 401 when there are several (RFC 9110 §11.6.2: a
    single credential, not a list), whatever their values."""
    found: bytes | None = None
    for k, v in headers:
        if k == b"authorization":
            if found is not None:
                raise AuthenticationFailed(
                    "Several Authorization headers: send exactly one, "
                    "'Authorization: Bearer <key>'.")
            found = v
    return found


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


class Authenticator:
    def __init__(self, config: AuthConfig) -> None:
        self._table: dict[bytes, Principal] = {}
        compiled: dict[tuple[str, ...] | None, RouteSet] = {}

        def routes(rules: tuple[str, ...] | None) -> RouteSet:
            if rules not in compiled:
                compiled[rules] = RouteSet(rules)
            return compiled[rules]

        for key in config.keys:
            secret = key.secret()
            if not secret:
                raise ValueError(f"gateway key {key.name!r}: environment variable "
                                 f"{key.key_env!r} is not set or empty")
            self._table[_digest(secret)] = Principal(key.name, key.tenant,
                                                     routes=routes(config.effective_routes(key)),
                                                     policy_selection=key.policy_selection)
        self.enabled = bool(self._table)
        self._anonymous = routes(config.effective_routes(None))  # forward mode

    def authenticate(self, authorization: bytes | None) -> Principal | None:
        """Return the caller, ``None`` in forward mode; raise 401 on a bad key."""
        if not self.enabled:
            return None
        if not authorization:
            raise AuthenticationFailed(
                "Missing API key: send 'Authorization: Bearer <gateway key>'.")
        scheme, _, token = authorization.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationFailed("Malformed Authorization header: expected a Bearer key.")
        principal = self._table.get(_digest(token.strip()))
        if principal is None:
            raise AuthenticationFailed("Incorrect API key provided.")
        return principal

    def authorize(self, principal: Principal | None, method: str, path: str) -> None:
        """Raise 403 ``route_not_allowed`` unless the caller may call ``method path``
        (``path`` decoded, as routed; ``principal`` None in forward mode)."""
        (principal.routes if principal is not None else self._anonymous).check(method, path)
