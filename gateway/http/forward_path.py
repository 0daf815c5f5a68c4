"""The path a forwarded ``/v1/*`` request may take upstream, checked on the raw bytes.

The server hands the app a decoded ``scope["path"]`` (``%2F`` already a ``/``,
``%3F`` already a ``?``) and the bytes the client sent in ``scope["raw_path"]``.
Building the upstream URL from the decoded path let a client leave ``base_url``
(``/v1/../../x``, ``/v1/..%2F..%2Fx``, ``%2e%2e``) with the gateway's upstream key,
or turn part of the path into a query (``%3F``) or cut it (``%23``).

:func:`forwarded_path` therefore works on ``raw_path``: it refuses (400
``invalid_path``) any path that, decoded as many times as an upstream or a proxy
in front of it might decode it (up to :data:`MAX_DECODES`), has a ``.`` or ``..``
segment (also as ``..;params``), an empty segment, an encoded ``/`` or a ``\\``,
a ``?`` or ``#``, or a control character (NUL, CR, LF, …); and it returns the
path *as the client wrote it*, which the upstream client sends without
re-encoding (:func:`forwarded_query` does the same for the query string). No
legitimate OpenAI-style path has any of these, so nothing is normalised: a path is
sent exactly as written, or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote_to_bytes

from gateway.errors import InvalidRequest

__all__ = ["MAX_DECODES", "RESOURCES", "InvalidPath", "forwarded_path", "forwarded_query",
           "route_template"]

PREFIX = b"/v1/"
MAX_DECODES = 3
"""Percent-decoding rounds looked through (``%25252e`` is ``.`` after three); a path
still encoded after that many is refused."""

# RFC 3986 path characters (pchar and "/"); a "%" only as the start of an escape.
_RAW_PATH = re.compile(rb"[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*")
_BAD_ESCAPE = re.compile(rb"%(?![0-9A-Fa-f]{2})")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\\?#]")
_DOT_SEGMENT = re.compile(r"(?:^|/)\.\.?(?:;[^/]*)?(?=/|$)")
# Query bytes sent as they are; any other byte is percent-encoded (never decoded).
_RAW_QUERY = re.compile(rb"[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*")
_QUERY_SAFE = "-._~!$&'()*+,;=:@/?%"


class InvalidPath(InvalidRequest):
    code = "invalid_path"


def _refuse(reason: str) -> InvalidPath:
    return InvalidPath(f"The request path is not allowed: {reason}. Forwarded paths must "
                       f"stay under /v1/ as written, with no '.' or '..' segments and no "
                       f"encoded '/', '\\', '?', '#' or control characters.")


def forwarded_path(scope: Mapping[str, Any]) -> str:
    """The path after ``/v1`` (``/files/abc``) exactly as the client sent it; raise
    :class:`InvalidPath` (400) if any decoding of it leaves the ``/v1/`` prefix."""
    raw: bytes | None = scope.get("raw_path")
    if raw is None:  # optional in ASGI: re-encode what the server decoded
        raw = quote(scope["path"], safe="/:@!$&'()*+,;=~").encode("ascii")
    if not raw.startswith(PREFIX):
        raise _refuse("the /v1/ prefix is percent-encoded")
    if not _RAW_PATH.fullmatch(raw) or (b"%" in raw and _BAD_ESCAPE.search(raw)):
        raise _refuse("it has a character that must be percent-encoded (or a bad escape)")
    text = raw.decode("ascii")
    if "%" in text:
        text = _decoded(text)
        if text.count("/") != raw.count(b"/"):
            raise _refuse("it has an encoded '/'")
        if _FORBIDDEN.search(text):
            raise _refuse("it has an encoded '\\', '?', '#' or control character")
    if "//" in text:
        raise _refuse("it has an empty segment")
    if "/." in text and _DOT_SEGMENT.search(text):
        raise _refuse("it has a '.' or '..' segment")
    return raw[len(PREFIX) - 1:].decode("ascii")


def _decoded(text: str) -> str:
    """``text`` percent-decoded until no escape is left (bytes kept as latin-1)."""
    for _ in range(MAX_DECODES):
        text = unquote_to_bytes(text).decode("latin-1")
        if not _ESCAPE.search(text):
            return text
    raise _refuse(f"it is still percent-encoded after {MAX_DECODES} decodings")


def forwarded_query(scope: Mapping[str, Any]) -> str:
    """The query string as sent; bytes a URL cannot carry raw are percent-encoded,
    existing escapes are never decoded (``%2F`` stays ``%2F``)."""
    query: bytes = scope.get("query_string", b"")
    if not query or _RAW_QUERY.fullmatch(query):
        return query.decode("ascii")
    return quote(query, safe=_QUERY_SAFE)


RESOURCES = frozenset({
    "assistants", "audio", "batches", "chat", "completions", "containers", "conversations",
    "embeddings", "evals", "files", "fine_tuning", "images", "models", "moderations",
    "realtime", "responses", "threads", "uploads", "vector_stores",
})
"""The OpenAI API's top-level resources: a forwarded path's route template keeps one of
these names, and nothing else the client wrote."""


def route_template(path: str) -> str:
    """A forwarded ``/v1/*`` path (decoded, as routed) as a route template for span
    names, free of anything the client chose: ``/v1/<resource>`` or
    ``/v1/<resource>/*`` for a known resource (:data:`RESOURCES`), else ``/v1/*``.
    ``/v1/files/file-abc/content`` is ``/v1/files/*``; ``/v1/<random>`` is ``/v1/*``."""
    head, sep, rest = path[len("/v1/"):].partition("/")
    if head not in RESOURCES:
        return "/v1/*"
    return f"/v1/{head}/*" if sep and rest else f"/v1/{head}"
