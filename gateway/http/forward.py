"""Every other ``/v1/*`` call: forwarded verbatim, streaming both ways.

The path is checked (:func:`gateway.http.forward_path.forwarded_path`), the caller
authorized for it, and the request routed: a JSON body within ``max_body_bytes`` by
its ``model``; any other body by the ``model`` found in its first
:data:`MODEL_SCAN_BYTES` (JSON or multipart), unless every model goes to the first
upstream anyway. Uploads stream upstream as they arrive, responses stream back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson

from gateway.errors import PayloadTooLarge, UpstreamError
from gateway.http.asgi import ClientGone, DisconnectWatcher, read_body, refuse_duplicate_keys
from gateway.http.attempts import attempts
from gateway.http.auth import Authenticator, authorization
from gateway.http.body_model import json_model_from_prefix, multipart_model
from gateway.http.chat import uncancel
from gateway.http.forward_path import RESOURCES, forwarded_path, forwarded_query
from gateway.http.relay import traced_chunks
from gateway.telemetry import RequestTrace
from gateway.upstream.base import UpstreamClient, UpstreamResponse
from gateway.upstream.router import Upstreams
from gateway.wire.messages import maybe_json

__all__ = ["MODEL_SCAN_BYTES", "ForwardEndpoint"]

MODEL_SCAN_BYTES = 65536
"""How much of a forwarded body (over ``max_body_bytes``, or without a ``content-length``)
is read to find its ``model`` when the upstream depends on it."""


class ForwardEndpoint:
    """The ``/v1/*`` relay of one app."""

    def __init__(self, upstreams: Upstreams, auth: Authenticator, max_body_bytes: int) -> None:
        self.upstreams = upstreams
        self.auth = auth
        self._limit = max_body_bytes

    async def _routing_prefix(self, receive: Any, ctype: bytes, length: bytes | None
                              ) -> tuple[bytes | AsyncIterator[bytes], str]:
        """Read enough of a body not parsed as small JSON to route it by its ``model``.

        A body within ``max_body_bytes`` (declared) is read whole; any other only up to
        :data:`MODEL_SCAN_BYTES`. A body read whole routes by its ``model`` if it has one
        (else to the first upstream, as before); a body read in part must show its
        ``model`` in that prefix, else 413: it is never sent where its model would not go.
        """
        declared = int(length) if length is not None and length.isdigit() else None
        size = max(MODEL_SCAN_BYTES, declared) if declared is not None \
            and declared <= self._limit else MODEL_SCAN_BYTES
        prefix, complete = await _read_prefix(receive, size)
        if ctype.startswith(b"multipart/form-data"):
            model = multipart_model(prefix, ctype)
        elif complete:
            parsed = maybe_json(prefix)
            if isinstance(parsed, dict):
                await refuse_duplicate_keys(prefix)
            model = parsed.get("model") if isinstance(parsed, dict) else None
        else:
            model = json_model_from_prefix(prefix)
        if complete:
            return prefix, model if isinstance(model, str) else ""
        if not isinstance(model, str):
            raise PayloadTooLarge(
                f"The request body is over max_body_bytes ({self._limit} bytes) or has no "
                f"content-length, and its model could not be determined from its first "
                f"{MODEL_SCAN_BYTES} bytes: send a top-level \"model\" (form field "
                f"\"model\" for uploads) first in the body.", param="model")
        return _chain(prefix, _stream_request(receive)), model

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any,
                       trace: RequestTrace) -> int:
        principal = self.auth.authenticate(authorization(scope["headers"]))
        headers = dict(scope["headers"])
        path = forwarded_path(scope)  # as sent, under /v1/, or a 400 (invalid_path)
        self.auth.authorize(principal, scope["method"], scope["path"])
        query = forwarded_query(scope)
        ctype = headers.get(b"content-type", b"")
        length = headers.get(b"content-length")
        body: bytes | AsyncIterator[bytes] | None
        client = self.upstreams.default()
        model = ""
        if scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS") and length is None:
            body = None
        elif ctype.startswith(b"application/json") and length is not None \
                and int(length or 0) <= self._limit:
            body = await read_body(receive, self._limit, length.decode())
            parsed = maybe_json(body)
            if isinstance(parsed, dict):  # routed by what it says: say it once
                await refuse_duplicate_keys(body)
            if isinstance(parsed, dict) and isinstance(parsed.get("model"), str):
                model = parsed["model"]
                client = self.upstreams.route(model)
        elif self.upstreams.model_blind():
            body = _stream_request(receive)
        else:
            body, model = await self._routing_prefix(receive, ctype, length)
            if model:
                client = self.upstreams.route(model)
        replayable = not isinstance(body, AsyncIterator)
        watcher = DisconnectWatcher(receive) if replayable else None
        # The resource (a known name) or "request": never a path segment the client chose.
        head = scope["path"][len("/v1/"):].partition("/")[0]
        operation = head if head in RESOURCES else "request"
        method = scope["method"]
        upstreams = self.upstreams
        plan = upstreams.plan(model, method=method, path=path.split("?")[0],
                              replayable=replayable,
                              targets=None if model else upstreams.single(client))

        async def send_to(target: UpstreamClient, asked: str, h: dict[str, str]
                          ) -> UpstreamResponse:
            out = body
            if asked != model and isinstance(body, bytes):  # a fallback's model rewrite
                out = _with_model(body, asked)
            return await target.send(method, path, h, out, query)

        try:
            async with attempts(upstreams, trace, plan, send_to, scope["headers"],
                                stream=False, operation=operation) as served:
                resp, up = served.resp, served.up
                await send({"type": "http.response.start", "status": resp.status,
                            "headers": resp.headers})
                try:
                    async for chunk in traced_chunks(resp, up):
                        await send({"type": "http.response.body", "body": chunk,
                                    "more_body": True})
                except UpstreamError as err:
                    # The status is out: leave the response unfinished, so the server
                    # drops the connection and the client sees a cut body, not a
                    # complete-looking truncated one (its content-length is not relayed).
                    resp.close()
                    return err.status
                up.response(resp.status, None)
                if watcher:
                    watcher.disarm()
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return resp.status
        except asyncio.CancelledError:
            if watcher is None or not watcher.disconnected or uncancel() > 0:
                raise
            return 499
        finally:
            if watcher:
                watcher.disarm()


def _with_model(body: bytes, model: str) -> bytes:
    """A JSON body with its ``model`` replaced (as read for routing: an object)."""
    parsed = maybe_json(body)
    if not isinstance(parsed, dict):
        return body
    return orjson.dumps({**parsed, "model": model})


async def _stream_request(receive: Any) -> AsyncIterator[bytes]:
    """The request body as it arrives (uploads are not size-limited here)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        if chunk:
            yield chunk
        if not message.get("more_body"):
            return


async def _read_prefix(receive: Any, size: int) -> tuple[bytes, bool]:
    """At least ``size`` bytes of the request body (or all of it) and whether that is all."""
    parts: list[bytes] = []
    read = 0
    while read < size:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        parts.append(chunk)
        read += len(chunk)
        if not message.get("more_body"):
            return b"".join(parts), True
    return b"".join(parts), False


async def _chain(prefix: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    if prefix:
        yield prefix
    async for chunk in rest:
        yield chunk
