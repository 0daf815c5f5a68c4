"""The OpenTelemetry implementation of the telemetry façade (private).

Imported only by :func:`gateway.telemetry.create_telemetry` when an OTLP
endpoint is configured. Spans are parented explicitly (each trace object holds
its span's context), so nothing depends on contextvars surviving starlette's
task hops; the context is attached only around a verification layer and a
regenerate attempt, so that instrumented httpx judge calls made inside them
nest under the right span.

Secrets: no request or response header is ever recorded; free text we record
(layer explanations and errors) passes the redaction hook; message content is
recorded only through :meth:`RequestTrace.content`, which the policy engine
calls when a policy opts in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import orjson
from opentelemetry import context as otel_context
from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackOptions, NoOpMeter, Observation
from opentelemetry.trace import (
    Link,
    Span,
    SpanKind,
    Status,
    StatusCode,
    format_trace_id,
    set_span_in_context,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway import semconv as sc
from gateway._otel_setup import Providers, build_providers
from gateway.telemetry import (
    Headers,
    LayerSpan,
    Redactor,
    RequestTrace,
    Telemetry,
    UpstreamTrace,
    redact_secrets,
)

__all__ = ["OtelTelemetry"]

_TRACE_HEADERS = (b"traceparent", b"tracestate")
HTTP_SPANS_ENV = "VERITY_OTEL_HTTP_SPANS"
"""Set to ``true`` for an HTTP CLIENT span per upstream request (aiohttp hooks)."""
_EXPLANATION_LIMIT = 1024


def _attrs(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Keep only values OTLP can carry; drop None."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if value is None:
            continue
        if isinstance(value, (bool, int, float, str)):
            out[key] = value
        elif isinstance(value, (list, tuple)):
            out[key] = [str(v) for v in value]
        else:
            out[key] = str(value)
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_UpstreamKey = tuple[str, str, str, str, "int | None", bool]
"""(operation, provider, request model, server address, server port, stream)."""
_CACHE_LIMIT = 4096
"""Entries per attribute cache; a cache is emptied when full (response models and
error types come from the upstream, so their number is not under our control)."""


def _error_kind(error: Any) -> str:
    """A low-cardinality ``error.type`` from a layer's error value."""
    text = str(error)
    if text and len(text) <= 64 and text.replace("_", "").replace(".", "").isalnum():
        return text
    return sc.ERROR_TYPE_OTHER


class _Upstream(UpstreamTrace):
    __slots__ = (
        "_headers",
        "_key",
        "_response_model",
        "_span",
        "_start",
        "_trace",
        "_ttfc",
        "error_type",
    )

    def __init__(self, trace: _Trace, span: Span, key: _UpstreamKey) -> None:
        self._trace = trace
        self._span = span
        self._start = time.perf_counter()
        self._key = key
        self._response_model: str | None = None
        self._headers: Headers | None = None
        self._ttfc: float | None = None
        self.error_type: str | None = None

    def headers(self) -> Headers:
        if self._headers is None:
            # What TraceContextTextMapPropagator.inject writes, without the context
            # object and carrier round trip.
            ctx = self._span.get_span_context()
            self._headers = [(b"traceparent", b"00-%032x-%016x-%02x" % (
                ctx.trace_id, ctx.span_id, ctx.trace_flags))]
            if ctx.trace_state:
                self._headers.append((b"tracestate",
                                      ctx.trace_state.to_header().encode("latin-1")))
        return self._headers

    def first_chunk(self) -> None:
        if self._ttfc is not None:
            return
        self._ttfc = time.perf_counter() - self._start
        self._span.set_attribute(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, self._ttfc)
        tel = self._trace.tel
        tel.ttfc.record(self._ttfc, tel.metric_attrs(self._key, None, None, None))

    def response(self, status: int, body: Mapping[str, Any] | None) -> None:
        span = self._span
        if status >= 400:
            self.error(str(status))
        if not body:
            span.set_attribute(sc.HTTP_RESPONSE_STATUS_CODE, status)
            return
        attrs: dict[str, Any] = {sc.HTTP_RESPONSE_STATUS_CODE: status}
        response_id = body.get("id")
        if isinstance(response_id, str):
            attrs[sc.GEN_AI_RESPONSE_ID] = response_id
            self._trace.response_id = response_id
        response_model = body.get("model")
        if isinstance(response_model, str):
            attrs[sc.GEN_AI_RESPONSE_MODEL] = response_model
            self._response_model = response_model
        choices = body.get("choices")
        if isinstance(choices, list):
            reasons = [str(c.get("finish_reason")) for c in choices
                       if isinstance(c, Mapping) and c.get("finish_reason")]
            if reasons:
                attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] = reasons
        usage = body.get("usage")
        tokens_in = tokens_out = None
        if isinstance(usage, Mapping):
            tokens_in = _count(usage.get("prompt_tokens", usage.get("input_tokens")))
            tokens_out = _count(usage.get("completion_tokens", usage.get("output_tokens")))
            if tokens_in is not None:
                attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] = tokens_in
            if tokens_out is not None:
                attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = tokens_out
        span.set_attributes(attrs)
        tel = self._trace.tel
        if tokens_in is not None:
            tel.token_usage.record(tokens_in, tel.metric_attrs(self._key, response_model if
                                                               isinstance(response_model, str)
                                                               else None, None, "input"))
        if tokens_out is not None:
            tel.token_usage.record(tokens_out, tel.metric_attrs(self._key, response_model if
                                                                isinstance(response_model, str)
                                                                else None, None, "output"))

    def error(self, error_type: str) -> None:
        self.error_type = error_type
        self._span.set_attribute(sc.ERROR_TYPE, error_type)
        self._span.set_status(Status(StatusCode.ERROR, error_type))

    def finish(self) -> None:
        tel = self._trace.tel
        tel.operation_duration.record(
            time.perf_counter() - self._start,
            tel.metric_attrs(self._key, self._response_model, self.error_type, None))
        self._span.end()


class _Layer(LayerSpan):
    __slots__ = ("_name", "_span", "_trace", "done")

    def __init__(self, trace: _Trace, name: str, span: Span) -> None:
        self._trace = trace
        self._name = name
        self._span = span
        self.done = False

    def result(self, outcome: Mapping[str, Any]) -> None:
        self.done = True
        tel, span, name = self._trace.tel, self._span, self._name
        passed = outcome.get("passed")
        error = outcome.get("error")
        score = _number(outcome.get("score"))
        latency_ms = _number(outcome.get("latency_ms"))
        cost = _number(outcome.get("cost"))
        label = outcome.get("label") or ("pass" if passed is True
                                         else "fail" if passed is False else None)
        explanation = outcome.get("explanation")
        if explanation is not None:
            explanation = tel.redact(str(explanation))[:_EXPLANATION_LIMIT]
        error_type = _error_kind(outcome.get("error_type") or error) if error else None
        span.set_attributes(_attrs([
            (sc.VERITY_LAYER_SCORE, score),
            (sc.VERITY_LAYER_PASSED, passed if isinstance(passed, bool) else None),
            (sc.VERITY_LAYER_LATENCY_MS, latency_ms),
            (sc.VERITY_LAYER_CACHE_HIT, outcome.get("cache_hit")),
            (sc.VERITY_LAYER_JUDGE_CALLS, outcome.get("judge_calls")),
            (sc.VERITY_LAYER_COST, cost),
            (sc.VERITY_LAYER_ERROR, tel.redact(str(error))[:256] if error else None),
        ]))
        event = _attrs([
            (sc.GEN_AI_EVALUATION_NAME, outcome.get("name") or name),
            (sc.GEN_AI_EVALUATION_SCORE_VALUE, score),
            (sc.GEN_AI_EVALUATION_SCORE_LABEL, label),
            (sc.GEN_AI_EVALUATION_EXPLANATION, explanation),
            (sc.GEN_AI_RESPONSE_ID, self._trace.response_id),
            (sc.ERROR_TYPE, error_type),
        ])
        span.add_event(sc.EVENT_GEN_AI_EVALUATION_RESULT, event)
        if tel.logger is not None:
            tel.logger.emit(event_name=sc.EVENT_GEN_AI_EVALUATION_RESULT, attributes=event,
                            context=set_span_in_context(span),
                            severity_number=SeverityNumber.INFO)
        if error_type is not None:
            span.set_attribute(sc.ERROR_TYPE, error_type)
            span.set_status(Status(StatusCode.ERROR, error_type))
        verdict = "error" if error else "pass" if passed else "fail"
        self._trace.layer_verdicts.append((name, verdict))
        if latency_ms is not None:
            tel.layer_duration.record(latency_ms / 1000.0,
                                      {sc.VERITY_LAYER_NAME: name, sc.VERITY_VERDICT: verdict})
        if cost:
            tel.judge_cost.add(cost, {sc.VERITY_LAYER_NAME: name})


class _Trace(RequestTrace):
    """A request (SERVER span) or a shadow audit (INTERNAL root span)."""

    def __init__(self, tel: OtelTelemetry, span: Span, *, server: bool) -> None:
        self.tel = tel
        self.span = span
        self.server = server
        self.context = set_span_in_context(span, Context())
        self._parent = self.context
        self.response_id: str | None = None
        self.upstream_context: Context | None = None
        self.layer_verdicts: list[tuple[str, str]] = []
        self._ended = False

    @contextmanager
    def upstream(self, *, model: str, provider: str, server_address: str,
                 stream: bool, operation: str = "chat",
                 server_url: str | None = None) -> Iterator[UpstreamTrace]:
        tel = self.tel
        key: _UpstreamKey = (operation, provider, model, server_address,
                             tel.port_of(server_url) if server_url else None, stream)
        name, attrs = tel.upstream_span_attrs(key)
        span = tel.tracer.start_span(name, context=self._parent, kind=SpanKind.CLIENT,
                                     attributes=attrs)
        self.upstream_context = set_span_in_context(span, Context())
        up = _Upstream(self, span, key)
        try:
            yield up
        except BaseException as exc:
            if up.error_type is None:
                up.error(type(exc).__qualname__)
            raise
        finally:
            up.finish()

    @contextmanager
    def layer(self, name: str) -> Iterator[LayerSpan]:
        span = self.tel.tracer.start_span(f"verify {name}", context=self._parent,
                                          kind=SpanKind.INTERNAL,
                                          attributes={sc.VERITY_LAYER_NAME: name})
        layer = _Layer(self, name, span)
        token = otel_context.attach(set_span_in_context(span, self._parent))
        try:
            yield layer
        except BaseException as exc:
            if not layer.done:
                span.set_attribute(sc.ERROR_TYPE, type(exc).__qualname__)
                span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            raise
        finally:
            otel_context.detach(token)
            span.end()

    @contextmanager
    def attempt(self, number: int) -> Iterator[None]:
        span = self.tel.tracer.start_span(f"regenerate attempt {number}", context=self.context,
                                          kind=SpanKind.INTERNAL,
                                          attributes={sc.VERITY_ATTEMPT_NUMBER: number})
        outer, self._parent = self._parent, set_span_in_context(span, Context())
        token = otel_context.attach(self._parent)
        try:
            yield
        except BaseException as exc:
            span.set_attribute(sc.ERROR_TYPE, type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            raise
        finally:
            otel_context.detach(token)
            self._parent = outer
            span.end()

    def decision(self, record: Mapping[str, Any]) -> None:
        attrs = _attrs([
            (sc.VERITY_POLICY, record.get("policy")),
            (sc.VERITY_MODE, record.get("mode")),
            (sc.VERITY_VERDICT, record.get("verdict")),
            (sc.VERITY_SCORE, _number(record.get("score"))),
            (sc.VERITY_ACTION, record.get("action")),
            (sc.VERITY_ATTEMPTS, record.get("attempts")),
        ])
        self.span.add_event(sc.EVENT_VERITY_DECISION, attrs)
        self.span.set_attributes(attrs)
        dims: dict[str, Any] = {k: attrs[k] for k in (sc.VERITY_POLICY, sc.VERITY_MODE) if k in attrs}
        self.tel.decisions.add(1, {**dims, **{k: attrs[k] for k in (sc.VERITY_VERDICT,
                                                                     sc.VERITY_ACTION)
                                              if k in attrs}})
        for layer, verdict in self.layer_verdicts:
            self.tel.layer_verdicts.add(1, {**dims, sc.VERITY_LAYER_NAME: layer,
                                            sc.VERITY_VERDICT: verdict})
        self.layer_verdicts.clear()

    def content(self, messages: Sequence[Mapping[str, Any]], output: str | None,
                redact: Redactor | None = None) -> None:
        hook = redact or self.tel.redact
        attrs: dict[str, Any] = {sc.GEN_AI_INPUT_MESSAGES: orjson.dumps(
            [_message(m, hook) for m in messages if isinstance(m, Mapping)]).decode()}
        if output is not None:
            attrs[sc.GEN_AI_OUTPUT_MESSAGES] = orjson.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": hook(output)}]}]
            ).decode()
        self.span.set_attributes(attrs)
        if self.tel.logger is not None:
            self.tel.logger.emit(
                event_name=sc.EVENT_GEN_AI_INFERENCE_DETAILS,
                attributes={**attrs, **_attrs([(sc.GEN_AI_RESPONSE_ID, self.response_id)])},
                context=self.upstream_context or self.context,
                severity_number=SeverityNumber.DEBUG)

    def end(self, status: int, error_type: str | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        span = self.span
        if self.server:
            span.set_attribute(sc.HTTP_RESPONSE_STATUS_CODE, status)
            error_type = error_type or (str(status) if status >= 500 else None)
        if error_type:
            span.set_attribute(sc.ERROR_TYPE, error_type)
            if status >= 500 or not self.server:
                span.set_status(Status(StatusCode.ERROR, error_type))
        span.end()


def _message(message: Mapping[str, Any], redact: Redactor) -> dict[str, Any]:
    content = message.get("content")
    parts: list[dict[str, Any]] = []
    if isinstance(content, str):
        parts.append({"type": "text", "content": redact(content)})
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append({"type": "text", "content": redact(part["text"])})
            elif isinstance(part, Mapping):
                parts.append({"type": str(part.get("type", "unknown"))})
    return {"role": str(message.get("role", "user")), "parts": parts}


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


class OtelTelemetry(Telemetry):
    """Traces, metrics and logs exported over OTLP/HTTP; providers owned here."""

    enabled = True

    def __init__(self, providers: Providers, *, redact: Redactor | None = None,
                 http_spans: bool = False) -> None:
        self.providers = providers
        self.http_spans = http_spans
        self.redact: Redactor = redact or redact_secrets
        self.propagator = TraceContextTextMapPropagator()
        self.tracer = providers.tracer.get_tracer(sc.INSTRUMENTATION_SCOPE)
        self.logger = (providers.logger.get_logger(sc.INSTRUMENTATION_SCOPE)
                       if providers.logger is not None else None)
        meter = (providers.meter.get_meter(sc.INSTRUMENTATION_SCOPE)
                 if providers.meter is not None else NoOpMeter(sc.INSTRUMENTATION_SCOPE))
        self.meter = meter
        self.token_usage = meter.create_histogram(
            sc.METRIC_GEN_AI_TOKEN_USAGE, unit="{token}",
            description="Number of input and output tokens used.")
        self.operation_duration = meter.create_histogram(
            sc.METRIC_GEN_AI_OPERATION_DURATION, unit="s", description="GenAI operation duration.")
        self.ttfc = meter.create_histogram(
            sc.METRIC_GEN_AI_TIME_TO_FIRST_CHUNK, unit="s",
            description="Time to receive the first chunk of a streaming response.")
        self.layer_duration = meter.create_histogram(
            sc.METRIC_LAYER_DURATION, unit="s", description="Verification layer duration.")
        self.layer_verdicts = meter.create_counter(
            sc.METRIC_LAYER_VERDICTS, unit="{verdict}",
            description="Verification layer verdicts by policy, mode, layer and verdict.")
        self.decisions = meter.create_counter(
            sc.METRIC_DECISIONS, unit="{decision}",
            description="Policy decisions by policy, mode, verdict and action.")
        self.judge_cost = meter.create_counter(
            sc.METRIC_JUDGE_COST, unit="{USD}", description="Judge cost reported by layers.")
        self._counters: dict[str, Any] = {}
        self._shut = False
        # Attribute sets built once and reused (never mutated after caching; the SDK
        # copies what it keeps): span-start attributes per upstream call shape,
        # metric attributes per (call shape, response model, error, token type).
        self._upstream_attrs: dict[_UpstreamKey, tuple[str, dict[str, Any]]] = {}
        self._metric_attrs: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._server_attrs: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._ports: dict[str, int | None] = {}

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *,
                     redact: Redactor | None = None) -> OtelTelemetry:
        http_spans = environ.get(HTTP_SPANS_ENV, "").strip().lower() in ("1", "true", "yes", "on")
        return cls(build_providers(environ), redact=redact, http_spans=http_spans)

    # ---- cached attribute sets -----------------------------------------------------------

    def port_of(self, url: str) -> int | None:
        try:
            return self._ports[url]
        except KeyError:
            pass
        from urllib.parse import urlsplit
        try:
            parts = urlsplit(url)
            port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        except ValueError:
            port = None
        if len(self._ports) >= _CACHE_LIMIT:
            self._ports.clear()
        self._ports[url] = port
        return port

    def upstream_span_attrs(self, key: _UpstreamKey) -> tuple[str, dict[str, Any]]:
        found = self._upstream_attrs.get(key)
        if found is None:
            operation, provider, model, address, port, stream = key
            attrs: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: operation,
                                     sc.GEN_AI_PROVIDER_NAME: provider,
                                     sc.GEN_AI_REQUEST_MODEL: model,
                                     sc.SERVER_ADDRESS: address,
                                     sc.GEN_AI_REQUEST_STREAM: stream}
            if port is not None:
                attrs[sc.SERVER_PORT] = port
            if len(self._upstream_attrs) >= _CACHE_LIMIT:
                self._upstream_attrs.clear()
            found = self._upstream_attrs[key] = (f"{operation} {model}", attrs)
        return found

    def metric_attrs(self, key: _UpstreamKey, response_model: str | None,
                     error_type: str | None, token_type: str | None) -> dict[str, Any]:
        """GenAI client metric attributes (no port, no stream flag: as before)."""
        full = (key, response_model, error_type, token_type)
        attrs = self._metric_attrs.get(full)
        if attrs is None:
            operation, provider, model, address, _port, _stream = key
            attrs = {sc.GEN_AI_OPERATION_NAME: operation, sc.GEN_AI_PROVIDER_NAME: provider,
                     sc.GEN_AI_REQUEST_MODEL: model, sc.SERVER_ADDRESS: address}
            if response_model is not None:
                attrs[sc.GEN_AI_RESPONSE_MODEL] = response_model
            if error_type is not None:
                attrs[sc.ERROR_TYPE] = error_type
            if token_type is not None:
                attrs[sc.GEN_AI_TOKEN_TYPE] = token_type
            if len(self._metric_attrs) >= _CACHE_LIMIT:
                self._metric_attrs.clear()
            self._metric_attrs[full] = attrs
        return attrs

    def start_request(self, scope: Mapping[str, Any], route: str) -> RequestTrace:
        carrier: dict[str, str] = {}
        user_agent = None
        for name, value in scope.get("headers", ()):
            if name in _TRACE_HEADERS:
                carrier[name.decode("latin-1")] = value.decode("latin-1")
            elif name == b"user-agent":
                user_agent = value.decode("latin-1")
        parent = self.propagator.extract(carrier, context=Context()) if carrier else Context()
        method = scope.get("method", "GET")
        server = scope.get("server") or (None, None)
        key = (method, route, scope.get("path"), scope.get("scheme"),
               scope.get("http_version"), server[0], server[1])
        static = self._server_attrs.get(key)
        if static is None:
            static = _attrs([(sc.HTTP_REQUEST_METHOD, method), (sc.HTTP_ROUTE, route),
                             (sc.URL_PATH, key[2]), (sc.URL_SCHEME, key[3]),
                             (sc.NETWORK_PROTOCOL_VERSION, key[4]),
                             (sc.SERVER_ADDRESS, key[5]), (sc.SERVER_PORT, key[6])])
            if len(self._server_attrs) >= _CACHE_LIMIT:
                self._server_attrs.clear()
            self._server_attrs[key] = static
        attrs = static.copy()
        client = scope.get("client")
        if client and client[0] is not None:
            attrs[sc.CLIENT_ADDRESS] = str(client[0])
        if user_agent is not None:
            attrs[sc.USER_AGENT_ORIGINAL] = user_agent
        span = self.tracer.start_span(f"{method} {route}", context=parent, kind=SpanKind.SERVER,
                                      attributes=attrs)
        return _Trace(self, span, server=True)

    def start_shadow(self, parent: RequestTrace, name: str = "shadow audit") -> RequestTrace:
        links = []
        if isinstance(parent, _Trace) and parent.span.get_span_context().is_valid:
            links.append(Link(parent.span.get_span_context()))
        span = self.tracer.start_span(name, context=Context(), kind=SpanKind.INTERNAL,
                                      links=links)
        shadow = _Trace(self, span, server=False)
        if isinstance(parent, _Trace):
            shadow.response_id = parent.response_id
            if parent.span.is_recording():
                # Findable from the request too: a back link and the shadow trace id.
                parent.span.add_link(span.get_span_context())
                parent.span.set_attribute(sc.VERITY_SHADOW_TRACE_ID,
                                          format_trace_id(span.get_span_context().trace_id))
        return shadow

    def count(self, name: str, value: int = 1,
              attributes: Mapping[str, Any] | None = None) -> None:
        counter = self._counters.get(name)
        if counter is None:
            metric, unit, description = sc.COUNTERS.get(name, (f"verity.{name}", "1", ""))
            counter = self._counters[name] = self.meter.create_counter(
                metric, unit=unit, description=description)
        counter.add(value, _attrs(attributes.items()) if attributes else None)

    def gauge_shadow_depth(self, depth: Callable[[], int]) -> None:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(depth())]
        self.meter.create_observable_gauge(sc.METRIC_SHADOW_QUEUE_DEPTH, callbacks=[observe],
                                           unit="{request}",
                                           description="Shadow audits waiting in the queue.")

    def instrument_httpx(self, client: Any) -> None:
        """httpx or httpx2 (the openai/anthropic SDKs' fork) client; ``url.full`` is
        recorded without its query string, where some judges carry their key."""
        from opentelemetry.instrumentation import httpx as otel_httpx
        instrumentor: Any = (otel_httpx.HTTPX2ClientInstrumentor
                             if type(client).__module__.startswith("httpx2")
                             else otel_httpx.HTTPXClientInstrumentor)
        instrumentor.instrument_client(
            client, tracer_provider=self.providers.tracer, meter_provider=self.providers.meter,
            request_hook=_strip_query_async if hasattr(client, "aclose") else _strip_query)

    def aiohttp_trace_configs(self) -> list[Any]:
        """The HTTP CLIENT span under ``chat {model}``: opt-in (``VERITY_OTEL_HTTP_SPANS``).
        Any aiohttp trace config makes aiohttp fire all its tracing signals, and the
        span duplicates ``chat {model}`` (which carries server address, port and
        status), so by default there is none."""
        if not self.http_spans:
            return []
        from gateway._otel_aiohttp import trace_config
        return [trace_config(self.tracer, self.propagator)]

    def force_flush(self) -> None:
        p = self.providers
        p.tracer.force_flush()
        if p.logger is not None:
            p.logger.force_flush()
        if p.meter is not None:
            p.meter.force_flush()

    def shutdown(self) -> None:
        """Flush and stop every exporter; safe to call twice."""
        if self._shut:
            return
        self._shut = True
        p = self.providers
        p.tracer.shutdown()
        if p.logger is not None:
            p.logger.shutdown()
        if p.meter is not None:
            p.meter.shutdown()
