"""``streaming: passthrough``: relay a stream as it comes, but hold its tail back.

:class:`HoldBack` forwards events as they arrive but keeps back the *tail* — the
first event carrying a ``finish_reason``, the usage chunk, ``[DONE]``, an unreadable
event or any other event that is not a chat completion chunk (no ``choices`` list:
an error event, other JSON), and anything after — until the answer is verified;
:meth:`HoldBack.finish` then sends the held tail with the verdict's addition, built
by the request's :class:`~gateway.wire.base.ResponseFormat` (for chat completions:
:func:`gateway.wire.chat.verdict_tail`, whose docstring says how the verdict is
signalled in-band).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.errors import UpstreamError
from gateway.http.exchange import ChatExchange
from gateway.http.relay import traced_chunks
from gateway.modes.relay import failed
from gateway.telemetry import UpstreamTrace
from gateway.types import Headers
from gateway.upstream.base import UpstreamResponse
from gateway.wire.base import ResponseFormat
from gateway.wire.chat import CHAT_COMPLETIONS, relayable
from gateway.wire.sse import SSEParser, StreamAccumulator, encode_data, encode_event

__all__ = ["HoldBack"]


class HoldBack:
    """``streaming: passthrough``: relay events, hold the tail until :meth:`finish`."""

    def __init__(self, x: ChatExchange, fmt: ResponseFormat = CHAT_COMPLETIONS) -> None:
        self.x = x
        self.fmt = fmt
        self.acc = StreamAccumulator()
        self.tail: list[bytes] = []
        self.error: UpstreamError | None = None
        self._parser = SSEParser()

    async def relay(self, resp: UpstreamResponse, up: UpstreamTrace, headers: Headers) -> None:
        """Forward events until the tail starts; a cut or truncated stream, or one over
        ``max_response_bytes`` (the answer and tail are held), sets :attr:`error`."""
        await self.x.start_stream(resp.status, headers)
        limit, held = resp.max_bytes, 0
        try:
            async for chunk in traced_chunks(resp, up):
                held += len(chunk)
                if held > limit:
                    raise failed(up, resp.too_large())
                out: list[bytes] = []
                for data in self._parser.feed(chunk):
                    obj = self.acc.feed_data(data)
                    # From the first event that is not a readable chat completion chunk
                    # on, everything is held: it cannot be verified, and on_error decides
                    # at finish() whether it goes out.
                    if self.tail or self.acc.unreadable or not relayable(obj):
                        self.tail.append(data)
                    else:
                        out.append(encode_data(data))
                if out:
                    await self.x.send_body(b"".join(out))
            if self.acc.truncated:
                raise failed(up, resp.truncated())
        except UpstreamError as err:
            self.error = err
            self.x.status = err.status
            self.acc.drop_content()  # not verified: nothing of it is needed any more
            self.tail = []
        else:
            if up.recording:
                up.response(resp.status, self.acc.completion())

    def completion(self) -> dict[str, Any]:
        return self.acc.completion()

    async def abort(self) -> None:
        """After a cut stream: the error event, as pass-through would send it."""
        assert self.error is not None
        await self.x.end_stream(encode_event(self.error.body()))

    async def finish(self, *, action: str, text: str | None = None,
                     verity: Mapping[str, Any] | None = None,
                     error_body: Mapping[str, Any] | None = None) -> None:
        """Send the held tail with the verdict's addition, and end the body.

        ``action`` ``disclaimer`` adds ``text`` before choice 0's finish; ``block``
        sends ``text`` in place of the upstream finish chunks (every choice's);
        ``error_body`` ends the stream with an error event. Otherwise the tail goes
        out as it came."""
        changed = error_body is not None or action == "block" \
            or (action == "disclaimer" and bool(text))
        tail = self.fmt.verdict_tail(self.tail, self.completion() if changed else {},
                                     action=action, text=text, verity=verity,
                                     error_body=error_body)
        await self.x.end_stream(tail)
