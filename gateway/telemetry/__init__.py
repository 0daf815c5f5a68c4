"""Telemetry: the façade the gateway talks to; the only package that imports
OpenTelemetry.

The rest of the gateway talks to a :class:`Telemetry` object made in the app
lifespan, through the few methods below. With no OTLP endpoint configured the
no-op implementation is used and costs next to nothing: it is a no-op by design —
callers never test which implementation they hold. Where building an argument
costs more than the call (a whole record for ``decision``), they ask the object
whether it records (``trace.recording``, ``up.recording``, ``span.recording``,
``telemetry.enabled``).

Contract (what callers do):

- ``trace = telemetry.start_request(scope, route)`` at the start of every
  request; ``trace.end(status, error_type)`` when the response is finished.
- ``with trace.upstream(model=…, provider=…, server_address=…, stream=…,
  server_url=…, attempt=…, upstream=…) as up:`` around each upstream call, one per
  attempt (``server_url``, the upstream's base URL, gives ``server.port``;
  ``attempt``, from 1, gives ``http.request.resend_count`` from the second on;
  ``upstream`` is the configured name); ``up.outcome(o)`` says how the attempt ended
  (``ok`` or the retry decision), ``trace.served(name, attempts)`` once the calls of
  one upstream exchange are over; inside it ``up.headers()`` gives the W3C
  ``traceparent`` header pairs to send upstream, ``up.first_chunk()`` marks time
  to first chunk, ``up.response(status, body)`` records the response (``body``
  is the parsed completion, or the assembled stream summary with ``id``,
  ``model``, ``choices[].finish_reason`` and ``usage``), ``up.error(type)``.
- ``trace = trace.for_policy(name)`` before a policy verifies with it: the
  ``verify`` spans it then starts carry the policy's name (and whether it is a
  candidate); use the returned trace.
- ``with trace.candidate(name) as ctrace:`` around one candidate policy's evaluation
  (a span of its own); verify with ``ctrace``, then ``ctrace.decision(record)`` records
  what the candidate would have decided (an event on its span; no metrics).
- ``with trace.layer(name) as span:`` around one verification layer (``name``: its
  id in the policy); then
  ``span.result(outcome)`` with the pipeline's per-layer outcome mapping
  (``name``, ``score``, ``passed``, ``latency_ms``, ``label``, ``explanation``,
  ``cache_hit``, ``judge_calls``, ``cost``, ``error``).
- ``with trace.attempt(n):`` around a regenerate attempt (``attempt(n, action)`` for
  another upstream action's: ``request-sources``, ``decompose-and-retry``).
- ``prep = trace.prepare()`` when an inline policy's context-side preparation is
  scheduled (no span yet); ``with prep:`` around the work itself (starts the span,
  records an exception and re-raises it), inside which ``prep.context_chars(n)``
  gives the context's size and ``prep.layer(key)`` precedes each layer's
  ``prepare``; after it, ``prep.used()`` when verification picks the prepared
  context up, and ``prep.end()`` once the request is done with it (ends the span at
  the time the work finished; a no-op if the work never started).
- ``trace.decision(record)`` once, with the whole outcome record (policy, mode,
  verdict, score, action, attempts).
- ``trace.selected(policy, mode)`` when a policy applies to the request: its
  SERVER span says which and how (inline and shadow alike).
- ``telemetry.start_shadow(trace_or_link)`` returns a new trace for background
  work, linked to (never parented by) the request's span. ``trace.link()`` is a
  picklable :class:`TraceLink` to the request's span (for a verification job); in
  this process it still reaches the live trace, which then links back.
- ``telemetry.count(name, value, attributes)`` for gateway counters
  (shadow queue drops, fail-open count, …; short attribute keys such as ``policy``
  are exported under their ``verity.*`` names); ``telemetry.gauge_shadow_depth(fn)``,
  ``telemetry.gauge_upstreams(fn)`` (each upstream's health state and calls in flight);
  ``telemetry.observe(name, value, attributes)`` for the named histograms and
  ``telemetry.gauge(name, fn)`` for the named gauges (``semconv.HISTOGRAMS``,
  ``semconv.GAUGES``: the shadow queue's wait, the verified share, the workers).
- ``telemetry.continue_trace(link, name)`` returns a trace whose span is a child of
  the span ``link`` names (known by its W3C context): work done for a request in
  another process (an inline verification in a worker) lands in the request's trace.
- ``trace.content(messages, output)`` records message content, only when the
  policy opts in; every string passes the redaction hook first.
- ``telemetry.instrument_httpx(client)`` for httpx clients the gateway owns (judge
  calls); ``telemetry.aiohttp_trace_configs()`` for the upstream aiohttp session
  (empty unless ``VERITY_OTEL_HTTP_SPANS=true``: the ``chat`` span already
  carries what the HTTP span would).
- ``telemetry.describe()`` says where telemetry goes (the lifespan logs it once).
- ``telemetry.shutdown(timeout)`` once, last, at shutdown: flushes every signal in
  parallel and returns within ``timeout`` seconds (default
  :data:`DEFAULT_FLUSH_SECONDS`) whether or not the collector answered.

When telemetry is on, the OpenTelemetry implementation lives in
``gateway.telemetry._otel_impl`` and the ``_otel_*`` modules beside it (imported
only by :func:`create_telemetry`, so a gateway without an endpoint never imports
the SDK); every name it emits is in ``gateway.telemetry.semconv``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from gateway.redact import Redactor
from gateway.settings.schema import DEFAULT_FLUSH_SECONDS

__all__ = ["DEFAULT_FLUSH_SECONDS", "LayerSpan", "NoopTelemetry", "PrepareSpan", "RequestTrace",
           "Telemetry", "TraceLink", "UpstreamTrace", "create_telemetry", "telemetry_enabled"]


Headers = list[tuple[bytes, bytes]]

@dataclass(frozen=True, slots=True)
class TraceLink:
    """A request's span as a value: its W3C ``traceparent`` (and ``tracestate``).

    Carried by a verification job so its background trace can link to the request.
    In the process that made it, it also reaches the live trace (weakly), so the
    request's span can link back while it is still open; pickled, it is the W3C
    context alone.
    """

    traceparent: str
    tracestate: str = ""
    local: weakref.ref[RequestTrace] | None = field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple[type[TraceLink], tuple[str, str]]:
        return (TraceLink, (self.traceparent, self.tracestate))

    def trace(self) -> RequestTrace | None:
        """The live trace, when this process holds it still."""
        return self.local() if self.local is not None else None


class UpstreamTrace:
    """The upstream call (CLIENT span). No-op base."""

    recording = False
    """Whether :meth:`response` records what it is given (build the body only then)."""

    def headers(self) -> Headers:
        return []

    def first_chunk(self) -> None:
        pass

    def response(self, status: int, body: Mapping[str, Any] | None) -> None:
        pass

    def error(self, error_type: str) -> None:
        pass

    def outcome(self, outcome: str) -> None:
        """How this attempt ended for the request: ``ok`` (its response was used), or
        the retry decision after its failure (``retry``, ``retry_elsewhere``,
        ``attempts_exhausted``, ``status_400`` …; :mod:`gateway.upstream.retry`)."""


class LayerSpan:
    """One verification layer (INTERNAL span). No-op base."""

    recording = False
    """Whether :meth:`result` records what it is given (build the mapping only then)."""

    def result(self, outcome: Mapping[str, Any]) -> None:
        pass


class PrepareSpan:
    """An inline policy's context-side preparation (INTERNAL span). No-op base.

    A context manager around the work; the span outlives the block until
    :meth:`end`, so that it can say whether verification used the result.
    """

    __slots__ = ()

    def __enter__(self) -> PrepareSpan:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None

    def context_chars(self, chars: int) -> None:
        """The size of the prepared context (its documents' text), in characters."""

    def layer(self, key: str) -> None:
        """The layer (its policy key) whose ``prepare`` runs next."""

    def used(self) -> None:
        """Verification picked the prepared context up."""

    def end(self) -> None:
        """The request is done with the preparation: end the span (once)."""


class RequestTrace:
    """One incoming request (SERVER span). No-op base."""

    recording = False
    """Whether :meth:`decision` records what it is given (build the record only then)."""

    def link(self) -> TraceLink | None:
        """This trace's span as a value (None: nothing to link to)."""
        return None

    @property
    def trace_id(self) -> str | None:
        """This trace's id (32 hex digits): what an audit record links to; None: no trace."""
        return None

    def selected(self, policy: str, mode: str) -> None:
        """A policy applies to this request, in ``mode`` (inline or shadow)."""

    def upstream(self, *, model: str, provider: str, server_address: str,
                 stream: bool, operation: str = "chat",
                 server_url: str | None = None, attempt: int = 1,
                 upstream: str | None = None) -> AbstractContextManager[UpstreamTrace]:
        # Every upstream call opens this block: no generator per call when it does nothing.
        return _NOOP_UPSTREAM_BLOCK

    def served(self, upstream: str | None, attempts: int) -> None:
        """The request's upstream calls are over: ``upstream`` (its name; None: none
        answered) served it after ``attempts`` calls, retries and fallbacks included."""

    def for_policy(self, policy: str) -> RequestTrace:
        """The trace to verify ``policy`` with: its ``verify`` spans name the policy."""
        return self

    def candidate(self, policy: str) -> AbstractContextManager[RequestTrace]:
        """Around candidate ``policy``'s evaluation: yields the trace to verify it with."""
        return _Yields(self)

    def layer(self, name: str) -> AbstractContextManager[LayerSpan]:
        """Around one verification layer: yields its span."""
        return _NOOP_LAYER_BLOCK  # no generator per layer on the no-op trace

    @contextmanager
    def attempt(self, number: int, action: str = "regenerate") -> Iterator[None]:
        yield

    def prepare(self) -> PrepareSpan:
        """The inline prepare step, child of this request's span (see :class:`PrepareSpan`)."""
        return _NOOP_PREPARE

    def decision(self, record: Mapping[str, Any]) -> None:
        pass

    def content(self, messages: Sequence[Mapping[str, Any]], output: str | None,
                redact: Redactor | None = None) -> None:
        """Record input messages and output text. Call only when the policy opts in;
        ``redact`` (else the telemetry's default hook) is applied to every string."""

    def end(self, status: int, error_type: str | None = None) -> None:
        pass


class _Yields(AbstractContextManager[Any]):
    """A block that yields ``value`` and does nothing else (the no-op trace's blocks,
    cheaper than a generator per block)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __enter__(self) -> Any:
        return self.value

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None


_NOOP_UPSTREAM = UpstreamTrace()
_NOOP_UPSTREAM_BLOCK = _Yields(_NOOP_UPSTREAM)
_NOOP_LAYER = LayerSpan()
_NOOP_LAYER_BLOCK = _Yields(_NOOP_LAYER)
_NOOP_PREPARE = PrepareSpan()
_NOOP_TRACE = RequestTrace()


class Telemetry:
    """Telemetry façade. This base is the no-op used when telemetry is off."""

    enabled = False

    def start_request(self, scope: Mapping[str, Any], route: str) -> RequestTrace:
        return _NOOP_TRACE

    def start_shadow(self, parent: RequestTrace | TraceLink | None,
                     name: str = "shadow audit") -> RequestTrace:
        return _NOOP_TRACE

    def describe(self) -> str:
        """Where telemetry goes, for the log line at start."""
        return "telemetry off: no OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) is set"

    def count(self, name: str, value: int = 1,
              attributes: Mapping[str, Any] | None = None) -> None:
        pass

    def continue_trace(self, link: TraceLink | None, name: str) -> RequestTrace:
        """A trace whose span is a child of the span ``link`` names (in another
        process: work done for that request, e.g. its verification in a worker)."""
        return _NOOP_TRACE

    def gauge_shadow_depth(self, depth: Callable[[], int]) -> None:
        """Report the shadow queue depth by calling ``depth()`` at each metric export."""

    def observe(self, name: str, value: float,
                attributes: Mapping[str, Any] | None = None) -> None:
        """Record ``value`` to the histogram ``name`` (``semconv.HISTOGRAMS``)."""

    def gauge(self, name: str, value: Callable[[], float | None]) -> None:
        """Report gauge ``name`` (``semconv.GAUGES``) by calling ``value()`` at each
        metric export (None: nothing to report then)."""

    def gauge_upstreams(self, read: Callable[[], Sequence[tuple[str, int, int]]]) -> None:
        """Report each upstream's health at each metric export: ``read()`` gives
        (name, state — 0 closed, 1 half-open, 2 open — calls in flight)."""

    def instrument_httpx(self, client: Any) -> None:
        """Trace an ``httpx`` client the gateway owns (e.g. the judge client)."""

    def aiohttp_trace_configs(self) -> list[Any]:
        """``aiohttp.TraceConfig`` objects for the upstream session (HTTP CLIENT spans)."""
        return []

    def force_flush(self, timeout: float | None = None) -> None:
        """Export what is buffered; waits ``timeout`` seconds at most (default
        :data:`DEFAULT_FLUSH_SECONDS`)."""

    def shutdown(self, timeout: float | None = None) -> None:
        """Flush and stop every exporter, all in parallel, waiting ``timeout`` seconds
        at most in all (default :data:`DEFAULT_FLUSH_SECONDS`; ``0``: do not wait);
        what is still unexported then is dropped. Safe to call twice."""


NoopTelemetry = Telemetry


def telemetry_enabled(environ: Mapping[str, str]) -> bool:
    """True when an OTLP endpoint is set and ``OTEL_SDK_DISABLED`` is not true."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
                or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip())


def create_telemetry(environ: Mapping[str, str] | None = None, *,
                     redact: Redactor | None = None) -> Telemetry:
    """Real telemetry when an OTLP endpoint is configured, else the no-op.

    Reads the standard ``OTEL_*`` variables from ``environ`` (default
    ``os.environ``): service name and resource attributes, per-signal endpoints
    and headers, sampler, ``OTEL_{TRACES,METRICS,LOGS}_EXPORTER=none``.
    Providers belong to the returned object; no global provider is set.
    ``redact`` is the default content redaction hook (see ``trace.content``).
    """
    if environ is None:
        environ = os.environ
    if not telemetry_enabled(environ):
        return Telemetry()
    from gateway.telemetry._otel_impl import OtelTelemetry
    return OtelTelemetry.from_environ(environ, redact=redact)
