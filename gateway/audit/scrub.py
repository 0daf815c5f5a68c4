"""Credential-named keys out of audit records: :func:`scrub` (a copy without them, at
any depth) and :class:`ShapeCache` (whether a record holds one, remembered per dict
shape, so that records of a shape seen before are encoded as they are)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["SECRET_KEYS", "ShapeCache", "scrub"]

SECRET_KEYS = frozenset({"authorization", "api_key", "api-key", "x-api-key", "apikey",
                         "cookie", "set-cookie", "proxy-authorization"})


_SCALARS = frozenset({str, int, float, bool, type(None)})


def scrub(value: Any) -> Any:
    """A copy of ``value`` without credential-named keys, at any depth."""
    t = type(value)
    if t in _SCALARS:
        return value
    if t is dict or isinstance(value, Mapping):
        return {k: v if type(v) in _SCALARS else scrub(v) for k, v in value.items()
                if not (type(k) is str and k.lower() in SECRET_KEYS)}
    if t is list or t is tuple:
        return [v if type(v) in _SCALARS else scrub(v) for v in value]
    return value


_SHAPES_MAX = 4096
"""Record shapes (key tuples) a :class:`ShapeCache` remembers."""


class ShapeCache:
    """Whether a record holds a credential key, remembered per dict shape (key tuple):
    records of one shape seen before cost no allocation. Owned by one sink (used where
    it encodes: its writer thread or its loop)."""

    __slots__ = ("_shapes",)

    def __init__(self) -> None:
        self._shapes: dict[tuple[Any, ...], bool] = {}

    def has_secret(self, value: Any) -> bool:
        """Whether :func:`scrub` would remove anything from ``value``."""
        t = type(value)
        if t is dict:
            shape = tuple(value)
            bad = self._shapes.get(shape)
            if bad is None:
                bad = any(type(k) is str and k.lower() in SECRET_KEYS for k in shape)
                if len(self._shapes) < _SHAPES_MAX:
                    self._shapes[shape] = bad
            if bad:
                return True
            values: Any = value.values()
        elif t is list or t is tuple:
            values = value
        else:
            return isinstance(value, Mapping)  # another mapping type: let scrub() copy it
        for v in values:  # a loop, not any(<generator>): every record passes here
            tv = type(v)
            if tv in _SCALARS or ((tv is list or tv is dict) and not v):
                continue
            if self.has_secret(v):
                return True
        return False

    def scrubbed(self, record: Mapping[str, Any]) -> Mapping[str, Any]:
        """``record`` itself when it holds no credential key (it is encoded right away),
        else :func:`scrub`'s copy."""
        return scrub(record) if self.has_secret(record) else record
