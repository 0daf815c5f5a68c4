"""HTTP CLIENT spans for the upstream aiohttp session (private to telemetry).

``opentelemetry-instrumentation-aiohttp-client`` does this with the same aiohttp
``TraceConfig`` hooks, but its newest release (0.66b1) pins
``opentelemetry-api``/``-semantic-conventions`` one patch behind the SDK we run,
so it cannot be installed beside it. These ~60 lines give the same span with no
dependency and without any global context: the parent is read from the
``traceparent`` the gateway already put on the request (the ``chat``
span), and replaced with the HTTP span's own so the upstream continues from it.

Recorded: method, ``url.full`` without query or credentials, server address and
port, status code, ``error.type``. Never recorded: headers.
"""

from __future__ import annotations

from types import SimpleNamespace

import aiohttp
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.telemetry import semconv as sc

__all__ = ["trace_config"]


def trace_config(tracer: Tracer, propagator: TraceContextTextMapPropagator) -> aiohttp.TraceConfig:
    async def on_start(_session: aiohttp.ClientSession, ctx: SimpleNamespace,
                       params: aiohttp.TraceRequestStartParams) -> None:
        traceparent = params.headers.get("traceparent")
        if traceparent is None:
            ctx.span = None  # not a traced gateway call: no orphan root spans
            return
        carrier = {"traceparent": traceparent}
        if "tracestate" in params.headers:
            carrier["tracestate"] = params.headers["tracestate"]
        url = params.url
        method = sc.known_method(params.method)  # a forwarded method is the client's
        span = tracer.start_span(method if method != sc.OTHER_METHOD else "HTTP",
                                 kind=SpanKind.CLIENT,
                                 context=propagator.extract(carrier, context=Context()),
                                 attributes={
                                     sc.HTTP_REQUEST_METHOD: method,
                                     sc.URL_FULL: str(url.with_query(None).with_fragment(None)
                                                      .with_user(None)),
                                     sc.SERVER_ADDRESS: url.host or "",
                                     sc.SERVER_PORT: url.port or 0,
                                 })
        ctx.span = span
        out: dict[str, str] = {}
        propagator.inject(out, context=set_span_in_context(span, Context()))
        for key, value in out.items():
            params.headers[key] = value

    async def on_end(_session: aiohttp.ClientSession, ctx: SimpleNamespace,
                     params: aiohttp.TraceRequestEndParams) -> None:
        span = getattr(ctx, "span", None)
        if span is None:
            return
        status = params.response.status
        span.set_attribute(sc.HTTP_RESPONSE_STATUS_CODE, status)
        if status >= 400:
            span.set_attribute(sc.ERROR_TYPE, str(status))
            span.set_status(Status(StatusCode.ERROR, str(status)))
        span.end()

    async def on_exception(_session: aiohttp.ClientSession, ctx: SimpleNamespace,
                           params: aiohttp.TraceRequestExceptionParams) -> None:
        span = getattr(ctx, "span", None)
        if span is None:
            return
        kind = type(params.exception).__qualname__
        span.set_attribute(sc.ERROR_TYPE, kind)
        span.set_status(Status(StatusCode.ERROR, kind))
        span.end()

    config = aiohttp.TraceConfig()
    config.on_request_start.append(on_start)
    config.on_request_end.append(on_end)
    config.on_request_exception.append(on_exception)
    config.freeze()
    return config
