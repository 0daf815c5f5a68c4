"""The upstream contract: what a provider implements so the gateway can relay to it.

An upstream is an HTTP model server the gateway forwards requests to. Everything
above this package (the front doors in ``gateway.http``, the modes in
``gateway.modes``) speaks **OpenAI's wire format** to an :class:`UpstreamClient`
and reads an :class:`UpstreamResponse` in it; a provider whose own API differs
translates at this boundary, in both directions.

Adding a provider
-----------------
1. ``gateway/upstream/<provider>.py``: a subclass of :class:`UpstreamClient` whose
   :meth:`~UpstreamClient.send` takes an OpenAI-style request (method, OpenAI path
   such as ``/chat/completions``, headers, body) and returns an
   :class:`UpstreamResponse` whose status, headers and body are OpenAI's shapes
   (a ``chat.completion`` for JSON, ``chat.completion.chunk`` SSE for a stream, the
   OpenAI error body for an error), plus :meth:`~UpstreamClient.build_headers` for
   its authentication. ``gateway/upstream/openai.py`` is the pooled aiohttp client
   the others reuse (the Anthropic client subclasses it and translates).
2. Translators named ``<from>_<to>.py``, pure functions with a test file each:
   ``openai_<provider>.py`` turns OpenAI requests into the provider's,
   ``<provider>_openai.py`` turns its responses, errors and stream events into
   OpenAI's. They pair: a request translated one way is answered through the other.
3. A ``kind`` value in ``UpstreamConfig`` (``gateway/settings/schema.py``) and a
   branch in :func:`gateway.upstream.open_client`.

Rules every client keeps (the tests in ``tests/upstream`` and ``tests/security``
hold them to it): library exceptions become the gateway's
:class:`~gateway.errors.UpstreamError` tree here (``raise … from exc``), never
escaping as aiohttp's or httpx's; a body the gateway holds stops at
``max_response_bytes`` (:meth:`UpstreamResponse.read`, or :meth:`~UpstreamResponse.
too_large` for a caller counting what it keeps); credentials never appear in an
error message; the response headers handed on are :func:`relayable_headers`, and no
configured secret reaches a client in them or in an error body
(:mod:`gateway.upstream.scrub`: the aiohttp client reads an error body whole when it
arrives and hands on what a client may see of it).

The judge (``gateway/upstream/judge.py``) calls the same providers for the
model-based layers; see ``docs/architecture.md`` for why it has its own client.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable

from gateway.errors import UpstreamTooLarge, UpstreamTruncated
from gateway.settings import UpstreamConfig

__all__ = ["RawHeaders", "UpstreamClient", "UpstreamResponse", "read_chunks",
           "relayable_headers", "too_large", "truncated"]

log = logging.getLogger("gateway.upstream")

RawHeaders = list[tuple[bytes, bytes]]

# Response headers never relayed to the client: hop-by-hop ones (and any the upstream's
# ``Connection`` names), those uvicorn recomputes, and those about the upstream's own
# origin — cookies, ``alt-svc``, HSTS — which a client would apply to the gateway's.
# Every ``x-verity-*`` is the gateway's to set: an upstream's is dropped too
# (``_GATEWAY_PREFIX``), whatever its case. docs/configuration.md lists them.
_DROP_RESPONSE = frozenset({
    b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"te",
    b"trailer", b"upgrade", b"proxy-authenticate", b"proxy-authorization",
    b"content-length", b"content-encoding", b"server", b"date",
    b"set-cookie", b"set-cookie2", b"alt-svc", b"strict-transport-security",
})
_GATEWAY_PREFIX = b"x-verity-"


def relayable_headers(raw: Iterable[tuple[bytes, bytes]]) -> RawHeaders:
    """The upstream response headers a client may see, names lower-cased."""
    out: RawHeaders = []
    named: set[bytes] = set()  # hop-by-hop by the upstream's own Connection header
    for k, v in raw:
        name = k.lower()
        if name == b"connection":
            named.update(t.strip().lower() for t in v.split(b","))
        if name not in _DROP_RESPONSE and not name.startswith(_GATEWAY_PREFIX):
            out.append((name, v))
    if named:
        out = [h for h in out if h[0] not in named]
    return out


class UpstreamResponse(ABC):
    """A response whose body has not been read yet, in OpenAI's shapes. Always
    :meth:`release` it (the callers do, in a ``finally``).

    :meth:`read` holds the body, so it stops at :attr:`max_bytes`; :meth:`iter_chunks`
    passes bytes on uncounted, and a caller that keeps them counts them
    (:meth:`too_large`).
    """

    __slots__ = ()

    status: int
    """The HTTP status, as OpenAI would give it (a provider's own codes mapped)."""
    headers: RawHeaders
    """Headers a client may see (:func:`relayable_headers`), names lower-cased."""
    max_bytes: int
    """``max_response_bytes`` of the upstream: most body bytes the gateway holds."""

    @property
    @abstractmethod
    def content_type(self) -> str:
        """``text/event-stream…`` for a stream, ``application/json…`` otherwise."""

    @abstractmethod
    def header(self, name: str) -> str | None:
        """One response header's value (case-insensitive), or None."""

    @abstractmethod
    def too_large(self) -> UpstreamTooLarge:
        """The error for a body over :attr:`max_bytes` (raised by whoever counted it)."""

    @abstractmethod
    def truncated(self) -> UpstreamTruncated:
        """The error for a chat completion stream that ended before its end."""

    @abstractmethod
    async def read(self) -> bytes:
        """The whole body, at most :attr:`max_bytes` (else :class:`UpstreamTooLarge`);
        a cut body raises :class:`~gateway.errors.UpstreamStreamError`, a stalled one
        :class:`~gateway.errors.UpstreamTimeout`."""

    @abstractmethod
    def iter_chunks(self) -> AsyncIterator[bytes]:
        """Body bytes as they arrive, never waiting for more than the next piece (one
        write downstream per network read); errors as for :meth:`read`."""

    @abstractmethod
    def release(self) -> None:
        """Give the connection back (or drop it, if the body was not read to its end)."""

    @abstractmethod
    def close(self) -> None:
        """Drop the connection (the client went away mid-body)."""


class UpstreamClient(ABC):
    """A pooled client for one configured upstream; opened in the app lifespan
    (:func:`gateway.upstream.open_client`) and closed there (:meth:`aclose`)."""

    config: UpstreamConfig
    base_url: str
    """The configured base URL (``…/v1``): spans name it (server address and port)."""
    server_address: str
    """Its host, for spans and metrics."""

    @property
    @abstractmethod
    def has_own_key(self) -> bool:
        """Whether the gateway holds a key for this upstream (``api_key_env``)."""

    @abstractmethod
    def build_headers(self, client_headers: Iterable[tuple[bytes, bytes]],
                      use_own_key: bool, extra: RawHeaders | None = None) -> dict[str, str]:
        """The request headers to send: the client's forwardable ones, authentication
        per the auth mode (``use_own_key``: gateway keys, the upstream's own key
        replaces the client's credentials; else the client's are forwarded), then
        ``extra`` (the trace context)."""

    @abstractmethod
    async def send(self, method: str, path: str, headers: dict[str, str],
                   body: bytes | AsyncIterator[bytes] | None = None,
                   query: str = "") -> UpstreamResponse:
        """Send one OpenAI-style request (``path`` relative to ``/v1``, e.g.
        ``/chat/completions``; ``path`` and ``query`` already percent-encoded) and
        return as soon as the status line and headers arrive. Connect errors and
        timeouts raise :class:`~gateway.errors.UpstreamError` subclasses."""

    @abstractmethod
    async def aclose(self) -> None:
        """Close the pool."""


def too_large(upstream: str, limit: int) -> UpstreamTooLarge:
    """The error for a body over ``limit``; logged here, once, for the operator (a cap
    that real answers reach needs raising)."""
    log.warning("upstream %r: response over max_response_bytes (%d bytes)", upstream, limit)
    return UpstreamTooLarge(
        f"upstream {upstream!r} sent a response over max_response_bytes ({limit} bytes)")


def truncated(upstream: str) -> UpstreamTruncated:
    """The error for a stream that just stopped; logged here."""
    log.warning("upstream %r: stream ended without a finish reason or [DONE] (truncated)",
                upstream)
    return UpstreamTruncated(
        f"upstream {upstream!r} ended the stream without a finish reason or [DONE]: "
        f"the answer is incomplete")


async def read_chunks(response: UpstreamResponse) -> bytes:
    """All of ``response.iter_chunks()``, at most ``max_bytes`` (else its
    :meth:`~UpstreamResponse.too_large`): ``read`` of a response translated as it
    arrives, whose output is what is counted."""
    parts: list[bytes] = []
    total = 0
    async for chunk in response.iter_chunks():
        total += len(chunk)
        if total > response.max_bytes:
            raise response.too_large()
        parts.append(chunk)
    return b"".join(parts)
