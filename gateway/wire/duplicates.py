"""Duplicate keys in a JSON document: :func:`duplicate_key`.

JSON (RFC 8259 §4) leaves a duplicate key's meaning to the parser: orjson, which the
gateway reads bodies with, keeps the last value; other parsers keep the first, or
refuse. A request body with ``"model"`` twice would then be routed, matched to a policy
and verified by one value and served by the upstream by the other, so a client could
escape a model-bound policy (or have a message verified that the upstream never
read). The gateway takes no interpretation: a body with a duplicate key in any object,
at any depth, is refused (400 ``duplicate_key``) wherever a body is read as JSON —
chat completions (:func:`gateway.wire.messages.parse_object`) and forwarded JSON
bodies routed by their ``model``.

Checked with the standard library's C scanner and a pairs hook that builds nothing
(≈ 0.1 ms for a 25 KB chat body, ≈ 16 ms of CPU for 10 MB: from 1 MiB up the HTTP
layer runs it on a thread, ``gateway.http.asgi.read_object``); a document nested deeper than the interpreter's
recursion allows that scanner (orjson accepts 1,024 levels) is checked by an iterative
scan instead. ``body`` must already be valid JSON (orjson parsed it).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

__all__ = ["duplicate_key"]


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> None:
    if len(pairs) > 1:
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _Duplicate(k)
            seen.add(k)
    # Nothing is built: only the keys matter.


_DECODER = json.JSONDecoder(object_pairs_hook=_unique)


def duplicate_key(body: bytes) -> str | None:
    """The first key found twice in one object of the JSON document ``body`` (keys
    compared decoded: ``"model"`` and ``"m\\u006fdel"`` are one), else None."""
    if b"{" not in body:
        return None
    try:
        _DECODER.decode(body.decode("utf-8"))
    except _Duplicate as dup:
        return dup.key
    except RecursionError:
        return _scan(body)
    except ValueError:  # what the standard parser refuses and orjson took: not ours to judge
        return _scan(body)
    return None


_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]')
_SPACE = b" \t\r\n"


def _scan(body: bytes) -> str | None:
    """:func:`duplicate_key` without recursion: strings and brackets, one stack of the
    open objects' keys (None for an array). Slower (a Python step per token)."""
    stack: list[set[str] | None] = []
    top: set[str] | None = None
    for m in _TOKEN.finditer(body):
        token = m.group()
        first = token[0]
        if first == 0x22:  # a string: a key when inside an object and followed by ':'
            if top is None:
                continue
            end = m.end()
            while end < len(body) and body[end] in _SPACE:
                end += 1
            if end >= len(body) or body[end] != 0x3A:
                continue
            key = orjson.loads(token) if b"\\" in token else token[1:-1].decode("utf-8")
            if key in top:
                return str(key)
            top.add(key)
        elif first == 0x7B:
            stack.append(top)
            top = set()
        elif first == 0x5B:
            stack.append(top)
            top = None
        elif stack:
            top = stack.pop()
    return None
