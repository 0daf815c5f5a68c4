"""The OpenTelemetry implementation of the telemetry façade (private).

Imported only by :func:`gateway.telemetry.create_telemetry` when an OTLP
endpoint is configured. :class:`OtelTelemetry` owns the providers (made from the
environment, flushed and shut down here) and starts traces; the rest lives
beside it:

- ``gateway.telemetry._otel_spans``: the request trace (root, candidate and attempt spans);
- ``gateway.telemetry._otel_child_spans``: the upstream call, prepare and layer spans;
- ``gateway.telemetry._otel_events``: evaluation and inference-details events / log records;
- ``gateway.telemetry._otel_metrics``: the metric instruments;
- ``gateway.telemetry._otel_attrs``: attribute values and the cached attribute sets;
- ``gateway.telemetry._otel_httpx`` / ``gateway.telemetry._otel_aiohttp``: HTTP client instrumentation;
- ``gateway.telemetry._otel_setup``: providers and exporters from ``OTEL_*``.

Secrets: no request or response header is ever recorded; free text we record
(layer explanations and errors) passes the redaction hook; message content is
recorded only through :meth:`RequestTrace.content`, which the policy engine
calls when a policy opts in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, format_trace_id, get_current_span
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.redact import Redactor, redact_secrets
from gateway.telemetry import DEFAULT_FLUSH_SECONDS, RequestTrace, Telemetry, TraceLink
from gateway.telemetry import semconv as sc
from gateway.telemetry._otel_attrs import AttributeCache
from gateway.telemetry._otel_metrics import Instruments
from gateway.telemetry._otel_setup import (
    Providers,
    build_providers,
    flush_providers,
    shutdown_providers,
    signal_endpoint,
)
from gateway.telemetry._otel_spans import OtelTrace

__all__ = ["OtelTelemetry"]

_log = logging.getLogger("gateway.telemetry")

_TRACE_HEADERS = (b"traceparent", b"tracestate")
HTTP_SPANS_ENV = "VERITY_OTEL_HTTP_SPANS"
"""Set to ``true`` for an HTTP CLIENT span per upstream request (aiohttp hooks)."""


class OtelTelemetry(Telemetry):
    """Traces, metrics and logs exported over OTLP/HTTP; providers owned here."""

    enabled = True

    def __init__(self, providers: Providers, *, redact: Redactor | None = None,
                 http_spans: bool = False,
                 endpoints: Mapping[str, str | None] | None = None) -> None:
        self.providers = providers
        self.endpoints: Mapping[str, str | None] = endpoints or {}
        """Signal -> the OTLP URL it is exported to (None: off), for :meth:`describe`."""
        self.http_spans = http_spans
        self.redact: Redactor = redact or redact_secrets
        self.propagator = TraceContextTextMapPropagator()
        self.tracer = providers.tracer.get_tracer(sc.INSTRUMENTATION_SCOPE)
        self.logger = (providers.logger.get_logger(sc.INSTRUMENTATION_SCOPE)
                       if providers.logger is not None else None)
        self.metrics = Instruments(providers.meter)
        self.attrs = AttributeCache()
        self._shut = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *,
                     redact: Redactor | None = None) -> OtelTelemetry:
        http_spans = environ.get(HTTP_SPANS_ENV, "").strip().lower() in ("1", "true", "yes", "on")
        endpoints = {s: signal_endpoint(environ, s) for s in ("traces", "metrics", "logs")}
        return cls(build_providers(environ), redact=redact, http_spans=http_spans,
                   endpoints=endpoints)

    def start_request(self, scope: Mapping[str, Any], route: str) -> RequestTrace:
        carrier: dict[str, str] = {}
        user_agent = None
        for name, value in scope.get("headers", ()):
            if name in _TRACE_HEADERS:
                carrier[name.decode("latin-1")] = value.decode("latin-1")
            elif name == b"user-agent":
                user_agent = value.decode("latin-1")
        parent = self.propagator.extract(carrier, context=Context()) if carrier else Context()
        method = sc.known_method(scope.get("method", "GET"))
        server = scope.get("server") or (None, None)
        key = (method, route, scope.get("path"), scope.get("scheme"),
               scope.get("http_version"), server[0], server[1])
        attrs = self.attrs.server(key).copy()
        client = scope.get("client")
        if client and client[0] is not None:
            attrs[sc.CLIENT_ADDRESS] = str(client[0])
        if user_agent is not None:
            attrs[sc.USER_AGENT_ORIGINAL] = user_agent
        # ``route`` is a template the endpoint chose, never the client's path; a method
        # outside HTTP's registered ones is "_OTHER", and the span is named "HTTP <route>".
        name = f"{method} {route}" if method != sc.OTHER_METHOD else f"HTTP {route}"
        span = self.tracer.start_span(name, context=parent, kind=SpanKind.SERVER,
                                      attributes=attrs)
        return OtelTrace(self, span, server=True,
                         http={sc.HTTP_REQUEST_METHOD: method, sc.HTTP_ROUTE: route})

    def start_shadow(self, parent: RequestTrace | TraceLink | None,
                     name: str = "shadow audit") -> RequestTrace:
        if isinstance(parent, TraceLink):
            live = parent.trace()
            if live is None:  # made in another process, or the request is gone
                return self._start_linked(parent, name)
            parent = live
        links = []
        if isinstance(parent, OtelTrace) and parent.span.get_span_context().is_valid:
            links.append(Link(parent.span.get_span_context()))
        span = self.tracer.start_span(name, context=Context(), kind=SpanKind.INTERNAL,
                                      links=links)
        shadow = OtelTrace(self, span, server=False)
        if isinstance(parent, OtelTrace):
            shadow.response_id = parent.response_id
            if parent.span.is_recording():
                # Findable from the request too: a back link and the shadow trace id.
                parent.span.add_link(span.get_span_context())
                parent.span.set_attribute(sc.VERITY_SHADOW_TRACE_ID,
                                          format_trace_id(span.get_span_context().trace_id))
        return shadow

    def _start_linked(self, link: TraceLink, name: str) -> RequestTrace:
        """A background trace linked to a span known only by its W3C context."""
        carrier = {"traceparent": link.traceparent}
        if link.tracestate:
            carrier["tracestate"] = link.tracestate
        remote = get_current_span(self.propagator.extract(carrier, context=Context()))
        context = remote.get_span_context()
        span = self.tracer.start_span(name, context=Context(), kind=SpanKind.INTERNAL,
                                      links=[Link(context)] if context.is_valid else [])
        return OtelTrace(self, span, server=False)

    def continue_trace(self, link: TraceLink | None, name: str) -> RequestTrace:
        if link is None:
            return super().continue_trace(link, name)
        carrier = {"traceparent": link.traceparent}
        if link.tracestate:
            carrier["tracestate"] = link.tracestate
        parent = self.propagator.extract(carrier, context=Context())
        span = self.tracer.start_span(name, context=parent, kind=SpanKind.INTERNAL)
        return OtelTrace(self, span, server=False)

    def describe(self) -> str:
        where = ", ".join(f"{signal} to {url}" for signal, url in self.endpoints.items()
                          if url) or "nothing (every signal's exporter is off)"
        return f"telemetry: exporting {where} (OTLP/HTTP)"

    def count(self, name: str, value: int = 1,
              attributes: Mapping[str, Any] | None = None) -> None:
        self.metrics.count(name, value, attributes)

    def gauge_shadow_depth(self, depth: Callable[[], int]) -> None:
        self.metrics.gauge_shadow_depth(depth)

    def observe(self, name: str, value: float,
                attributes: Mapping[str, Any] | None = None) -> None:
        self.metrics.observe(name, value, attributes)

    def gauge(self, name: str, value: Callable[[], float | None]) -> None:
        self.metrics.gauge(name, value)

    def gauge_upstreams(self, read: Callable[[], Sequence[tuple[str, int, int]]]) -> None:
        self.metrics.gauge_upstreams(read)

    def instrument_httpx(self, client: Any) -> None:
        """httpx or httpx2 (the openai/anthropic SDKs' fork) client; ``url.full`` is
        recorded without its query string, where some judges carry their key."""
        from gateway.telemetry._otel_httpx import instrument_httpx
        instrument_httpx(client, self.tracer, self.propagator)

    def aiohttp_trace_configs(self) -> list[Any]:
        """The HTTP CLIENT span under ``chat``: opt-in (``VERITY_OTEL_HTTP_SPANS``).
        Any aiohttp trace config makes aiohttp fire all its tracing signals, and the
        span duplicates ``chat`` (which carries server address, port and
        status), so by default there is none."""
        if not self.http_spans:
            return []
        from gateway.telemetry._otel_aiohttp import trace_config
        return [trace_config(self.tracer, self.propagator)]

    def force_flush(self, timeout: float | None = None) -> None:
        timeout = DEFAULT_FLUSH_SECONDS if timeout is None else timeout
        late = flush_providers(self.providers, timeout)
        if late:
            _log.warning("telemetry flush did not finish within %gs (%s still exporting)",
                         timeout, ", ".join(late))

    def shutdown(self, timeout: float | None = None) -> None:
        """Flush and stop every exporter in parallel, within ``timeout`` seconds in all;
        safe to call twice."""
        if self._shut:
            return
        self._shut = True
        timeout = DEFAULT_FLUSH_SECONDS if timeout is None else timeout
        late = shutdown_providers(self.providers, timeout)
        if late:
            _log.warning("telemetry flush at shutdown did not finish within %gs; "
                         "dropped what %s still had to export", timeout, ", ".join(late))
