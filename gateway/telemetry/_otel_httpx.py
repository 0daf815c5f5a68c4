"""httpx client instrumentation for judge calls (private).

Owns how the gateway's own httpx clients (judge calls, through httpx or the
openai/anthropic SDKs' ``httpx2`` fork) get HTTP CLIENT spans and metrics from
``opentelemetry-instrumentation-httpx``, and the request hook that records
``url.full`` without its query string or userinfo, where some judges carry their key.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import Span

from gateway.telemetry import semconv as sc
from gateway.telemetry._otel_setup import Providers

__all__ = ["instrument_httpx"]


def _strip_query(span: Span, request: Any) -> None:
    url = str(request.url)
    if "?" in url or "@" in url:
        from urllib.parse import urlsplit, urlunsplit
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        clean = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        recorded = getattr(span, "attributes", None) or {}
        for key in (sc.URL_FULL, "http.url"):  # new / old HTTP semconv, whichever is on
            if key in recorded:
                span.set_attribute(key, clean)


async def _strip_query_async(span: Span, request: Any) -> None:
    _strip_query(span, request)


def instrument_httpx(client: Any, providers: Providers) -> None:
    """Instrument one httpx or httpx2 client (sync or async) with ``providers``."""
    from opentelemetry.instrumentation import httpx as otel_httpx
    instrumentor: Any = (otel_httpx.HTTPX2ClientInstrumentor
                         if type(client).__module__.startswith("httpx2")
                         else otel_httpx.HTTPXClientInstrumentor)
    instrumentor.instrument_client(
        client, tracer_provider=providers.tracer, meter_provider=providers.meter,
        request_hook=_strip_query_async if hasattr(client, "aclose") else _strip_query)
