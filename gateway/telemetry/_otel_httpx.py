"""HTTP CLIENT spans for the gateway's own httpx clients: the judge's (private).

The judges call their models over ``httpx`` (``OpenAIJudge``) or the ``anthropic``
SDK's ``httpx2`` fork (``AnthropicJudge``). :func:`instrument_httpx` wraps one
client's transport so that each request is a CLIENT span under the span current
when it is sent (the ``verify {layer}`` span: the telemetry attaches it around a
layer run), carrying the current HTTP semantic conventions, as the upstream's
aiohttp spans do (``_otel_aiohttp.py``): ``http.request.method``, ``url.full``
without query string or userinfo (where some judges carry their key),
``server.address``, ``server.port``, ``http.response.status_code`` and, on failure,
``error.type``. The W3C ``traceparent`` of the span goes out with the request.
Never recorded: headers, bodies.

(``opentelemetry-instrumentation-httpx`` did this before; it records the old HTTP
conventions unless a process-wide environment variable says otherwise, so the
gateway does it itself, in these few lines, for the clients it owns.)
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.telemetry import semconv as sc

__all__ = ["instrument_httpx"]


def _url(request: Any) -> tuple[str, str, int | None]:
    """``url.full`` without query, fragment or userinfo; host; port."""
    url = request.url
    host = url.host or ""
    port = url.port
    netloc = host if port is None else f"{host}:{port}"
    default = {"http": 80, "https": 443}.get(url.scheme)
    return f"{url.scheme}://{netloc}{url.path}", host, port if port is not None else default


def _start(tracer: Tracer, propagator: TraceContextTextMapPropagator, request: Any) -> Any:
    full, host, port = _url(request)
    attrs: dict[str, Any] = {sc.HTTP_REQUEST_METHOD: request.method, sc.URL_FULL: full,
                             sc.SERVER_ADDRESS: host}
    if port is not None:
        attrs[sc.SERVER_PORT] = port
    span = tracer.start_span(request.method, kind=SpanKind.CLIENT, attributes=attrs)
    carrier: dict[str, str] = {}
    propagator.inject(carrier, context=set_span_in_context(span, Context()))
    for key, value in carrier.items():
        request.headers[key] = value
    return span


def _ended(span: Any, status: int) -> None:
    span.set_attribute(sc.HTTP_RESPONSE_STATUS_CODE, status)
    if status >= 400:
        span.set_attribute(sc.ERROR_TYPE, str(status))
        span.set_status(Status(StatusCode.ERROR, str(status)))
    span.end()


def _failed(span: Any, exc: BaseException) -> None:
    kind = type(exc).__qualname__
    span.set_attribute(sc.ERROR_TYPE, kind)
    span.set_status(Status(StatusCode.ERROR, kind))
    span.end()


def _classes(lib: ModuleType) -> tuple[type[Any], type[Any]]:
    """The traced transports (async, sync) for ``lib``: httpx or httpx2, whose base
    classes are distinct."""

    class TracedAsyncTransport(lib.AsyncBaseTransport):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any, tracer: Tracer,
                     propagator: TraceContextTextMapPropagator) -> None:
            self._inner, self._tracer, self._propagator = inner, tracer, propagator

        async def handle_async_request(self, request: Any) -> Any:
            span = _start(self._tracer, self._propagator, request)
            try:
                response = await self._inner.handle_async_request(request)
            except BaseException as exc:
                _failed(span, exc)
                raise
            _ended(span, response.status_code)
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    class TracedTransport(lib.BaseTransport):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any, tracer: Tracer,
                     propagator: TraceContextTextMapPropagator) -> None:
            self._inner, self._tracer, self._propagator = inner, tracer, propagator

        def handle_request(self, request: Any) -> Any:
            span = _start(self._tracer, self._propagator, request)
            try:
                response = self._inner.handle_request(request)
            except BaseException as exc:
                _failed(span, exc)
                raise
            _ended(span, response.status_code)
            return response

        def close(self) -> None:
            self._inner.close()

    return TracedAsyncTransport, TracedTransport


def instrument_httpx(client: Any, tracer: Tracer,
                     propagator: TraceContextTextMapPropagator) -> None:
    """Trace every request of one httpx or httpx2 client (sync or async).

    httpx has no public hook for wrapping a client's transport once built, so the
    client's own transport (and any mounted ones) are replaced with traced wrappers
    around them: the client's settings (limits, the size cap) are kept."""
    lib = importlib.import_module("httpx2" if type(client).__module__.startswith("httpx2")
                                  else "httpx")
    traced_async, traced_sync = _classes(lib)
    cls = traced_async if hasattr(client, "aclose") else traced_sync
    client._transport = cls(client._transport, tracer, propagator)
    for pattern, transport in list(client._mounts.items()):
        if transport is not None:
            client._mounts[pattern] = cls(transport, tracer, propagator)
