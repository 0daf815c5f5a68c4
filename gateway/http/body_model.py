"""The ``model`` of a forwarded ``/v1/*`` request from a bounded prefix of its body.

Routing by model must not buffer a large body (an upload, a big embeddings batch):
the proxy reads a prefix, finds the model here, then streams prefix + rest on.
JSON: only a top-level ``"model"`` string counts; multipart: exactly one ``model``
form field among the complete parts. Anything ambiguous is ``None`` (the proxy then
answers 413 rather than guess an upstream).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["json_model_from_prefix", "multipart_model"]

_WS = re.compile(rb"[ \t\r\n]*")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(rb"[^,}\]\s]+")
_NESTED = re.compile(rb'"(?:[^"\\]|\\.)*"|[{\[]|[}\]]|[^"{}\[\]]+', re.DOTALL)


def json_model_from_prefix(data: bytes) -> Any:
    """The top-level ``"model"`` value of a JSON object from a prefix of its text.

    Keys are decoded (``"mod\\u0065l"`` is ``model``), nested objects and strings are
    skipped. ``None`` if the prefix does not show it whole, if it is not a string, or if
    the prefix holds it twice (ambiguous: parsers differ on which one wins)."""
    found: Any = None
    pos = _WS.match(data).end()  # type: ignore[union-attr]
    if data[pos:pos + 1] != b"{":
        return None
    pos += 1
    while True:
        pos = _WS.match(data, pos).end()  # type: ignore[union-attr]
        key = _STRING.match(data, pos)
        if key is None:
            return found  # the end of the object, or of the prefix
        pos = _WS.match(data, key.end()).end()  # type: ignore[union-attr]
        if data[pos:pos + 1] != b":":
            return found
        pos = _WS.match(data, pos + 1).end()  # type: ignore[union-attr]
        start = pos
        if data[pos:pos + 1] == b'"':
            value = _STRING.match(data, pos)
            if value is None:
                return found
            pos = value.end()
        elif data[pos:pos + 1] in (b"{", b"["):
            depth = 0
            while True:
                token = _NESTED.match(data, pos)
                if token is None:
                    return found
                pos = token.end()
                first = data[token.start():token.start() + 1]
                depth += 1 if first in (b"{", b"[") else -1 if first in (b"}", b"]") else 0
                if depth == 0:
                    break
        else:
            value = _SCALAR.match(data, pos)
            if value is None:
                return found
            pos = value.end()
        if orjson.loads(key.group()) == "model":
            if found is not None:
                return None
            found = orjson.loads(data[start:pos]) if data[start:start + 1] == b'"' else None
            if found is None:
                return None
        pos = _WS.match(data, pos).end()  # type: ignore[union-attr]
        if data[pos:pos + 1] != b",":
            return found
        pos += 1


_BOUNDARY = re.compile(rb'boundary="?([^";\s]+)"?', re.IGNORECASE)
_FIELD = re.compile(rb'^content-disposition:[^\r\n]*;\s*name="?([^";\r\n]+)"?',
                    re.IGNORECASE | re.MULTILINE)


def multipart_model(data: bytes, ctype: bytes) -> str | None:
    """The ``model`` form field among the complete parts in ``data``, or ``None`` (also
    if it appears twice, or is not UTF-8)."""
    boundary = _BOUNDARY.search(ctype)
    if boundary is None:
        return None
    values = []
    for part in data.split(b"--" + boundary.group(1))[1:-1]:  # the last may be cut
        head, sep, value = part.partition(b"\r\n\r\n")
        field = _FIELD.search(head)
        if sep and field and field.group(1) == b"model" and b"filename" not in head.lower():
            values.append(value.removesuffix(b"\r\n"))
    if len(values) != 1:
        return None
    try:
        return values[0].decode()
    except UnicodeDecodeError:
        return None
