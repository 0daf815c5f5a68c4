"""Retry policy, backoff and retry-after parsing (gateway.upstream.retry): pure, no I/O,
the random source injected."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from gateway.errors import (
    InvalidRequest,
    UpstreamConnectError,
    UpstreamError,
    UpstreamStreamError,
    UpstreamTimeout,
    UpstreamTooLarge,
    UpstreamTruncated,
)
from gateway.upstream.retry import (
    Failure,
    RetryPolicy,
    RetryState,
    backoff,
    failure_from_error,
    parse_retry_after,
    retryable_request,
    schedule,
)

NOW = 1_750_000_000.0


def fixed(x: float) -> random.Random:
    """A Random whose random() is always ``x``."""
    r = random.Random()
    r.random = lambda: x  # type: ignore[method-assign]
    return r


# ---- backoff ----------------------------------------------------------------------------


def test_backoff_doubles_up_to_the_cap_without_jitter() -> None:
    p = RetryPolicy(base_backoff=0.1, max_backoff=1.0, jitter="none", max_attempts=7)
    assert schedule(p, random.random) == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


@pytest.mark.parametrize("jitter, unit, expected", [
    ("full", 0.0, 0.0), ("full", 0.5, 0.2), ("full", 0.999, 0.3996),
    ("equal", 0.0, 0.2), ("equal", 0.5, 0.3), ("none", 0.7, 0.4),
])
def test_jitter_modes(jitter: str, unit: float, expected: float) -> None:
    p = RetryPolicy(base_backoff=0.1, max_backoff=2.0, jitter=jitter)  # type: ignore[arg-type]
    assert backoff(p, 3, fixed(unit).random) == pytest.approx(expected)


def test_schedule_is_reproducible_from_a_seed_and_within_bounds() -> None:
    p = RetryPolicy(max_attempts=6, base_backoff=0.05, max_backoff=0.3)
    one = schedule(p, random.Random(42).random)
    assert one == schedule(p, random.Random(42).random)
    assert one != schedule(p, random.Random(43).random)
    caps = [min(0.05 * 2 ** i, 0.3) for i in range(5)]
    assert all(0 <= d < cap for d, cap in zip(one, caps, strict=True))


def test_a_misbehaving_random_source_cannot_push_a_delay_out_of_bounds() -> None:
    p = RetryPolicy(base_backoff=1.0, max_backoff=1.0)
    assert backoff(p, 1, lambda: 7.0) == 1.0
    assert backoff(p, 1, lambda: -3.0) == 0.0
    assert backoff(p, 1, lambda: float("nan")) == 0.0


def test_backoff_of_a_huge_retry_number_does_not_overflow() -> None:
    p = RetryPolicy(jitter="none", max_backoff=2.0)
    assert backoff(p, 10_000, random.random) == 2.0
    with pytest.raises(ValueError):
        backoff(p, 0, random.random)


@pytest.mark.parametrize("kwargs", [
    {"max_attempts": 0}, {"base_backoff": -1}, {"max_backoff": float("inf")},
    {"base_backoff": 2.0, "max_backoff": 1.0}, {"jitter": "some"},
    {"retry_after_cap": float("nan")}, {"statuses": frozenset({42})},
])
def test_policy_rejects_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


# ---- retry-after ------------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [
    ("7", 7.0), (" 7 ", 7.0), ("0", 0.0), ("1.5", 1.5), ("120", 120.0),
    ("-1", None), ("+3", None), ("1e3", None), ("inf", None), ("nan", None), ("", None),
    ("soon", None), ("7 seconds", None), (None, None), ("9" * 65, None),
])
def test_retry_after_seconds(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, now=NOW) == expected


def test_retry_after_http_date() -> None:
    later = format_datetime(datetime.fromtimestamp(NOW + 30, UTC), usegmt=True)
    assert later.endswith("GMT")
    assert parse_retry_after(later, now=NOW) == pytest.approx(30.0)
    earlier = format_datetime(datetime.fromtimestamp(NOW - 30, UTC), usegmt=True)
    assert parse_retry_after(earlier, now=NOW) == 0.0
    # the two obsolete forms RFC 9110 still asks recipients to read
    assert parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now=784111777.0) == 0.0
    assert parse_retry_after("Sun Nov  6 08:49:37 1994", now=784111770.0) == 7.0  # asctime
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=784111770.0) == 7.0


@pytest.mark.parametrize("ms, plain, expected", [
    ("1500", "9", 1.5), ("0", "9", 0.0), ("junk", "9", 9.0), (None, "9", 9.0),
    ("-5", None, None),
])
def test_retry_after_ms_wins_when_readable(ms: str | None, plain: str | None,
                                           expected: float | None) -> None:
    assert parse_retry_after(plain, ms, now=NOW) == expected


# ---- which requests and failures --------------------------------------------------------


@pytest.mark.parametrize("method, path, allowed", [
    ("POST", "/chat/completions", True), ("POST", "/messages", True),
    ("post", "/embeddings/", True), ("POST", "/messages/count_tokens", True),
    ("GET", "/models", True), ("DELETE", "/files/f1", True),
    ("POST", "/files", False), ("POST", "/batches", False), ("PATCH", "/x", False),
    ("POST", "/responses", False), ("POST", "/chat/completions/x", False),
])
def test_retryable_request(method: str, path: str, allowed: bool) -> None:
    assert retryable_request(method, path, RetryPolicy()) is allowed
    assert retryable_request(method, path, RetryPolicy(retry_non_idempotent=True))


@pytest.mark.parametrize("method, path, allowed", [
    ("POST", "/responses", True), ("POST", "/responses/", True),
    ("POST", "/responses/r1/cancel", False), ("POST", "/files", False), ("PATCH", "/responses", False),
])
def test_a_stateless_request_is_retryable_only_on_responses(method: str, path: str,
                                                            allowed: bool) -> None:
    assert retryable_request(method, path, RetryPolicy(), stateless=True) is allowed


@pytest.mark.parametrize("exc, started, kind", [
    (UpstreamConnectError("x"), False, "connect"),
    (UpstreamTimeout("x"), False, "timeout"),
    (UpstreamTimeout("x"), True, "body"),
    (UpstreamStreamError("x"), True, "body"),
    (UpstreamTruncated("x"), True, "body"),
    (UpstreamTooLarge("x"), True, "body"),
    (UpstreamError("x"), True, "body"),
    (UpstreamError("x"), False, "other"),
    (InvalidRequest("x"), False, "other"),
    (RuntimeError("x"), False, "other"),
])
def test_failure_from_error(exc: BaseException, started: bool, kind: str) -> None:
    assert failure_from_error(exc, response_started=started).kind == kind


@pytest.mark.parametrize("failure, fault", [
    (Failure("connect"), True), (Failure("timeout"), True), (Failure("body"), True),
    (Failure("other"), False), (Failure.from_status(429), True),
    (Failure.from_status(503), True), (Failure.from_status(400), False),
    (Failure.from_status(404), False),
])
def test_upstream_fault(failure: Failure, fault: bool) -> None:
    assert failure.upstream_fault is fault


def test_should_retry_header_is_read_loosely() -> None:
    assert Failure.from_status(503, should_retry=" False ").should_retry is False
    assert Failure.from_status(503, should_retry="true").should_retry is True
    assert Failure.from_status(503, should_retry="maybe").should_retry is None


# ---- decisions --------------------------------------------------------------------------


def state(**kw: object) -> RetryState:
    policy = RetryPolicy(**{"jitter": "none", **kw})  # type: ignore[arg-type]
    s = RetryState(policy, random.Random(0).random)
    s.started()
    return s


@pytest.mark.parametrize("failure", [
    Failure("connect"), Failure("timeout"), Failure.from_status(429),
    Failure.from_status(500), Failure.from_status(502), Failure.from_status(503),
    Failure.from_status(504), Failure.from_status(529),
])
def test_retryable_failures(failure: Failure) -> None:
    d = state().after(failure)
    assert d.retry and d.revisit and d.reason == "retry"
    assert d.delay == pytest.approx(0.1)


@pytest.mark.parametrize("failure, reason", [
    (Failure.from_status(400), "status_400"), (Failure.from_status(401), "status_401"),
    (Failure.from_status(404), "status_404"), (Failure.from_status(501), "status_501"),
    (Failure("body"), "body_error"), (Failure("other"), "other_error"),
    (Failure("connect", client_bytes_sent=True), "client_bytes_sent"),
    (Failure("status", status=503, client_bytes_sent=True), "client_bytes_sent"),
    (Failure.from_status(503, should_retry="false"), "upstream_said_no"),
])
def test_not_retried(failure: Failure, reason: str) -> None:
    s = state()
    d = s.after(failure)
    assert not d.retry and d.reason == reason
    assert s.reasons == [reason]


def test_configured_statuses_replace_the_defaults() -> None:
    s = state(statuses=frozenset({408}))
    assert s.after(Failure.from_status(408)).retry
    assert not s.after(Failure.from_status(503)).retry


def test_non_idempotent_request_is_never_retried() -> None:
    s = RetryState(RetryPolicy(), random.random, retryable=False)
    s.started()
    assert s.after(Failure("connect")).reason == "not_idempotent"


def test_attempts_are_bounded() -> None:
    s = state(max_attempts=3)
    assert s.after(Failure("connect")).retry
    s.started()
    assert s.after(Failure("connect")).retry
    s.started()
    d = s.after(Failure("connect"))
    assert not d.retry and d.reason == "attempts_exhausted" and s.exhausted
    assert s.attempts == 3


def test_one_attempt_means_no_retry() -> None:
    assert state(max_attempts=1).after(Failure("connect")).reason == "attempts_exhausted"


def test_backoff_grows_with_each_revisit() -> None:
    s = state(max_attempts=5, base_backoff=0.1, max_backoff=10)
    delays = []
    for _ in range(4):
        d = s.after(Failure.from_status(503))
        delays.append(d.delay)
        s.revisit(d.delay)
        s.started()
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8])
    assert s.total_delay == pytest.approx(1.5)


def test_retry_after_within_the_cap_is_waited_never_less_than_backoff() -> None:
    d = state(retry_after_cap=5).after(Failure.from_status(429, retry_after=3.0))
    assert d.retry and d.revisit and d.delay == 3.0
    d = state(base_backoff=0.5, max_backoff=1).after(
        Failure.from_status(429, retry_after=0.0))
    assert d.delay == 0.5


def test_retry_after_over_the_cap_sends_the_retry_elsewhere() -> None:
    d = state(retry_after_cap=5).after(Failure.from_status(429, retry_after=60.0))
    assert d.retry and not d.revisit
    assert d.reason == "retry_elsewhere" and d.hold_off == 60.0


def test_delay_budget_allows_only_untried_upstreams_once_spent() -> None:
    s = state(max_attempts=10, base_backoff=1, max_backoff=1, max_total_delay=2.5)
    for _ in range(2):
        d = s.after(Failure("connect"))
        assert d.revisit
        s.revisit(d.delay)
        s.started()
    d = s.after(Failure("connect"))
    assert d.retry and not d.revisit and d.reason == "retry_elsewhere"
    assert s.total_delay == 2.0
