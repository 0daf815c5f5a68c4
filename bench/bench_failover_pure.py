"""CPU cost of the pure issue-16 pieces per request: attempt plans and the Anthropic
translators (no I/O; what they add on top of the HTTP legs).

    .venv/bin/python bench/bench_failover_pure.py [--requests 20000] [--chunks 200]

Prints microseconds per request (mean and p50/p99 over batches of 100) for:

- ``plan, healthy pool``: RetryState + AttemptPlan.first() on a 2-member pool, the lease
  settled as a success;
- ``plan, first member 503s``: the same with the first member failing every call
  (after 3 failures health takes it out; the cooldown never ends: a frozen clock);
- ``plan, 30% failures``: the first member fails 30% of calls at random, a retry goes
  to the second;
- ``request translation``: messages_to_chat of a 6-turn conversation with a tool;
- ``response translation``: chat_to_message of a completion with a tool call;
- ``stream translation``: ChatStreamToMessages over a ``--chunks``-chunk text stream
  fed one chunk per read, plus finish().
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from gateway.wire.sse import DONE, encode_event
from gateway.upstream.balancer import Balancer, Member, PoolSpec
from gateway.upstream.failover import AttemptPlan, Target
from gateway.upstream.retry import Failure, RetryPolicy, RetryState
from gateway.wire.anthropic_messages import messages_to_chat
from gateway.wire.anthropic_response import chat_to_message
from gateway.wire.anthropic_stream import ChatStreamToMessages


def measure(fn: Callable[[], None], n: int, batch: int = 100) -> tuple[float, float, float]:
    """(mean, p50, p99) microseconds per call, over batches of ``batch`` calls."""
    per: list[float] = []
    for _ in range(max(1, n // batch)):
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        per.append((time.perf_counter() - start) / batch * 1e6)
    per.sort()
    return statistics.fmean(per), per[len(per) // 2], per[min(len(per) - 1,
                                                              int(len(per) * 0.99))]


def plan_case(down: float, seed: int = 1) -> Callable[[], None]:
    clock = [0.0]
    b = Balancer(["a", "b"], {"m": PoolSpec((Member("a"), Member("b")))},
                 clock=lambda: clock[0])
    rng = random.Random(seed)
    policy = RetryPolicy()
    targets = [Target("m")]

    def one() -> None:
        p = AttemptPlan(b, targets, "m", RetryState(policy, rng.random))
        attempt = p.first()
        while attempt is not None:
            if attempt.upstream == "a" and rng.random() < down:
                attempt = p.failed(Failure.from_status(503))
            else:
                attempt.lease.succeeded()
                return
        raise AssertionError("a request failed")
    return one


REQUEST = {
    "model": "m", "max_tokens": 512, "system": "You are terse.", "stream": True,
    "tools": [{"name": "weather", "description": "Weather now",
               "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "messages": [
        {"role": "user", "content": "Weather in Paris? " * 20},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "18C"}]},
        {"role": "assistant", "content": "It is 18C."},
        {"role": "user", "content": [{"type": "text", "text": "And tomorrow? " * 10}]},
        {"role": "assistant", "content": "Probably similar."},
    ],
}

COMPLETION = {
    "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "Let me check. " * 30, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city":"Paris"}'}}]}}],
    "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
}


def stream_case(chunks: int) -> Callable[[], None]:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    pieces = [encode_event({**base, "choices": [{"index": 0, "delta": {"content": "word "},
                                                 "finish_reason": None}]})
              for _ in range(chunks)]
    pieces.append(encode_event({**base, "choices": [{"index": 0, "delta": {},
                                                     "finish_reason": "stop"}]}))
    pieces.append(encode_event({**base, "choices": [], "usage": COMPLETION["usage"]}))
    pieces.append(DONE)

    def one() -> None:
        t = ChatStreamToMessages()
        for piece in pieces:
            t.feed(piece)
        t.finish()
        assert t.done and t.error is None
    return one


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--chunks", type=int, default=200)
    args = ap.parse_args(argv)
    n = args.requests
    cases: list[tuple[str, Callable[[], None], int]] = [
        ("plan, healthy pool", plan_case(0.0), n),
        ("plan, first member 503s", plan_case(1.0), n),
        ("plan, 30% failures", plan_case(0.3), n),
        ("request translation", lambda: messages_to_chat(REQUEST), n),
        ("response translation", lambda: chat_to_message(COMPLETION), n),
        (f"stream translation ({args.chunks} chunks)", stream_case(args.chunks),
         max(100, n // 20)),
    ]
    print(f"{'case':40} {'mean us':>9} {'p50 us':>9} {'p99 us':>9}")
    for name, fn, count in cases:
        mean, p50, p99 = measure(fn, count)
        print(f"{name:40} {mean:9.1f} {p50:9.1f} {p99:9.1f}")


if __name__ == "__main__":
    main()
