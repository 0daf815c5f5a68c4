"""A size cap for the bodies the judge clients read (httpx, and the SDKs' ``httpx2``).

The judges read whole replies (``OpenAIJudge`` through httpx, ``AnthropicJudge``
through the ``anthropic`` SDK's ``httpx2``), so a judge endpoint that answers with a
huge body, or a small compressed one that inflates to gigabytes, would be held in
memory whole — and httpx inflates each network read in one go. :func:`capped_transport`
wraps a client's transport so that:

- the request asks for ``accept-encoding: identity``;
- a reply that is compressed anyway (``gzip``, ``deflate``) is inflated here, at most
  :data:`PIECE` bytes at a time, and handed on decoded (its ``content-encoding``
  removed, so the client does not decode it again); any other encoding is refused;
- the decoded bytes are counted and the read fails with :class:`ReplyTooLarge` (an
  ``HTTPError`` of the client's library, which the judges turn into a
  ``JudgeError``) as soon as they pass ``limit``.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

__all__ = ["PIECE", "capped_transport"]

PIECE = 256 * 1024
"""Most bytes one inflate step produces."""

_ENCODINGS = {"identity": 0, "": 0, "gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS,
              "deflate": zlib.MAX_WBITS}


class _Inflater:
    """``deflate`` may come zlib-wrapped (as specified) or raw (as some servers send it)."""

    def __init__(self, encoding: str) -> None:
        self._deflate = encoding == "deflate"
        self._z = zlib.decompressobj(_ENCODINGS[encoding])
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        try:
            out = self._z.decompress(data, PIECE)
        except zlib.error:
            if not (self._deflate and not self._started):
                raise
            self._z = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._z.decompress(data, PIECE)
        self._started = True
        yield out
        while self._z.unconsumed_tail:
            yield self._z.decompress(self._z.unconsumed_tail, PIECE)


def _classes(lib: ModuleType) -> tuple[type[Exception], type[Any], type[Any]]:
    """``ReplyTooLarge``, the capped stream and the transport for ``lib`` (httpx or httpx2,
    whose base classes are distinct)."""

    class ReplyTooLarge(lib.DecodingError):  # type: ignore[misc,name-defined]
        """The reply went over the judge's ``max_response_bytes``."""

    class CappedStream(lib.AsyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any, encoding: str, limit: int, request: Any) -> None:
            self._inner = inner
            self._inflater = _Inflater(encoding) if _ENCODINGS[encoding] else None
            self._limit = limit
            self._request = request

        async def __aiter__(self) -> AsyncIterator[bytes]:
            total = 0
            async for raw in self._inner:
                try:
                    pieces = self._inflater.feed(raw) if self._inflater else iter((raw,))
                    for piece in pieces:
                        total += len(piece)
                        if total > self._limit:
                            raise ReplyTooLarge(
                                f"reply over max_response_bytes ({self._limit} bytes)",
                                request=self._request)
                        if piece:
                            yield piece
                except zlib.error as exc:
                    raise lib.DecodingError("reply is not valid compressed data",
                                            request=self._request) from exc

        async def aclose(self) -> None:
            await self._inner.aclose()

    class CappedTransport(lib.AsyncBaseTransport):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any, limit: int) -> None:
            self._inner = inner
            self._limit = limit

        async def handle_async_request(self, request: Any) -> Any:
            request.headers["accept-encoding"] = "identity"
            response = await self._inner.handle_async_request(request)
            encoding = response.headers.get("content-encoding", "identity").strip().lower()
            if encoding not in _ENCODINGS:
                await response.aclose()
                raise lib.DecodingError(f"reply has content-encoding {encoding[:40]!r}, "
                                        "not identity, gzip or deflate", request=request)
            declared = response.headers.get("content-length", "")
            if not _ENCODINGS[encoding] and declared.isdigit() and int(declared) > self._limit:
                await response.aclose()
                raise ReplyTooLarge(f"reply over max_response_bytes ({self._limit} bytes)",
                                    request=request)
            headers = [(k, v) for k, v in response.headers.multi_items()
                       if k.lower() not in ("content-encoding", "content-length")]
            return lib.Response(response.status_code, headers=headers,
                                stream=CappedStream(response.stream, encoding, self._limit,
                                                    request),
                                extensions=response.extensions)

        async def aclose(self) -> None:
            await self._inner.aclose()

    return ReplyTooLarge, CappedStream, CappedTransport


_BY_LIB: dict[str, tuple[type[Exception], type[Any], type[Any]]] = {}


def capped_transport(lib: ModuleType, limit: int, **transport_kwargs: Any) -> Any:
    """A ``lib.AsyncHTTPTransport(**transport_kwargs)`` whose replies stop at ``limit``
    decoded bytes (``lib``: the ``httpx`` or ``httpx2`` module)."""
    classes = _BY_LIB.get(lib.__name__)
    if classes is None:
        classes = _BY_LIB[lib.__name__] = _classes(lib)
    return classes[2](lib.AsyncHTTPTransport(**transport_kwargs), limit)
