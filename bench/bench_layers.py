"""Latency of the model-free layers: ``grounding`` + ``claims`` on one request.

A deterministic synthetic request (seeded RNG): a ~10,000-word context of
sentences with names, numbers and dates over a 3,000-word Zipf-distributed
pseudo-vocabulary (a tiny vocabulary would make every word occur in every
sentence, which real prose does not), and a ~1,000-word answer made of
paraphrased / perturbed context sentences plus some invented ones. Each
iteration builds a fresh ``GroundingContext`` (so the per-request index is
built, as in production: *cold*) and runs both layers; a *warm* run reuses one
context (index already memoized, e.g. when ``citations`` built it first).

    .venv/bin/python bench/bench_layers.py [--iterations 300] [--context-words 10000]

Prints p50 / p90 / p99 / max in milliseconds for: index build alone, grounding,
claims, and grounding + claims (cold and warm). Budget (DESIGN): p99 <= 2 ms for
grounding + claims.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.context import Document, GroundingContext  # noqa: E402
from gateway.layers.claims import ClaimsConfig, ClaimsLayer  # noqa: E402
from gateway.layers.grounding import GroundingConfig, GroundingLayer  # noqa: E402
from gateway.textindex import build_index  # noqa: E402
from gateway.verify.base import LayerResources, VerifyInput  # noqa: E402

SYLLABLES = "ka lo mi ne ru sa to vi de ga ho ji ku ma no pe ri su te wa ba co fi".split()
MONTHS = ["January", "March", "May", "July", "September", "November"]


def vocabulary(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct pseudo-words (2-4 syllables)."""
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Text:
    """Sentence generator with a Zipf-like word distribution, as in real prose."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = vocabulary(rng, 3000)
        self.weights = [1.0 / (rank + 1) for rank in range(len(self.words))]
        self.names = [w.capitalize() for w in vocabulary(rng, 400)]

    def sentence(self) -> str:
        rng = self.rng
        who = f"{rng.choice(self.names)} {rng.choice(self.names)}"
        what = " ".join(rng.choices(self.words, self.weights, k=rng.randint(6, 12)))
        when = f"{rng.choice(MONTHS)} {rng.randint(1, 28)}, {rng.randint(1950, 2024)}"
        qty = rng.choice([f"{rng.randint(2, 900)} people", f"${rng.randint(1, 99)}.{rng.randint(1, 9)}"
                          " million", f"{rng.randint(1, 99)}%", "three seasons"])
        neg = " did not" if rng.random() < 0.1 else ""
        return (f"On {when}, {who} of {rng.choice(self.names)} City{neg} reported the {what} "
                f"in {rng.choice(self.names)} with {qty}.")


def make_request(context_words: int, answer_words: int, seed: int = 7) -> tuple[str, str]:
    rng = random.Random(seed)
    gen = Text(rng)
    ctx: list[str] = []
    while sum(len(s.split()) for s in ctx) < context_words:
        ctx.append(gen.sentence())
    ans: list[str] = []
    while sum(len(s.split()) for s in ans) < answer_words:
        r = rng.random()
        src = rng.choice(ctx)
        if r < 0.6:
            ans.append(src)
        elif r < 0.8:
            ans.append(src.replace(" the ", " a ", 1).replace("%", " percent"))
        else:
            ans.append(gen.sentence())  # invented
    return " ".join(ctx), " ".join(ans)


def percentiles(samples: list[float]) -> str:
    s = sorted(samples)
    q = statistics.quantiles(s, n=100, method="inclusive")
    return (f"p50 {q[49]:7.3f}  p90 {q[89]:7.3f}  p99 {q[98]:7.3f}  max {s[-1]:7.3f}  ms "
            f"(n={len(s)})")


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--context-words", type=int, default=10_000)
    ap.add_argument("--answer-words", type=int, default=1_000)
    args = ap.parse_args(argv)
    context, answer = make_request(args.context_words, args.answer_words)
    messages = [{"role": "system", "content": context},
                {"role": "user", "content": "Summarize the records above."}]
    grounding = GroundingLayer(GroundingConfig(), LayerResources())
    claims = ClaimsLayer(ClaimsConfig(), LayerResources())

    def new_input() -> VerifyInput:
        ctx = GroundingContext(documents=[Document(id="system-1", text=context, kind="system")])
        return VerifyInput(messages=messages, response_text=answer, context=ctx)

    warm_input = new_input()

    def run(layer: GroundingLayer | ClaimsLayer, inp: VerifyInput) -> None:
        coro = layer.verify(inp)
        try:
            coro.send(None)  # CPU-only layers finish without awaiting anything
        except StopIteration:
            return
        raise RuntimeError("layer awaited something; use asyncio")

    def both_cold() -> None:
        inp = new_input()
        run(grounding, inp)
        run(claims, inp)

    def both_warm() -> None:
        run(grounding, warm_input)
        run(claims, warm_input)

    asyncio.run(grounding.verify(new_input()))  # import/compile warm-up
    both_cold()
    n = args.iterations
    print(f"context {len(context.split())} words, answer {len(answer.split())} words, "
          f"{n} iterations")
    print(f"index build            {percentiles(timed(lambda: build_index([('d', context)]), n))}")
    print(f"grounding (cold)       {percentiles(timed(lambda: run(grounding, new_input()), n))}")
    print(f"grounding (warm index) {percentiles(timed(lambda: run(grounding, warm_input), n))}")
    print(f"claims                 {percentiles(timed(lambda: run(claims, warm_input), n))}")
    print(f"grounding+claims cold  {percentiles(timed(both_cold, n))}")
    print(f"grounding+claims warm  {percentiles(timed(both_warm, n))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
