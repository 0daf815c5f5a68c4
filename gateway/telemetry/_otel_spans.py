"""The span side of the OpenTelemetry implementation (private).

Owns the per-request objects behind the façade's :class:`~gateway.telemetry.RequestTrace`,
:class:`~gateway.telemetry.UpstreamTrace` and :class:`~gateway.telemetry.LayerSpan`:
the SERVER (or shadow INTERNAL root) span, the ``chat`` CLIENT span per
upstream call, the ``prepare context``, ``verify {layer}``, ``candidate {policy}`` and
``regenerate attempt {n}`` INTERNAL spans, their attributes and statuses, and the metric points each one records when it
finishes. Spans are parented explicitly (each trace object holds its span's
context), so nothing depends on contextvars surviving starlette's task hops; the
context is attached only around a verification layer and a regenerate attempt, so
that instrumented httpx judge calls made inside them nest under the right span.
"""

from __future__ import annotations

import copy
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, set_span_in_context

from gateway.redact import Redactor
from gateway.telemetry import (
    Headers,
    LayerSpan,
    PrepareSpan,
    RequestTrace,
    TraceLink,
    UpstreamTrace,
)
from gateway.telemetry import semconv as sc
from gateway.telemetry._otel_attrs import UpstreamKey, as_count, as_number, clean_attrs, error_kind
from gateway.telemetry._otel_events import emit_evaluation, evaluation_event, inference_details

if TYPE_CHECKING:
    from gateway.telemetry._otel_impl import OtelTelemetry

__all__ = ["OtelLayer", "OtelPrepare", "OtelTrace", "OtelUpstream"]

PREPARE_SPAN = "prepare context"
CANDIDATE_SPAN = "candidate"


class OtelUpstream(UpstreamTrace):
    """One upstream call: the ``chat`` CLIENT span and its GenAI metrics."""

    recording = True

    __slots__ = (
        "_headers",
        "_key",
        "_name",
        "_response_model",
        "_span",
        "_start",
        "_trace",
        "_ttfc",
        "error_type",
    )

    def __init__(self, trace: OtelTrace, span: Span, key: UpstreamKey,
                 name: str | None = None) -> None:
        self._trace = trace
        self._span = span
        self._name = name
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
        tel.metrics.ttfc.record(self._ttfc, tel.attrs.metric(self._key, None, None, None))

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
            tokens_in = as_count(usage.get("prompt_tokens", usage.get("input_tokens")))
            tokens_out = as_count(usage.get("completion_tokens", usage.get("output_tokens")))
            if tokens_in is not None:
                attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] = tokens_in
            if tokens_out is not None:
                attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = tokens_out
        span.set_attributes(attrs)
        tel = self._trace.tel
        model = response_model if isinstance(response_model, str) else None
        if tokens_in is not None:
            tel.metrics.token_usage.record(
                tokens_in, tel.attrs.metric(self._key, model, None, "input"))
        if tokens_out is not None:
            tel.metrics.token_usage.record(
                tokens_out, tel.attrs.metric(self._key, model, None, "output"))

    def error(self, error_type: str) -> None:
        self.error_type = error_type
        self._span.set_attribute(sc.ERROR_TYPE, error_type)
        self._span.set_status(Status(StatusCode.ERROR, error_type))

    def outcome(self, outcome: str) -> None:
        self._span.set_attribute(sc.VERITY_UPSTREAM_OUTCOME, outcome)
        name = self._name
        self._trace.tel.metrics.upstream_attempts.add(
            1, {sc.VERITY_UPSTREAM_NAME: name, sc.VERITY_UPSTREAM_OUTCOME: outcome}
            if name is not None else {sc.VERITY_UPSTREAM_OUTCOME: outcome})

    def finish(self) -> None:
        tel = self._trace.tel
        tel.metrics.operation_duration.record(
            time.perf_counter() - self._start,
            tel.attrs.metric(self._key, self._response_model, self.error_type, None))
        self._span.end()


class OtelLayer(LayerSpan):
    """One verification layer's ``verify {name}`` span and its outcome."""

    recording = True

    __slots__ = ("_name", "_span", "_trace", "done")

    def __init__(self, trace: OtelTrace, name: str, span: Span) -> None:
        self._trace = trace
        self._name = name
        self._span = span
        self.done = False

    def result(self, outcome: Mapping[str, Any]) -> None:
        self.done = True
        tel, span, name = self._trace.tel, self._span, self._name
        passed = outcome.get("passed")
        error = outcome.get("error")
        score = as_number(outcome.get("score"))
        latency_ms = as_number(outcome.get("latency_ms"))
        cost = as_number(outcome.get("cost"))
        error_type = error_kind(outcome.get("error_type") or error) if error else None
        event = evaluation_event(outcome, name, score=score, error_type=error_type,
                                 response_id=self._trace.response_id, redact=tel.redact)
        span.set_attributes(clean_attrs([
            (sc.VERITY_LAYER_TYPE, outcome.get("name")),
            (sc.VERITY_LAYER_SCORE, score),
            (sc.VERITY_LAYER_PASSED, passed if isinstance(passed, bool) else None),
            (sc.VERITY_LAYER_LATENCY_MS, latency_ms),
            (sc.VERITY_LAYER_CACHE_HIT, outcome.get("cache_hit")),
            (sc.VERITY_LAYER_JUDGE_CALLS, outcome.get("judge_calls")),
            (sc.VERITY_LAYER_COST, cost),
            (sc.VERITY_LAYER_ERROR, tel.redact(str(error))[:256] if error else None),
        ]))
        emit_evaluation(span, tel.logger, event)
        if error_type is not None:
            span.set_attribute(sc.ERROR_TYPE, error_type)
            span.set_status(Status(StatusCode.ERROR, error_type))
        verdict = "error" if error else "pass" if passed else "fail"
        self._trace.layer_verdicts.append((name, verdict))
        if latency_ms is not None:
            tel.metrics.layer_duration.record(
                latency_ms / 1000.0, {sc.VERITY_LAYER_NAME: name, sc.VERITY_VERDICT: verdict})
        if cost:
            tel.metrics.judge_cost.add(cost, {sc.VERITY_LAYER_NAME: name})


class OtelPrepare(PrepareSpan):
    """The inline prepare step's ``prepare context`` span.

    Started by ``with`` (the work, which runs after a short delay or not at all),
    ended by :meth:`end` (when the request is done with the result, so that
    ``verity.prepare.used`` is known) at the time the work finished.
    """

    __slots__ = ("_current", "_done", "_end_ns", "_span", "_trace", "_used")

    def __init__(self, trace: OtelTrace) -> None:
        self._trace = trace
        self._span: Span | None = None
        self._done: list[str] = []
        self._current: str | None = None
        self._end_ns: int | None = None
        self._used = False

    def __enter__(self) -> OtelPrepare:
        # Parented by the request span itself: the step runs beside the upstream call.
        self._span = self._trace.tel.tracer.start_span(
            PREPARE_SPAN, context=self._trace.context, kind=SpanKind.INTERNAL)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._end_ns = time.time_ns()
        span = self._span
        if span is None:
            return
        if exc is None and self._current is not None:
            self._done.append(self._current)
        span.set_attribute(sc.VERITY_PREPARE_LAYERS, self._done)
        if exc is not None:  # the caller falls back to preparing nothing
            kind = type(exc).__qualname__
            message = self._trace.tel.redact(str(exc))[:256]
            if self._current is not None:
                span.set_attribute(sc.VERITY_PREPARE_FAILED_LAYER, self._current)
            span.set_attribute(sc.ERROR_TYPE, kind)
            span.add_event(sc.EVENT_EXCEPTION, {sc.EXCEPTION_TYPE: kind,
                                                sc.EXCEPTION_MESSAGE: message})
            span.set_status(Status(StatusCode.ERROR, kind))

    def context_chars(self, chars: int) -> None:
        if self._span is not None:
            self._span.set_attribute(sc.VERITY_PREPARE_CONTEXT_CHARS, chars)

    def layer(self, key: str) -> None:
        if self._current is not None:
            self._done.append(self._current)
        self._current = key

    def used(self) -> None:
        self._used = True

    def end(self) -> None:
        span, self._span = self._span, None
        if span is None:
            return
        span.set_attribute(sc.VERITY_PREPARE_USED, self._used)
        span.end(end_time=self._end_ns)


class OtelTrace(RequestTrace):
    """A request (SERVER span) or a shadow audit (INTERNAL root span)."""

    recording = True

    def __init__(self, tel: OtelTelemetry, span: Span, *, server: bool,
                 http: Mapping[str, Any] | None = None) -> None:
        self.tel = tel
        self.span = span
        self.server = server
        self._http = http
        """A SERVER trace's ``http.server.request.duration`` attributes known at its start
        (method, route); the status and error type are added at :meth:`end`."""
        self._start = time.perf_counter()
        self.context = set_span_in_context(span, Context())
        self._parent = self.context
        self.response_id: str | None = None
        self.upstream_context: Context | None = None
        self.layer_verdicts: list[tuple[str, str]] = []
        self.policy: str | None = None
        """The policy whose ``verify`` spans this trace starts (:meth:`for_policy`)."""
        self.is_candidate = False
        self.live_policy: str | None = None
        """On a candidate's trace: the live policy it is evaluated beside."""
        self._layer_attrs: dict[str, Any] = {}
        self._ended = False
        self._served = False

    @property
    def trace_id(self) -> str | None:
        ctx = self.span.get_span_context()
        return f"{ctx.trace_id:032x}" if ctx.is_valid else None

    def link(self) -> TraceLink | None:
        ctx = self.span.get_span_context()
        if not ctx.is_valid:
            return None
        return TraceLink(f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}",
                         ctx.trace_state.to_header() if ctx.trace_state else "",
                         weakref.ref(self))

    def selected(self, policy: str, mode: str) -> None:
        # Searchable by policy and mode whatever the mode: a shadow request's own span
        # gets no decision event (that is on its shadow trace).
        self.span.set_attributes({sc.VERITY_POLICY: policy, sc.VERITY_MODE: mode})

    def served(self, upstream: str | None, attempts: int) -> None:
        if self._served:  # a regenerate call's exchange: the request's is the first
            return
        self._served = True
        attrs: dict[str, Any] = {sc.VERITY_UPSTREAM_ATTEMPTS: attempts}
        if upstream is not None:
            attrs[sc.VERITY_UPSTREAM_NAME] = upstream
        self.span.set_attributes(attrs)
        self.tel.metrics.upstream_served.add(1, attrs)

    def for_policy(self, policy: str) -> RequestTrace:
        if self.policy is None or self.policy == policy:
            self.policy = policy
            self._layer_attrs = {sc.VERITY_POLICY: policy,
                                 sc.VERITY_POLICY_CANDIDATE: self.is_candidate}
            return self
        other = copy.copy(self)  # a second policy on one trace: a view, same spans
        other.policy = None
        return other.for_policy(policy)

    @contextmanager
    def upstream(self, *, model: str, provider: str, server_address: str,
                 stream: bool, operation: str = "chat",
                 server_url: str | None = None, attempt: int = 1,
                 upstream: str | None = None) -> Iterator[UpstreamTrace]:
        tel = self.tel
        key: UpstreamKey = (operation, provider, model, server_address,
                            tel.attrs.port_of(server_url) if server_url else None, stream)
        name, attrs = tel.attrs.upstream_span(key)
        span = tel.tracer.start_span(name, context=self._parent, kind=SpanKind.CLIENT,
                                     attributes=attrs)
        if upstream is not None:
            span.set_attribute(sc.VERITY_UPSTREAM_NAME, upstream)
        span.set_attribute(sc.VERITY_UPSTREAM_ATTEMPT, attempt)
        if attempt > 1:  # the HTTP semconv: set on the second and later attempts only
            span.set_attribute(sc.HTTP_REQUEST_RESEND_COUNT, attempt - 1)
        self.upstream_context = set_span_in_context(span, Context())
        up = OtelUpstream(self, span, key, upstream)
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
                                          attributes={sc.VERITY_LAYER_NAME: name,
                                                      **self._layer_attrs})
        layer = OtelLayer(self, name, span)
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
    def attempt(self, number: int, action: str = "regenerate") -> Iterator[None]:
        span = self.tel.tracer.start_span(f"{action} attempt {number}", context=self.context,
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

    @contextmanager
    def candidate(self, policy: str) -> Iterator[RequestTrace]:
        span = self.tel.tracer.start_span(
            f"{CANDIDATE_SPAN} {policy}", context=self._parent, kind=SpanKind.INTERNAL,
            attributes={sc.VERITY_POLICY: policy, sc.VERITY_POLICY_CANDIDATE: True})
        trace = OtelTrace(self.tel, span, server=False)
        trace.response_id = self.response_id
        trace.is_candidate = True
        trace.live_policy = self.policy
        trace.for_policy(policy)
        try:
            yield trace
        except BaseException as exc:
            span.set_attribute(sc.ERROR_TYPE, type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            raise
        finally:
            trace._ended = True
            span.end()

    def prepare(self) -> PrepareSpan:
        return OtelPrepare(self)

    def decision(self, record: Mapping[str, Any]) -> None:
        attrs = clean_attrs([
            (sc.VERITY_POLICY, record.get("policy")),
            (sc.VERITY_MODE, record.get("mode")),
            (sc.VERITY_VERDICT, record.get("verdict")),
            (sc.VERITY_SCORE, as_number(record.get("score"))),
            (sc.VERITY_ACTION, record.get("action")),
            (sc.VERITY_ATTEMPTS, record.get("attempts")),
        ])
        if self.is_candidate:
            # The candidate's would-be decision: on its span only. Metrics count the
            # records the gateway acted on; candidates are in the audit record.
            attrs[sc.VERITY_POLICY_CANDIDATE] = True
            self.span.add_event(sc.EVENT_VERITY_DECISION, attrs)
            self.span.set_attributes(attrs)
            self.layer_verdicts.clear()
            # Counted apart from verity.decisions (which counts what the gateway did):
            # what each candidate would have done, beside which live policy.
            self.tel.metrics.candidate_decisions.add(1, clean_attrs([
                (sc.VERITY_POLICY, self.live_policy),
                (sc.VERITY_CANDIDATE_NAME, record.get("policy")),
                (sc.VERITY_VERDICT, record.get("verdict") or sc.NO_VERDICT),
                (sc.VERITY_ACTION, record.get("action") or sc.NO_ACTION),
            ]))
            return
        self.span.add_event(sc.EVENT_VERITY_DECISION, attrs)
        self.span.set_attributes(attrs)
        dims: dict[str, Any] = {k: attrs[k] for k in (sc.VERITY_POLICY, sc.VERITY_MODE) if k in attrs}
        metrics = self.tel.metrics
        # A record that was never verified has no verdict or action: the metric says so.
        metrics.decisions.add(1, {**dims,
                                  sc.VERITY_VERDICT: attrs.get(sc.VERITY_VERDICT, sc.NO_VERDICT),
                                  sc.VERITY_ACTION: attrs.get(sc.VERITY_ACTION, sc.NO_ACTION)})
        for layer, verdict in self.layer_verdicts:
            metrics.layer_verdicts.add(1, {**dims, sc.VERITY_LAYER_NAME: layer,
                                           sc.VERITY_VERDICT: verdict})
        self.layer_verdicts.clear()

    def content(self, messages: Sequence[Mapping[str, Any]], output: str | None,
                redact: Redactor | None = None) -> None:
        inference_details(self.span, self.tel.logger, messages, output,
                          redact or self.tel.redact, response_id=self.response_id,
                          context=self.upstream_context or self.context)

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
        if self._http is not None:
            attrs = {**self._http, sc.HTTP_RESPONSE_STATUS_CODE: status}
            if error_type:
                attrs[sc.ERROR_TYPE] = error_type
            self.tel.metrics.http_server_duration.record(time.perf_counter() - self._start,
                                                         attrs)
