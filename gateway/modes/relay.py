"""Reading an upstream stream for verification: relayed as it comes, or read whole.

- :func:`relay_accumulating` — shadow streams: forward upstream bytes exactly as
  they arrive (same chunks, same timing) while folding them into the front door's
  :class:`~gateway.wire.base.StreamFold` (for chat completions a
  :class:`~gateway.wire.sse.StreamAccumulator`).
- :func:`read_all` — ``streaming: buffer``: read the whole upstream stream (raw bytes
  kept, so an unchanged answer is replayed byte for byte). Its fold's ``unreadable``
  count (data events that are not JSON, e.g. invalid UTF-8, or not events of the
  format: their content is not in the accumulated answer) makes the inline paths
  treat such a stream as unverifiable.

The hold-back of ``streaming: passthrough`` is :mod:`gateway.modes.holdback`.
"""

from __future__ import annotations

from gateway.errors import UpstreamError, UpstreamTooLarge, UpstreamTruncated
from gateway.http.exchange import ChatExchange
from gateway.http.relay import traced_chunks
from gateway.telemetry import UpstreamTrace
from gateway.types import Headers
from gateway.upstream.base import UpstreamResponse
from gateway.wire.base import StreamFold

__all__ = ["failed", "is_sse", "read_all", "relay_accumulating"]


def is_sse(resp: UpstreamResponse) -> bool:
    return resp.content_type.startswith("text/event-stream")


def failed(up: UpstreamTrace, err: UpstreamError) -> UpstreamError:
    """``err``, recorded on the upstream call's span."""
    up.error(type(err).__name__)
    return err


async def relay_accumulating(x: ChatExchange, resp: UpstreamResponse, up: UpstreamTrace,
                             headers: Headers, acc: StreamFold | None = None,
                             ) -> tuple[StreamFold | None, str | None]:
    """Relay the upstream stream verbatim, folding it into ``acc`` (a new fold of the
    exchange's format if not given: a caller that passes its own can read the answer
    so far meanwhile).

    Return ``(acc, None)``, or ``(None, note)`` when the answer cannot be verified: the
    stream was cut or truncated (it then ends with an error event), or went over
    ``max_response_bytes``: from there on it is relayed without being held (the client
    gets it all; the accumulated answer is dropped)."""
    acc = acc if acc is not None else x.fmt.fold()
    await x.start_stream(resp.status, headers)
    note: str | None = None
    limit, held = resp.max_bytes, 0
    watch = x.fmt.end_watch()  # the end of what is no longer folded
    try:
        async for chunk in traced_chunks(resp, up):
            await x.send_body(chunk)
            if note is None:
                held += len(chunk)
                if held <= limit:
                    acc.feed_bytes(chunk)
                    continue
                resp.too_large()  # logged; the stream goes on, unheld
                note = f"not verified: {UpstreamTooLarge.code}"
                acc.drop_content()
            watch.feed(chunk)
        if acc.truncated if note is None else not watch.ended():
            raise resp.truncated()
    except UpstreamError as err:
        up.error(type(err).__name__)
        x.status = err.status
        note = f"not verified: {err.code}" if isinstance(err, UpstreamTruncated) \
            else "not verified: the upstream stream was cut"
        await x.send_body(x.fmt.error_event(err.body(), acc))
    else:
        if note is None and up.recording:
            up.response(resp.status, acc.completion())
    await x.end_stream()
    if note is None and acc.error is not None:
        note = "not verified: the upstream stream was cut"
    return (acc, None) if note is None else (None, note)


async def read_all(resp: UpstreamResponse, up: UpstreamTrace, acc: StreamFold
                   ) -> tuple[bytes, StreamFold]:
    """Read a whole SSE body into ``acc``, at most ``max_response_bytes`` (else
    UpstreamTooLarge); UpstreamError (a cut or truncated stream) propagates."""
    parts: list[bytes] = []
    limit, held = resp.max_bytes, 0
    async for chunk in traced_chunks(resp, up):  # a cut stream's UpstreamError propagates
        held += len(chunk)
        if held > limit:
            raise failed(up, resp.too_large())
        parts.append(chunk)
        acc.feed_bytes(chunk)
    if acc.truncated:
        raise failed(up, resp.truncated())
    if up.recording:
        up.response(resp.status, acc.completion())
    return b"".join(parts), acc
