"""The route-rule grammar of ``auth.routes`` and ``auth.keys[].routes``, and the
default allowlist of a gateway key.

A rule is ``"METHOD /v1/path-glob"``: ``METHOD`` an HTTP method or ``*`` (any);
in the path, ``*`` matches within one segment (never a ``/``) and a final ``/**``
matches the rest of the path, zero or more segments. Matching requests against
rules is :mod:`gateway.http.routes`.
"""

from __future__ import annotations

__all__ = ["DEFAULT_KEY_ROUTES", "METHODS", "parse_rule"]

DEFAULT_KEY_ROUTES: tuple[str, ...] = (
    "POST /v1/chat/completions",
    "GET /v1/models",
    "GET /v1/models/*",
    "POST /v1/embeddings",
    "POST /v1/messages",
    "POST /v1/messages/count_tokens",
)
"""What a gateway key may call unless its key, tenant or ``auth.routes`` says otherwise."""

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "*"})


def parse_rule(rule: str) -> tuple[str, str]:
    """``(METHOD, path glob)`` of a rule; ``ValueError`` naming what is wrong."""
    method, _, path = rule.strip().partition(" ")
    path = path.strip()
    if not path or not method:
        raise ValueError(f"{rule!r}: expected 'METHOD /path', e.g. 'GET /v1/files/*'")
    if method.upper() not in METHODS:
        raise ValueError(f"{rule!r}: the method must be one of "
                         f"{', '.join(sorted(METHODS - {'*'}))} or '*'")
    if not path.startswith("/v1/"):
        raise ValueError(f"{rule!r}: the path must start with /v1/")
    if any(c.isspace() for c in path) or "?" in path or "#" in path:
        raise ValueError(f"{rule!r}: the path is a single glob without spaces, '?' or '#'")
    segments = path.split("/")[1:]
    if "**" in segments[:-1] or any("**" in s and s != "**" for s in segments):
        raise ValueError(f"{rule!r}: '**' is allowed only as the last segment ('/v1/x/**')")
    return method.upper(), path
