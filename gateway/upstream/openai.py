"""OpenAI-compatible upstreams (``kind: openai``): the HTTP client on the hot path.

One pooled :class:`OpenAIUpstreamClient` per configured upstream (the
:class:`~gateway.upstream.base.UpstreamClient` contract), created in the app
lifespan and closed on shutdown. It is built on aiohttp: on this kind of machine
httpx's connection pool collapses at concurrency 64 against a slow upstream
(encode/httpx#3215), while aiohttp holds ~1,000 requests/s at ~1 ms CPU per
request — see ``docs/benchmarks.md``. aiohttp exceptions are converted to the
gateway's error tree here, at the boundary.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import aiohttp
from yarl import URL

from gateway.errors import (
    UpstreamConnectError,
    UpstreamStreamError,
    UpstreamTimeout,
    UpstreamTooLarge,
    UpstreamTruncated,
)
from gateway.settings import UpstreamConfig
from gateway.upstream.base import (
    RawHeaders,
    UpstreamClient,
    UpstreamResponse,
    relayable_headers,
    too_large,
    truncated,
)
from gateway.upstream.responses_bridge import send_via_chat
from gateway.upstream.scrub import MAX_ERROR_BYTES, Secrets, relayable_error

__all__ = ["OpenAIResponse", "OpenAIUpstreamClient", "timed_out"]

PIECED_BODY = 1024 * 1024
"""A request body this large (bytes) goes upstream in :data:`PIECE` pieces, the event
loop serving other clients between them, instead of one write of the whole body (a
10 MB one held the loop for milliseconds); its ``content-length`` is the same."""
PIECE = 1 << 16


class _PiecedBody(aiohttp.payload.Payload):
    """``bytes`` written in pieces (aiohttp's ``BytesIOPayload`` would copy them
    first); reusable: a retry writes it whole again."""

    _autoclose = True

    def __init__(self, value: bytes) -> None:
        super().__init__(value, content_type="application/octet-stream")
        self._size = len(value)

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return bytes(self._value).decode(encoding, errors)

    async def as_bytes(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return bytes(self._value)

    async def write(self, writer: Any) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        view = memoryview(self._value)
        if content_length is not None:
            view = view[:content_length]
        for start in range(0, len(view), PIECE):
            if start:
                await asyncio.sleep(0)  # the loop serves others between pieces
            await writer.write(view[start:start + PIECE])


def _request_data(body: bytes | AsyncIterator[bytes] | None) -> Any:
    """What aiohttp sends for ``body`` (:data:`PIECED_BODY`)."""
    if isinstance(body, bytes) and len(body) >= PIECED_BODY:
        return _PiecedBody(body)
    return body


# Request headers never forwarded upstream (hop-by-hop, or set by the client itself).
# ``expect: 100-continue`` was answered by our own server; forwarded, it would make
# aiohttp hold the body until upstream sends a 100.
_DROP_REQUEST = frozenset({
    b"host", b"connection", b"keep-alive", b"proxy-authorization", b"proxy-connection",
    b"te", b"trailer", b"transfer-encoding", b"upgrade", b"content-length", b"expect",
    b"accept-encoding",
})
# Every ``x-verity-*`` request header is for the gateway (``x-verity-policy``,
# ``x-verity-detail``, ``x-verity-profile``) or forged: none goes upstream, where it could
# pose as the gateway's word to a second gateway or a logging proxy behind it.
_GATEWAY_PREFIX = b"x-verity-"
# Client credentials for upstream itself, and the headers that pick which account a key
# acts for; in gateway-keys mode the gateway supplies the upstream's key, so a client's
# own provider key (Azure's ``api-key``, ``x-api-key``) is not sent along with it, nor
# may a client point the shared key at another organization or project.
_CLIENT_CREDENTIALS = frozenset({b"authorization", b"api-key", b"x-api-key",
                                 b"openai-organization", b"openai-project"})
class OpenAIResponse(UpstreamResponse):
    """An aiohttp response whose body has not been read yet. Always ``release()`` it.

    :meth:`read` holds the body, so it stops at ``max_bytes`` (counted as decoded:
    aiohttp inflates a compressed body in bounded pieces as it is read, so a gzip bomb
    costs at most ``max_bytes`` plus one piece); :meth:`iter_chunks` passes bytes on
    uncounted, and a caller that keeps them counts them (:meth:`too_large`).
    """

    __slots__ = ("_config", "_held", "_resp", "_secrets", "headers", "max_bytes", "status")

    def __init__(self, resp: aiohttp.ClientResponse, config: UpstreamConfig,
                 secrets: Secrets) -> None:
        self._resp = resp
        self._config = config
        self._secrets = secrets
        self._held: bytes | None = None
        """An error body, read at once and made relayable (:meth:`hold_error`)."""
        self.max_bytes = config.max_response_bytes
        self.status = resp.status
        self.headers: RawHeaders = secrets.scrub_headers(relayable_headers(resp.raw_headers))

    @property
    def content_type(self) -> str:
        if self._held is not None:  # an error body: JSON, the upstream's or the gateway's
            return "application/json"
        return self._resp.headers.get("content-type", "")

    async def hold_error(self) -> None:
        """Read an error body (status ≥ 400) now, at most :data:`MAX_ERROR_BYTES`, and keep
        what a client may see of it (:func:`~gateway.upstream.scrub.relayable_error`: no
        configured secret, and the OpenAI error shape in place of a body that is not a
        JSON object); :meth:`read` and :meth:`iter_chunks` give that. Called by
        :meth:`OpenAIUpstreamClient.send`, so every path relays an error the same way."""
        data = await self._read(min(self.max_bytes, MAX_ERROR_BYTES))
        if data is None:
            self._resp.close()
        body, replaced = relayable_error(self._config.name, self.status, data,
                                         self.content_type, self._secrets)
        if replaced:
            self.headers = [h for h in self.headers if h[0] != b"content-type"]
            self.headers.append((b"content-type", b"application/json"))
        self._held = body

    def header(self, name: str) -> str | None:
        return self._resp.headers.get(name)

    def too_large(self) -> UpstreamTooLarge:
        """The error for a body over :attr:`max_bytes` (raised by whoever counted it)."""
        return too_large(self._config.name, self.max_bytes)

    def truncated(self) -> UpstreamTruncated:
        """The error for a chat completion stream that ended before its end."""
        return truncated(self._config.name)

    async def read(self) -> bytes:
        """The whole body, at most :attr:`max_bytes` (else :class:`UpstreamTooLarge`)."""
        if self._held is not None:
            return self._held
        data = await self._read(self.max_bytes)
        if data is None:
            raise self.too_large()
        return data

    async def _read(self, limit: int) -> bytes | None:
        """The whole body, or None once it is over ``limit`` bytes (decoded)."""
        declared = self._resp.content_length
        if declared is not None and declared > limit \
                and not self._resp.headers.get("content-encoding"):
            return None
        content = self._resp.content
        parts: list[bytes] = []
        total = 0
        try:
            while chunk := await content.readany():
                total += len(chunk)
                if total > limit:
                    return None
                parts.append(chunk)
        except TimeoutError as exc:
            raise timed_out(self._config, exc, "while sending the response") from exc
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            raise UpstreamStreamError(f"upstream response was cut: {type(exc).__name__}") from exc
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        """Yield body bytes as they arrive, never waiting for more: each piece is
        everything received so far (one write downstream per network read, not one
        per upstream HTTP chunk)."""
        if self._held is not None:
            yield self._held
            return
        content = self._resp.content
        try:
            while True:
                chunk = await content.readany()
                if not chunk:
                    return
                yield chunk
        except TimeoutError as exc:
            raise timed_out(self._config, exc, "in the middle of the stream") from exc
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            raise UpstreamStreamError(f"upstream stream was cut: {type(exc).__name__}") from exc

    def release(self) -> None:
        self._resp.release()

    def close(self) -> None:
        """Drop the connection (used when the client went away mid-body)."""
        self._resp.close()


def timed_out(config: UpstreamConfig, exc: BaseException, when: str) -> UpstreamTimeout:
    """Which of ``config.timeouts`` fired (aiohttp raises a subclass per timeout; the
    overall one is a plain ``TimeoutError``), named in the message."""
    t = config.timeouts
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        what = f"no connection within timeouts.connect ({t.connect:g}s)"
    elif isinstance(exc, aiohttp.ServerTimeoutError):
        what = f"no data for timeouts.read ({t.read:g}s) {when}"
    elif t.total is not None:
        what = f"the exchange went past timeouts.total ({t.total:g}s) {when}"
    else:
        what = f"timed out {when}"
    return UpstreamTimeout(f"upstream {config.name!r}: {what}")


class OpenAIUpstreamClient(UpstreamClient):
    """A pooled aiohttp client for one upstream. Create with :meth:`open`, close with
    :meth:`aclose`."""

    def __init__(self, config: UpstreamConfig, session: aiohttp.ClientSession,
                 secrets: Secrets | None = None) -> None:
        self.config = config
        self.base_url = config.base_url
        base = URL(config.base_url)
        self.server_address = base.host or ""
        # Request URLs are built from encoded parts and sent as built (see send()).
        self._base_encoded = str(base)
        self._session = session
        key = config.api_key()
        self._auth: bytes | None = f"Bearer {key}".encode("latin-1") if key else None
        self._translate_responses = not config.speaks_responses
        self._secrets = secrets if secrets is not None else Secrets([key])
        """Taken out of response headers and error bodies (at least this upstream's key)."""

    @classmethod
    def open(cls, config: UpstreamConfig,
             trace_configs: list[aiohttp.TraceConfig] | None = None,
             secrets: Secrets | None = None) -> OpenAIUpstreamClient:
        """``trace_configs``: from ``Telemetry.aiohttp_trace_configs()`` (HTTP spans);
        ``secrets``: what to keep out of responses (default: this upstream's key)."""
        t = config.timeouts
        connector = aiohttp.TCPConnector(
            limit=config.max_connections, limit_per_host=config.max_connections,
            ttl_dns_cache=300, keepalive_timeout=60, enable_cleanup_closed=False,
        )
        session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=t.total, sock_connect=t.connect,
                                          sock_read=t.read),
            # No Accept-Encoding goes out, but an upstream may compress anyway: decode
            # it here (a no-op for identity bodies), since content-encoding is never
            # relayed and the engine parses the body.
            auto_decompress=True, skip_auto_headers=("User-Agent", "Accept-Encoding"),
            trust_env=False, trace_configs=trace_configs or None,
            # One session serves every caller: a cookie an upstream sets in answer to one
            # client must not ride on the next client's request (a client's own Cookie
            # header is forwarded as given). No jar also skips its lookup per request.
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        return cls(config, session, secrets)

    @property
    def session(self) -> aiohttp.ClientSession:
        return self._session

    @property
    def has_own_key(self) -> bool:
        return self._auth is not None

    def build_headers(self, client_headers: Iterable[tuple[bytes, bytes]],
                      use_own_key: bool, extra: RawHeaders | None = None) -> dict[str, str]:
        """Forwardable request headers; ``Authorization`` per the auth mode."""
        out: dict[str, str] = {}
        for k, v in client_headers:
            if k in _DROP_REQUEST or k.startswith(_GATEWAY_PREFIX) \
                    or (use_own_key and k in _CLIENT_CREDENTIALS):
                continue
            out[k.decode("latin-1")] = v.decode("latin-1")
        if use_own_key:
            out.pop("authorization", None)
            if self._auth is not None:
                out["authorization"] = self._auth.decode("latin-1")
        if extra:
            for k, v in extra:
                out[k.decode("latin-1")] = v.decode("latin-1")
        return out

    async def send(self, method: str, path: str, headers: dict[str, str],
                   body: bytes | AsyncIterator[bytes] | None = None,
                   query: str = "") -> UpstreamResponse:
        """Send one request; return as soon as the status line and headers arrive.

        ``path`` and ``query`` are already percent-encoded (a forwarded request's come
        from :mod:`gateway.http.forward_path`, checked): the URL is sent exactly as given,
        never decoded, normalised (``..``) or re-encoded on the way. ``POST /responses``
        to an upstream without the Responses API (``responses_api: false``) goes as a
        chat completion (:mod:`gateway.upstream.responses_bridge`)."""
        if self._translate_responses and path == "/responses" and method == "POST":
            return await send_via_chat(self.send, headers, body, query)
        url = URL(self._base_encoded + path + (f"?{query}" if query else ""), encoded=True)
        try:
            resp = await self._session.request(method, url, data=_request_data(body),
                                               headers=headers,
                                               allow_redirects=False)
        except TimeoutError as exc:
            raise timed_out(self.config, exc, "before the response headers") from exc
        except aiohttp.ClientConnectorError as exc:
            raise UpstreamConnectError(
                f"cannot connect to upstream {self.config.name!r}") from exc
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            raise UpstreamConnectError(
                f"upstream {self.config.name!r} closed the connection") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamConnectError(
                f"upstream {self.config.name!r} request failed: {type(exc).__name__}") from exc
        response = OpenAIResponse(resp, self.config, self._secrets)
        if response.status >= 400:
            try:
                await response.hold_error()
            except BaseException:
                response.close()
                raise
        return response

    async def aclose(self) -> None:
        await self._session.close()
