"""When to try an upstream call again, and how long to wait first: pure, no I/O.

- :class:`RetryPolicy` — the value a config key resolves to: attempts, backoff, jitter,
  which statuses are retried, the ``retry-after`` cap, whether non-idempotent
  forwarded routes may be retried at all.
- :class:`Failure` — what went wrong with one attempt, as the caller saw it
  (:func:`failure_from_error` builds one from the gateway's error tree).
- :class:`RetryState` — one request's attempts: :meth:`RetryState.after` turns each
  failure into a :class:`Decision` (retry or not, the delay, why).
- :func:`backoff` / :func:`schedule` — the exponential backoff with jitter; the random
  source is injected (``random.Random(seed).random``), so every delay is reproducible.
- :func:`parse_retry_after` — ``retry-after`` (delay-seconds or HTTP-date) and
  ``retry-after-ms``, the clock injected.
- :func:`retryable_request` — whether a method and path may be sent twice at all.

What is retried (the issue's rule): a connect error, a timeout before the first byte
of the response, and the statuses in :attr:`RetryPolicy.statuses` (429, 500, 502, 503,
504 and Anthropic's 529 by default). Never once any byte reached the client, never a
cut body or a mid-body timeout (the upstream answered; the answer may have been billed
and partly relayed), never a 4xx other than 429, never when the upstream says
``x-should-retry: false``. A ``retry-after`` longer than the cap is not waited for:
the decision is "elsewhere only" (:attr:`Decision.revisit` false; :attr:`Decision.hold_off`
carries the value, so the balancer can cool that upstream down).

A delay is waited only before going back to an upstream this request already asked
(:meth:`RetryState.revisit`); an untried upstream (another pool member, a fallback) is
asked at once. :mod:`gateway.upstream.failover` applies that rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Literal

from gateway.errors import (
    UpstreamConnectError,
    UpstreamError,
    UpstreamStreamError,
    UpstreamTimeout,
    UpstreamTooLarge,
)

__all__ = [
    "DEFAULT_STATUSES", "IDEMPOTENT_METHODS", "RETRY_SAFE_POSTS", "STATELESS_SAFE_POST",
    "Decision", "Failure", "FailureKind", "Jitter", "Random", "RetryPolicy", "RetryState",
    "backoff",
    "failure_from_error", "parse_retry_after", "retryable_request", "schedule",
]

Random = Callable[[], float]
"""A source of floats in ``[0, 1)``: ``random.random``, or ``random.Random(seed).random``."""

Jitter = Literal["full", "equal", "none"]
FailureKind = Literal["connect", "timeout", "status", "body", "other"]

DEFAULT_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
"""529 is Anthropic's "overloaded" (an anthropic upstream's is already mapped to 503;
a natively relayed Messages call sees the 529 itself)."""

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})
"""RFC 9110 §9.2.2."""

RETRY_SAFE_POSTS = frozenset({
    "/chat/completions", "/completions", "/embeddings", "/moderations", "/messages",
    "/messages/count_tokens",
})
"""POST paths (below ``/v1``) whose repetition changes nothing upstream but the bill:
inference calls. Every other POST/PATCH (files, batches, fine-tunes, assistants,
``/responses`` with its stored state) is retried only with
:attr:`RetryPolicy.retry_non_idempotent`."""

STATELESS_SAFE_POST = "/responses"
"""Retried like an inference call when its body says ``store: false`` (nothing is
kept upstream, so a repeat changes nothing but the bill)."""

_MAX_HEADER_CHARS = 64  # an HTTP-date is 29; anything longer is not a retry-after


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How one request's upstream calls are retried. Times in seconds.

    ``max_attempts`` counts every upstream call the request makes, the first included,
    across its pool and its fallbacks (1: never retry): the cost of one client request
    is bounded by it whatever the chain looks like.
    """

    max_attempts: int = 3
    base_backoff: float = 0.1
    """The delay before the second call to one upstream; doubled for each later one."""
    max_backoff: float = 2.0
    """No single computed delay is longer (before jitter)."""
    jitter: Jitter = "full"
    """``full``: uniform in ``[0, d)`` (AWS's "full jitter"); ``equal``: ``d/2`` plus
    uniform in ``[0, d/2)``; ``none``: ``d``."""
    statuses: frozenset[int] = DEFAULT_STATUSES
    retry_after_cap: float = 5.0
    """A ``retry-after`` up to this long is waited for (instead of the backoff, never
    less than it); a longer one is not: that upstream is left for this request."""
    max_total_delay: float = 10.0
    """Sleeping, summed over the request, never goes past this: a retry that would is
    not made."""
    retry_non_idempotent: bool = False
    """Allow retries of forwarded POST/PATCH routes outside :data:`RETRY_SAFE_POSTS`."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        for name in ("base_backoff", "max_backoff", "retry_after_cap", "max_total_delay"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0")
        if self.max_backoff < self.base_backoff:
            raise ValueError("max_backoff must be >= base_backoff")
        if self.jitter not in ("full", "equal", "none"):
            raise ValueError("jitter must be 'full', 'equal' or 'none'")
        if any(not 100 <= s <= 599 for s in self.statuses):
            raise ValueError("statuses must be HTTP status codes (100-599)")


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt, as the caller saw it.

    ``kind``: ``connect`` (no connection, or it closed before a response),
    ``timeout`` (no response headers in time), ``status`` (an HTTP error status),
    ``body`` (headers arrived, then the body was cut, timed out or too large),
    ``other``. ``client_bytes_sent``: some of the response already reached the
    client (a relayed stream): nothing can be retried then.
    """

    kind: FailureKind
    status: int | None = None
    retry_after: float | None = None
    """Seconds the upstream asked to wait (:func:`parse_retry_after`)."""
    client_bytes_sent: bool = False
    should_retry: bool | None = None
    """The upstream's ``x-should-retry`` header (OpenAI and Anthropic send it), if any."""

    @classmethod
    def from_status(cls, status: int, *, retry_after: float | None = None,
                    should_retry: str | None = None) -> Failure:
        """A failure from an error response (``should_retry``: the raw header)."""
        flag = {"true": True, "false": False}.get((should_retry or "").strip().lower())
        return cls("status", status=status, retry_after=retry_after, should_retry=flag)

    @property
    def upstream_fault(self) -> bool:
        """Whether it says something about the upstream's health (what the balancer's
        passive health check counts): connect errors, timeouts, cut bodies, 429 and
        5xx. A 4xx is the request's fault, not the upstream's."""
        if self.kind == "status":
            return self.status is not None and (self.status == 429 or self.status >= 500)
        return self.kind != "other"


@dataclass(frozen=True, slots=True)
class Decision:
    """What may follow a failed attempt."""

    retry: bool
    """Another attempt may be made (on an upstream :attr:`revisit` allows)."""
    delay: float = 0.0
    """Seconds to wait before asking an upstream this request already asked (an
    untried upstream is asked at once)."""
    revisit: bool = True
    """An upstream already asked may be asked again (False: only untried ones: the
    ``retry-after`` was over the cap, or waiting would spend more than the budget)."""
    reason: str = ""
    """A short constant for spans, metrics and the audit: ``retry``, ``retry_elsewhere``
    or why not."""
    hold_off: float | None = None
    """A ``retry-after`` over the cap: how long that upstream asked to be left alone."""


def failure_from_error(exc: BaseException, *, response_started: bool = False,
                       client_bytes_sent: bool = False) -> Failure:
    """A :class:`Failure` from the gateway's error tree (upstream errors are converted
    to it at the client boundary). ``response_started``: the status line had arrived
    when ``exc`` was raised (a timeout then is a mid-body one, not retried)."""
    kind: FailureKind
    if isinstance(exc, UpstreamConnectError):
        kind = "connect"
    elif isinstance(exc, UpstreamTimeout):
        kind = "body" if response_started else "timeout"
    elif isinstance(exc, (UpstreamStreamError, UpstreamTooLarge)) \
            or (isinstance(exc, UpstreamError) and response_started):
        kind = "body"
    else:
        kind = "other"
    return Failure(kind, client_bytes_sent=client_bytes_sent)


def retryable_request(method: str, path: str, policy: RetryPolicy, *,
                      stateless: bool = False) -> bool:
    """Whether a request may be sent more than once. ``path`` is below ``/v1``
    (``/chat/completions``), without its query. ``stateless``: the body asks the
    upstream to keep nothing (a Responses request with ``store: false``), so
    ``POST /responses`` is an inference call like a chat completion."""
    method = method.upper()
    if method in IDEMPOTENT_METHODS or policy.retry_non_idempotent:
        return True
    if method != "POST":
        return False
    path = path.rstrip("/")
    return path in RETRY_SAFE_POSTS or (stateless and path == STATELESS_SAFE_POST)


def parse_retry_after(retry_after: str | None, retry_after_ms: str | None = None, *,
                      now: float) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` (preferred, as the SDKs do) or
    ``retry-after`` (delay-seconds, decimals accepted, or an HTTP-date); ``now`` is the
    current Unix time (``time.time()``). A date in the past gives 0; anything
    unreadable, negative or not finite gives None."""
    if retry_after_ms is not None and len(retry_after_ms) <= _MAX_HEADER_CHARS:
        ms = _seconds(retry_after_ms)
        if ms is not None:
            return ms / 1000
    if retry_after is None or len(retry_after) > _MAX_HEADER_CHARS:
        return None
    value = _seconds(retry_after)
    if value is not None:
        return value
    try:
        when = parsedate_to_datetime(retry_after.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # RFC 9110: every form is GMT (asctime's carries no zone)
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


def _seconds(text: str) -> float | None:
    text = text.strip()
    if not text or not all(c.isdigit() or c == "." for c in text):
        return None  # no signs, exponents, "inf" or "nan"
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def backoff(policy: RetryPolicy, retry: int, rng: Random) -> float:
    """The delay before retry number ``retry`` (1 = the second call) to one upstream:
    ``base * 2**(retry-1)`` capped at ``max_backoff``, then jittered."""
    if retry < 1:
        raise ValueError("retry counts from 1")
    delay = min(policy.base_backoff * 2.0 ** min(retry - 1, 64), policy.max_backoff)
    if policy.jitter == "full":
        return delay * _unit(rng)
    if policy.jitter == "equal":
        return delay / 2 + delay / 2 * _unit(rng)
    return delay


def _unit(rng: Random) -> float:
    x = rng()
    return min(max(x, 0.0), 1.0) if math.isfinite(x) else 0.0


def schedule(policy: RetryPolicy, rng: Random) -> list[float]:
    """The backoff delays of every retry the policy allows, in order
    (``max_attempts - 1`` of them): what :class:`RetryState` waits when every attempt
    goes to the same upstream and no ``retry-after`` is sent."""
    return [backoff(policy, n, rng) for n in range(1, policy.max_attempts)]


@dataclass(slots=True)
class RetryState:
    """One request's attempts against ``policy``. Not shared between requests.

    Per attempt: :meth:`started` before the call; after a failure, :meth:`after`; before
    going back to an upstream already asked, :meth:`revisit` with the delay it waits.
    """

    policy: RetryPolicy
    rng: Random
    retryable: bool = True
    """False for a request that must not be sent twice (:func:`retryable_request`)."""
    attempts: int = 0
    revisits: int = 0
    total_delay: float = 0.0
    reasons: list[str] = field(default_factory=list)
    """Each decision's reason, in order (for the audit and the request span)."""

    def started(self) -> int:
        """Count an attempt about to be made; return its number (1 = the first)."""
        self.attempts += 1
        return self.attempts

    @property
    def exhausted(self) -> bool:
        return self.attempts >= self.policy.max_attempts

    def revisit(self, delay: float) -> None:
        """Record going back to an upstream already asked, after waiting ``delay``."""
        self.revisits += 1
        self.total_delay += delay

    def after(self, failure: Failure) -> Decision:
        """The decision after ``failure`` of the latest attempt."""
        decision = self._decide(failure)
        self.reasons.append(decision.reason)
        return decision

    def _decide(self, failure: Failure) -> Decision:
        p = self.policy
        if failure.client_bytes_sent:
            return Decision(False, reason="client_bytes_sent")
        if not self.retryable:
            return Decision(False, reason="not_idempotent")
        if failure.kind == "status":
            if failure.status not in p.statuses:
                return Decision(False, reason=f"status_{failure.status}")
            if failure.should_retry is False:
                return Decision(False, reason="upstream_said_no")
        elif failure.kind not in ("connect", "timeout"):
            return Decision(False, reason=f"{failure.kind}_error")
        if self.attempts >= p.max_attempts:
            return Decision(False, reason="attempts_exhausted")
        after = failure.retry_after
        if after is not None and after > p.retry_after_cap:
            return Decision(True, revisit=False, reason="retry_elsewhere", hold_off=after)
        delay = backoff(p, self.revisits + 1, self.rng)
        if after is not None:
            delay = max(delay, after)
        if self.total_delay + delay > p.max_total_delay:
            return Decision(True, revisit=False, reason="retry_elsewhere")
        return Decision(True, delay=delay, reason="retry")
