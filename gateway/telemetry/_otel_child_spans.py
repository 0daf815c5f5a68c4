"""The spans a request trace starts (private): one upstream call's ``chat`` CLIENT
span, a verification layer's ``verify {layer}`` span and the inline prepare step's
``prepare context`` span — their attributes, statuses and the metric points each one
records when it finishes. The request trace itself (:mod:`gateway.telemetry._otel_spans`)
starts them and parents them explicitly.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from gateway.telemetry import Headers, LayerSpan, PrepareSpan, UpstreamTrace
from gateway.telemetry import semconv as sc
from gateway.telemetry._otel_attrs import UpstreamKey, as_count, as_number, clean_attrs, error_kind
from gateway.telemetry._otel_events import emit_evaluation, evaluation_event

if TYPE_CHECKING:
    from gateway.telemetry._otel_spans import OtelTrace

__all__ = ["PREPARE_SPAN", "OtelLayer", "OtelPrepare", "OtelUpstream", "mark_error"]

PREPARE_SPAN = "prepare context"


def mark_error(span: Span, error_type: str) -> None:
    """``error.type`` on ``span`` and an ERROR status saying it."""
    span.set_attribute(sc.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))


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
        mark_error(self._span, error_type)

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
            mark_error(span, error_type)
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
            span.add_event(sc.EVENT_EXCEPTION, {sc.EXCEPTION_TYPE: kind,
                                                sc.EXCEPTION_MESSAGE: message})
            mark_error(span, kind)

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
