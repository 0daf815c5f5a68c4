"""Bounds on the client-sent data policy selection looks at.

Selection matches ``metadata`` values (non-strings as JSON) and hands ``metadata``
to the layers. A body is bounded in bytes (``max_body_bytes``) but not in shape:
metadata nested a thousand levels deep made JSON encoding recurse until Python's
recursion limit (a 500). :func:`check_metadata` walks it without recursion and
refuses, with a 400, anything deeper or larger than any real use (OpenAI's own
``metadata`` is 16 flat string pairs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.errors import InvalidRequest

__all__ = ["MAX_METADATA_DEPTH", "MAX_METADATA_ITEMS", "check_metadata"]

MAX_METADATA_DEPTH = 16
"""Nesting levels of objects/arrays, ``metadata`` itself being level 1."""
MAX_METADATA_ITEMS = 1024
"""Entries (object members and array elements) at all levels together."""


_SCALARS = frozenset({str, int, float, bool, type(None)})


def check_metadata(metadata: Mapping[str, Any]) -> None:
    """Raise :class:`InvalidRequest` (400, ``param: metadata``) when ``metadata`` is
    nested deeper than :data:`MAX_METADATA_DEPTH` or holds more than
    :data:`MAX_METADATA_ITEMS` entries. Iterative: the depth costs no stack."""
    if len(metadata) <= MAX_METADATA_ITEMS:
        for v in metadata.values():
            if type(v) not in _SCALARS:
                break
        else:
            return  # the usual case: a few flat pairs
    items = 0
    stack: list[tuple[Any, int]] = [(metadata, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_METADATA_DEPTH:
            raise InvalidRequest(
                f"'metadata' is nested more than {MAX_METADATA_DEPTH} levels deep.",
                param="metadata", code="metadata_too_deep")
        children = value.values() if isinstance(value, Mapping) else value
        for child in children:
            items += 1
            if items > MAX_METADATA_ITEMS:
                raise InvalidRequest(
                    f"'metadata' has more than {MAX_METADATA_ITEMS} entries.",
                    param="metadata", code="metadata_too_large")
            if isinstance(child, (Mapping, list)):
                stack.append((child, depth + 1))
