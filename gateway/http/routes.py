"""Route allowlists: which ``/v1/*`` calls a caller may make through the gateway.

A rule is ``"METHOD /v1/path-glob"``: ``METHOD`` an HTTP method or ``*`` (any);
in the path, ``*`` matches within one segment (never a ``/``) and a final ``/**``
matches the rest of the path, zero or more segments (``/v1/files/**`` covers
``/v1/files``, ``/v1/files/f-1`` and ``/v1/files/f-1/content``). Paths are
matched decoded, as the gateway routes them, with one trailing ``/`` ignored.

The rule grammar (and the default allowlist) is configuration:
:mod:`gateway.settings.routes` parses it. Rules are compiled once, when the authenticator is built (:class:`RouteSet`): a
request costs a set lookup for exact rules, a regex match per glob rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gateway.errors import PermissionDenied
from gateway.settings.routes import DEFAULT_KEY_ROUTES, METHODS, parse_rule

__all__ = ["DEFAULT_KEY_ROUTES", "METHODS", "RouteNotAllowed", "RouteSet", "parse_rule"]

_SHOWN_PATH = 200


class RouteNotAllowed(PermissionDenied):
    code = "route_not_allowed"


def _regex(path: str) -> re.Pattern[str]:
    out = []
    for segment in path.split("/")[1:]:
        if segment == "**":
            out.append("(?:/.*)?")
        else:
            out.append("/" + "[^/]*".join(re.escape(part) for part in segment.split("*")))
    return re.compile("".join(out))


class RouteSet:
    """A compiled allowlist. ``None`` rules (no list): every route is allowed."""

    __slots__ = ("_exact", "_globs", "allow_all")

    def __init__(self, rules: Iterable[str] | None) -> None:
        self.allow_all = rules is None
        self._exact: set[tuple[str, str]] = set()
        self._globs: list[tuple[str, re.Pattern[str]]] = []
        for rule in rules or ():
            method, path = parse_rule(rule)
            path = path.rstrip("/") if path != "/" else path
            if "*" in path:
                self._globs.append((method, _regex(path)))
            else:
                self._exact.add((method, path))

    def allows(self, method: str, path: str) -> bool:
        if self.allow_all:
            return True
        if len(path) > 1 and path.endswith("/"):
            path = path[:-1]
        exact = self._exact
        if (method, path) in exact or ("*", path) in exact:
            return True
        return any((m == "*" or m == method) and rx.fullmatch(path) for m, rx in self._globs)

    def check(self, method: str, path: str) -> None:
        """Raise :class:`RouteNotAllowed` (403) unless ``method path`` is allowed."""
        if not self.allows(method, path):
            shown = path if len(path) <= _SHOWN_PATH else path[:_SHOWN_PATH] + "…"
            raise RouteNotAllowed(
                f"This API key may not call {method} {shown} through the gateway: the route "
                f"is not among the key's allowed routes. Ask the gateway's operator to grant "
                f"it.")
