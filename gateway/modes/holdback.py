"""``streaming: passthrough``: relay a stream as it comes, but hold its tail back.

:class:`HoldBack` forwards events as they arrive but keeps back the *tail* — what
a verdict may change, as the front door's format decides
(:meth:`~gateway.wire.base.ResponseFormat.hold`): for chat completions the first
event carrying a ``finish_reason``, the usage chunk, ``[DONE]``, an unreadable event
or any other event that is not a chat completion chunk, and anything after
(:class:`~gateway.wire.chat_hold.ChatHold`); for the Responses API the last text
part's closing events and the stream's end
(:class:`~gateway.wire.responses_format.ResponsesHold`) — until the answer is
verified; :meth:`HoldBack.finish` then sends the held tail with the verdict's
addition.
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
from gateway.wire.base import StreamFold, StreamHold
from gateway.wire.sse import SSEParser

__all__ = ["HoldBack"]


class HoldBack:
    """``streaming: passthrough``: relay events, hold the tail until :meth:`finish`."""

    def __init__(self, x: ChatExchange) -> None:
        self.x = x
        self.hold: StreamHold = x.fmt.hold()
        self.error: UpstreamError | None = None
        self._parser = SSEParser()

    @property
    def acc(self) -> StreamFold:
        """The answer so far (every event fed)."""
        return self.hold.acc

    async def relay(self, resp: UpstreamResponse, up: UpstreamTrace, headers: Headers) -> None:
        """Forward events until the tail starts; a cut or truncated stream, or one over
        ``max_response_bytes`` (the answer and tail are held), sets :attr:`error`."""
        await self.x.start_stream(resp.status, headers)
        limit, held = resp.max_bytes, 0
        feed = self.hold.feed
        try:
            async for chunk in traced_chunks(resp, up):
                held += len(chunk)
                if held > limit:
                    raise failed(up, resp.too_large())
                out = b"".join([feed(data) for data in self._parser.feed(chunk)])
                if out:
                    await self.x.send_body(out)
            if self.acc.truncated:
                raise failed(up, resp.truncated())
        except UpstreamError as err:
            self.error = err
            self.x.status = err.status
            self.acc.drop_content()  # not verified: nothing of it is needed any more
        else:
            if up.recording:
                up.response(resp.status, self.acc.completion())

    def completion(self) -> dict[str, Any]:
        return self.acc.completion()

    async def abort(self) -> None:
        """After a cut stream: the error event, as pass-through would send it."""
        assert self.error is not None
        await self.x.end_stream(self.x.fmt.error_event(self.error.body(), self.acc))

    async def finish(self, *, action: str, text: str | None = None,
                     verity: Mapping[str, Any] | None = None,
                     error_body: Mapping[str, Any] | None = None) -> None:
        """Send the held tail with the verdict's addition, and end the body.

        ``action`` ``disclaimer`` appends ``text`` to the answer; ``block`` sends
        ``text`` as the answer's end (for chat: in place of the upstream finish chunks,
        every choice's); ``error_body`` ends the stream with an error event. Otherwise
        the tail goes out as it came."""
        await self.x.end_stream(self.hold.end(action=action, text=text, verity=verity,
                                              error_body=error_body))
