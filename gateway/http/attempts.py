"""One upstream exchange with retries, fallbacks and load balancing: :func:`attempts`.

The plan (:meth:`gateway.upstream.router.Upstreams.plan`: pure, no I/O) says where
each attempt goes; this module makes the calls. Each attempt is a CLIENT span of its
own (``trace.upstream(..., attempt=n, upstream=name)``). What is tried again:

- a connect error or a timeout before the response headers;
- an error status the retry policy lists (429, 5xx), unless the upstream says
  ``x-should-retry: false``: the response is dropped unread and the next attempt made.

Nothing is retried once a response was handed to the caller: a status below 400, a
last failure (its status and body go to the client as the upstream sent them), or any
error once its body is being read or relayed. A request whose body cannot be sent
twice (a streamed upload) or that must not be (non-idempotent forwarded routes) gets
exactly one attempt: :meth:`Upstreams.plan` knows.

Each attempt's lease is settled with the balancer: a failure that says something about
the upstream (connect, timeout, 429, 5xx, a body cut while read) counts towards its
passive health; a 4xx or a client that left does not; a response read to its end is a
success — a stream at its end, so least-in-flight counts open streams.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from gateway.errors import UpstreamError, UpstreamUnavailable
from gateway.telemetry import Headers, RequestTrace, UpstreamTrace
from gateway.upstream.base import UpstreamClient, UpstreamResponse
from gateway.upstream.failover import Attempt, AttemptPlan
from gateway.upstream.retry import Failure, failure_from_error, parse_retry_after
from gateway.upstream.router import Upstreams

__all__ = ["Sender", "Served", "attempts"]

Sender = Callable[[UpstreamClient, str, dict[str, str]], Awaitable[UpstreamResponse]]
"""Send the request to ``client``, asking for ``model``, with ``headers`` (the client's
forwardable ones, authentication and trace context already in); return once the
response headers arrive. Called once per attempt: it rebuilds the body for the model
(a fallback may rewrite it) and the upstream's kind."""


class _Watched(UpstreamTrace):
    """The attempt's span as the caller sees it, noting a failure the caller records
    (a stream cut while relayed is reported, not raised)."""

    def __init__(self, inner: UpstreamTrace) -> None:
        self.inner = inner
        self.recording = inner.recording
        self.failed = False

    def headers(self) -> Headers:
        return self.inner.headers()

    def first_chunk(self) -> None:
        self.inner.first_chunk()

    def response(self, status: int, body: Any) -> None:
        self.inner.response(status, body)

    def error(self, error_type: str) -> None:
        self.failed = True
        self.inner.error(error_type)

    def outcome(self, outcome: str) -> None:
        self.inner.outcome(outcome)


@dataclass(slots=True)
class Served:
    """The response handed to the caller, and how it was reached."""

    resp: UpstreamResponse
    up: UpstreamTrace
    client: UpstreamClient
    attempt: Attempt
    plan: AttemptPlan

    @property
    def attempts(self) -> int:
        return self.attempt.number

    def record(self) -> dict[str, Any]:
        """What the audit record says of the exchange: the upstream that served it, the
        calls made (retries and fallbacks included) and why each failed one was left."""
        out: dict[str, Any] = {"name": self.client.config.name,
                               "attempts": self.attempt.number}
        if self.attempt.number > 1:
            out["tried"] = list(self.plan.tried)
            out["reasons"] = [d.reason for d in self.plan.decisions]
        if self.attempt.fallback:
            out["fallback"] = True
        if self.attempt.model != self.plan.model:
            out["model"] = self.attempt.model
        return out


def _status_failure(resp: UpstreamResponse) -> Failure:
    retry_after = parse_retry_after(resp.header("retry-after"), resp.header("retry-after-ms"),
                                    now=time.time())
    return Failure.from_status(resp.status, retry_after=retry_after,
                               should_retry=resp.header("x-should-retry"))


@asynccontextmanager
async def attempts(upstreams: Upstreams, trace: RequestTrace, plan: AttemptPlan,
                   send: Sender, client_headers: Iterable[tuple[bytes, bytes]], *,
                   stream: bool, operation: str = "chat") -> AsyncIterator[Served]:
    """Make ``plan``'s attempts until one gives a response to hand on; yield it (its
    span open, its response released after). Raises the last attempt's
    :class:`UpstreamError` when no attempt got a response, and
    :class:`UpstreamUnavailable` (503) when the plan has no attempt at all."""
    attempt = plan.first()
    if attempt is None:
        trace.served(None, 0)
        raise UpstreamUnavailable("Every upstream serving this model is failing and in its "
                                  "cooldown (routing.health); try again later.")
    headers_in = list(client_headers)
    while True:
        if attempt.delay > 0:
            await asyncio.sleep(attempt.delay)
        client = upstreams.client(attempt.upstream)
        nxt: Attempt | None = None
        with trace.upstream(model=attempt.model, provider=client.config.kind,
                            server_address=client.server_address, stream=stream,
                            operation=operation, server_url=client.base_url,
                            attempt=attempt.number, upstream=client.config.name) as span:
            headers = client.build_headers(headers_in, use_own_key=upstreams.use_own_key,
                                           extra=span.headers())
            try:
                resp = await send(client, attempt.model, headers)
            except UpstreamError as err:
                span.error(type(err).__name__)
                nxt = plan.failed(failure_from_error(err))
                span.outcome(plan.decisions[-1].reason)
                if nxt is None:
                    trace.served(None, attempt.number)
                    raise
            except BaseException:  # cancelled (the client left) or a bug: not its fault
                attempt.lease.released()
                raise
            else:
                if resp.status >= 400:
                    nxt = plan.failed(_status_failure(resp))
                    span.outcome(plan.decisions[-1].reason)
                    if nxt is not None:  # dropped unread: the next attempt answers
                        span.response(resp.status, None)
                        resp.close()
                        resp.release()
                if nxt is None:
                    if resp.status < 400:
                        span.outcome("ok")
                    trace.served(client.config.name, attempt.number)
                    watched = _Watched(span)
                    try:
                        yield Served(resp, watched, client, attempt, plan)
                    except UpstreamError:
                        attempt.lease.failed()  # the body was cut or too large
                        resp.close()
                        raise
                    except BaseException:
                        attempt.lease.released()
                        resp.close()
                        raise
                    else:
                        if watched.failed:
                            attempt.lease.failed()
                        else:
                            attempt.lease.succeeded()  # no-op after a settled failure
                    finally:
                        resp.release()
                    return
        attempt = nxt
