"""Keeping the gateway's secrets out of what an upstream sends back: :class:`Secrets`.

An upstream, or a proxy or debug page in front of it, may quote the credential it
received: an error message ("Incorrect API key provided: sk-…"), an HTML page listing
the request's headers, a response header echoing ``Authorization``. The gateway relays
upstream errors and headers to its clients, so a quoted upstream key would reach every
client. :class:`Secrets` holds the configured secrets (:func:`configured_secrets`: every
upstream's key, the judge endpoint's, the gateway keys) and takes them out:

- of every relayed **response header** value, whatever the status
  (:meth:`Secrets.scrub_headers`: one search per secret over the joined values);
- of every **error body** (status ≥ 400), which the client reads whole before relaying
  (:meth:`Secrets.scrub_json`: JSON is parsed and its strings searched, so an escaped
  spelling is found too).

A **2xx body is not scanned** (a chat completion, a stream, a forwarded file): quoting a
credential is what error paths do by accident (an authentication failure, a debug
page), and a 2xx answer is the model's text, which never sees the request's headers.
An upstream that *means* to leak its key can encode it, which no scan defeats; scanning
every relayed stream chunk (with a carry across chunk boundaries) would cost every token
on the hot path for no such defence. docs/security.md says so.

Secrets shorter than :data:`MIN_SECRET` characters are not searched for: no provider key
is that short, and redacting, say, ``EMPTY`` (vLLM's placeholder) would garble errors.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

import orjson

from gateway.errors import error_body
from gateway.settings import Settings

__all__ = ["MAX_ERROR_BYTES", "MIN_SECRET", "REDACTED", "Secrets", "configured_secrets",
           "relayable_error", "replaced_error"]

MIN_SECRET = 8
"""Secrets shorter than this are not searched for."""
REDACTED = "[REDACTED]"

RawHeaders = list[tuple[bytes, bytes]]
_UNPARSED: Any = object()
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}")


class Secrets:
    """A fixed set of secret strings, searched for in what an upstream sends back."""

    __slots__ = ("_bytes", "_strings")

    def __init__(self, secrets: Iterable[str | None]) -> None:
        found = sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len,
                       reverse=True)  # longest first: a key containing another is replaced whole
        self._strings: tuple[str, ...] = tuple(found)
        variants: list[bytes] = []
        for s in found:  # as sent, and percent-encoded (a key quoted in a URL, ``location``)
            for form in (s, quote(s, safe="")):
                raw = form.encode("utf-8")
                if raw not in variants:
                    variants.append(raw)
        self._bytes: tuple[bytes, ...] = tuple(variants)

    def __bool__(self) -> bool:
        return bool(self._strings)

    def __len__(self) -> int:
        return len(self._strings)

    def scrub_text(self, text: str) -> str:
        """``text`` with every secret replaced by :data:`REDACTED`."""
        for s in self._strings:
            if s in text:
                text = text.replace(s, REDACTED)
        return text

    def scrub_bytes(self, data: bytes) -> bytes:
        """``data`` with every secret (as sent, or percent-encoded) replaced."""
        for s in self._bytes:
            if s in data:
                data = data.replace(s, REDACTED.encode())
        return data

    def scrub_headers(self, headers: RawHeaders) -> RawHeaders:
        """``headers`` with every secret taken out of their values; the same list when
        none is there (the common case: one search per secret over the joined values)."""
        if not self._bytes or not headers:
            return headers
        joined = b"\n".join([v for _, v in headers])
        if not any(s in joined for s in self._bytes):
            return headers
        return [(k, self.scrub_bytes(v)) for k, v in headers]

    def scrub_json(self, value: Any) -> tuple[Any, bool]:
        """A parsed JSON value with every secret taken out of its strings (object keys
        included), and whether anything was. Containers are changed in place; no
        recursion, so any depth the parser accepted is fine."""
        if isinstance(value, str):
            out = self.scrub_text(value)
            return out, out != value
        changed = False
        stack = [value]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if any(self.scrub_text(k) != k for k in node):
                    items = [(self.scrub_text(k), v) for k, v in node.items()]
                    node.clear()
                    node.update(items)
                    changed = True
                members: Iterable[tuple[Any, Any]] = node.items()
            elif isinstance(node, list):
                members = enumerate(node)
            else:
                continue
            for key, v in members:  # values replaced in place: the size never changes
                if isinstance(v, str):
                    out = self.scrub_text(v)
                    if out != v:
                        node[key] = out
                        changed = True
                elif isinstance(v, dict | list):
                    stack.append(v)
        return value, changed

    def scrub_body(self, data: bytes, parsed: Any = _UNPARSED) -> bytes | None:
        """An error body with every secret taken out: JSON re-encoded only when a string
        held one; any other body with the secrets replaced byte for byte. None when a JSON
        body held one but cannot be re-encoded (nested beyond the encoder's depth): the
        caller relays none of it. ``parsed``: ``data`` already parsed as JSON."""
        if not self._strings:
            return data
        if parsed is _UNPARSED:
            try:
                parsed = orjson.loads(data)
            except orjson.JSONDecodeError:
                return self.scrub_bytes(data)
        parsed, changed = self.scrub_json(parsed)
        if not changed:
            return self.scrub_bytes(data)  # a spelling JSON decoding does not undo (%-encoded)
        try:
            return orjson.dumps(parsed)
        except orjson.JSONEncodeError:
            return None


def configured_secrets(settings: Settings) -> Secrets:
    """Every secret the configuration names: each upstream's key, the judge endpoint's
    key, and the gateway keys (an upstream only ever receives the first two, but a
    client may send a gateway key in a header that is forwarded)."""
    found: list[str | None] = [u.api_key() for u in settings.upstreams]
    if settings.judge.api_key_env:
        found.append(os.environ.get(settings.judge.api_key_env))
    found += [k.secret() for k in settings.auth.keys]
    return Secrets(found)


MAX_ERROR_BYTES = 1024 * 1024
"""Largest upstream error body (status ≥ 400) relayed; a longer one is replaced by
:func:`replaced_error` (no real API's error is near it)."""


def replaced_error(upstream: str, status: int, why: str) -> bytes:
    """The OpenAI error body the client gets instead of an upstream error body that is
    not relayed (``why``: the gateway's words); it quotes nothing the upstream sent."""
    return orjson.dumps(error_body(
        f"upstream {upstream!r} answered HTTP {status} with {why} (not relayed)",
        "upstream_error", "upstream_error"))


def relayable_error(upstream: str, status: int, data: bytes | None, content_type: str,
                    secrets: Secrets) -> tuple[bytes, bool]:
    """What the client gets of an upstream error body (``data``; None: over
    :data:`MAX_ERROR_BYTES`), and whether it is the gateway's replacement (JSON, whatever
    the upstream's content type was).

    A JSON object is relayed, secrets taken out. Anything else — a load balancer's HTML
    502 page, plain text, an empty body, a JSON string — is replaced: the client gets
    the OpenAI error shape with the upstream's status, naming the body's media type,
    never quoting it."""
    if data is None:
        return replaced_error(upstream, status, f"an error body over {MAX_ERROR_BYTES} "
                                                f"bytes"), True
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        return replaced_error(upstream, status, _describe(data, content_type)), True
    scrubbed = secrets.scrub_body(data, parsed)
    if scrubbed is None:
        return replaced_error(upstream, status, "an error body that quotes a configured "
                                                "secret"), True
    return scrubbed, False


def _describe(data: bytes, content_type: str) -> str:
    """An error body that is not a JSON object, in the gateway's words: its media type
    when the upstream named a well-formed one (never the upstream's text otherwise)."""
    if not data.strip():
        return "an empty body"
    media = content_type.partition(";")[0].strip().lower()
    if _MEDIA_TYPE.fullmatch(media) and media != "application/json":
        return f"a {media} body, not a JSON error"
    return "a body that is not a JSON error object"
