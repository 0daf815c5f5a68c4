"""The span side of the OpenTelemetry implementation (private).

Owns the per-request objects behind the façade's :class:`~gateway.telemetry.RequestTrace`,
:class:`~gateway.telemetry.UpstreamTrace` and :class:`~gateway.telemetry.LayerSpan`:
here the SERVER (or shadow INTERNAL root) span, the ``candidate {policy}`` and
``regenerate attempt {n}`` INTERNAL spans and the policy decision; in
:mod:`gateway.telemetry._otel_child_spans` the ``chat`` CLIENT span per upstream call
and the ``prepare context`` and ``verify {layer}`` INTERNAL spans — their attributes and
statuses, and the metric points each one records when it finishes. Spans are parented explicitly (each trace object holds its span's
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
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, set_span_in_context

from gateway.redact import Redactor
from gateway.telemetry import LayerSpan, PrepareSpan, RequestTrace, TraceLink, UpstreamTrace
from gateway.telemetry import semconv as sc
from gateway.telemetry._otel_attrs import UpstreamKey, as_number, clean_attrs
from gateway.telemetry._otel_child_spans import OtelLayer, OtelPrepare, OtelUpstream, mark_error
from gateway.telemetry._otel_events import inference_details

if TYPE_CHECKING:
    from gateway.telemetry._otel_impl import OtelTelemetry

__all__ = ["OtelLayer", "OtelPrepare", "OtelTrace", "OtelUpstream"]

CANDIDATE_SPAN = "candidate"


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
                mark_error(span, type(exc).__qualname__)
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
            mark_error(span, type(exc).__qualname__)
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
            mark_error(span, type(exc).__qualname__)
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
