"""Latency of the model-free layers: ``grounding`` + ``claims`` + ``citations`` on one request.

A deterministic synthetic request (seeded RNG): a ~10,000-word context of
sentences with names, numbers and dates over a 3,000-word Zipf-distributed
pseudo-vocabulary (a tiny vocabulary would make every word occur in every
sentence, which real prose does not), and a ~1,000-word answer made of
copied / perturbed context sentences plus some invented ones, one in four
citing ``[1]`` (so ``citations`` has pairs to check).

    .venv/bin/python bench/bench_layers.py [--iterations 300] [--context-words 10000]
    .venv/bin/python bench/bench_layers.py --text news   # real prose (HaluEval articles)

``--text news`` uses real prose instead: HaluEval news articles (summarization rows
of ``data/halueval/halueval-dev.jsonl``) concatenated to 10,000 words, answered by
their faithful and hallucinated summaries (non-ASCII punctuation, richer vocabulary,
fewer numbers than the synthetic records).

Prints p50 / p99 / max in milliseconds, wall clock and CPU time
(``time.process_time``), for:

- ``index build``: ``build_index`` of the context alone (sentences and their
  tokens; postings, numbers, dates and negation are found on first use);
- ``facts scan``: the numbers and dates of the whole context (once per index);
- each layer alone on a *prepared* request: index and facts built before the
  answer (as the gateway's prepare step does while the upstream answers), nothing
  that depends on the answer memoized (postings of its words, negation, …);
- ``all three, cold``: a fresh request, its context indexed inside the request
  (shared by the three layers through ``GroundingContext.memo``) — **the number
  against the p99 <= 2 ms target**;
- ``all three, prepared``: a fresh request whose index and facts were built before
  the answer (inline policies in the gateway: ``VerityEngine.prepare``);
- ``all three, warm``: the same context resent by other requests, its index taken
  from the grounding layer's cross-request ``IndexCache``; the answers cycle through
  20 different ones, so postings of common words are cached as a hot context's
  would be. Report it as *warm*, never as the headline.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.sources.context import Document, GroundingContext  # noqa: E402
from gateway.layers.citations import CitationsConfig, CitationsLayer  # noqa: E402
from gateway.layers.claims import ClaimsConfig, ClaimsLayer  # noqa: E402
from gateway.layers.grounding import GroundingConfig, GroundingLayer  # noqa: E402
from gateway.text.index import build_index  # noqa: E402
from gateway.layers.base import LayerResources, VerifyInput  # noqa: E402

WARM_ANSWERS = 20
"""Different answers over the one context, cycled by the warm row."""
DATA = Path(__file__).resolve().parents[1] / "data" / "halueval" / "halueval-dev.jsonl"

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


def make_request(context_words: int, answer_words: int, seed: int = 7,
                 answers: int = 1) -> tuple[str, list[str]]:
    """The synthetic context and ``answers`` different answers over it."""
    rng = random.Random(seed)
    gen = Text(rng)
    ctx: list[str] = []
    while sum(len(s.split()) for s in ctx) < context_words:
        ctx.append(gen.sentence())
    out: list[str] = []
    for _ in range(answers):
        ans: list[str] = []
        while sum(len(s.split()) for s in ans) < answer_words:
            r = rng.random()
            src = rng.choice(ctx)
            if r < 0.15:
                ans.append(src[:-1] + " [1].")
            elif r < 0.6:
                ans.append(src)
            elif r < 0.8:
                ans.append(src.replace(" the ", " a ", 1).replace("%", " percent"))
            else:
                ans.append(gen.sentence())  # invented
        out.append(" ".join(ans))
    return " ".join(ctx), out


def news_request(data: Path, context_words: int, answer_words: int,
                 answers: int = 1) -> tuple[str, list[str]]:
    """Real prose: HaluEval news articles (summarization rows) concatenated until the
    context has ``context_words`` words; an answer is those articles' summaries, the
    faithful and the hallucinated one of each row, until it has ``answer_words`` words,
    one summary in four citing ``[1]``; answer ``i`` starts at summary ``3 * i``."""
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()
            if line.strip()]
    articles: dict[str, str] = {}
    summaries: dict[str, list[str]] = {}
    for r in rows:
        if r["source"] != "halueval-summarization":
            continue
        articles.setdefault(r["context_input"], r["context_input"])
        summaries.setdefault(r["context_input"], []).append(r["model_output"].strip())
    ctx: list[str] = []
    for article in articles:
        if sum(len(a.split()) for a in ctx) >= context_words:
            break
        ctx.append(article)
    if sum(len(a.split()) for a in ctx) < context_words:
        raise SystemExit(f"{data}: not enough summarization articles for {context_words} words")
    pool = [s for article in ctx for s in summaries[article]]
    out: list[str] = []
    for i in range(answers):
        ans: list[str] = []
        for n in range(len(pool)):
            if sum(len(a.split()) for a in ans) >= answer_words:
                break
            summary = pool[(3 * i + n) % len(pool)]
            ans.append(summary.rstrip(".") + " [1]." if n % 4 == 3 else summary)
        out.append(" ".join(ans))
    return "\n\n".join(a.strip() for a in ctx), out


def percentiles(samples: list[float]) -> str:
    s = sorted(samples)
    q = statistics.quantiles(s, n=100, method="inclusive")
    return f"{q[49]:8.3f} {q[98]:8.3f} {s[-1]:8.3f}"


def timed(fn: Callable[[], object], n: int,
          setup: Callable[[], object] | None = None) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU (process) milliseconds of ``n`` calls (``setup()`` untimed,
    its result passed to ``fn`` when given).

    On a shared machine the wall clock includes time spent descheduled; the CPU
    column is what the work itself costs.
    """
    wall, cpu = [], []
    for _ in range(n):
        arg = setup() if setup is not None else None
        c0, t0 = time.process_time(), time.perf_counter()
        fn(arg) if setup is not None else fn()  # type: ignore[call-arg]
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--context-words", type=int, default=10_000)
    ap.add_argument("--answer-words", type=int, default=1_000)
    ap.add_argument("--text", choices=("synthetic", "news"), default="synthetic",
                    help="synthetic: number-dense generated records (default, the worst "
                         "case); news: real HaluEval news articles and their summaries")
    ap.add_argument("--data", type=Path, default=DATA,
                    help="HaluEval JSONL for --text news (default: %(default)s)")
    ap.add_argument("--no-gc-freeze", action="store_true",
                    help="don't gc.freeze() after warm-up (the gateway freezes its start-up "
                         "heap once ready, gateway/app.py)")
    args = ap.parse_args(argv)
    if args.text == "news":
        context, answers = news_request(args.data, args.context_words, args.answer_words,
                                        WARM_ANSWERS)
    else:
        context, answers = make_request(args.context_words, args.answer_words,
                                        answers=WARM_ANSWERS)
    answer = answers[0]
    messages = [{"role": "system", "content": context},
                {"role": "user", "content": "Summarize the records above."}]
    res = LayerResources()
    cold = [GroundingLayer(GroundingConfig(index_cache_chars=0), res),
            ClaimsLayer(ClaimsConfig(), res), CitationsLayer(CitationsConfig(), res)]
    warm = [GroundingLayer(GroundingConfig(), res), cold[1], cold[2]]

    def new_input(text: str = answer) -> VerifyInput:
        ctx = GroundingContext(documents=[Document(id="system-1", text=context, kind="system")])
        return VerifyInput(messages=messages, response_text=text, context=ctx)

    def prepared() -> VerifyInput:
        """A fresh request whose context index and facts were built before the answer
        (what the gateway's prepare step does while the upstream answers): nothing that
        depends on the answer is memoized yet."""
        inp = new_input()
        cold[0].prepare(inp.context)
        return inp

    def run(layer: object, inp: VerifyInput) -> None:
        coro = layer.verify(inp)  # type: ignore[attr-defined]
        try:
            coro.send(None)  # CPU-only layers finish without awaiting anything
        except StopIteration:
            return
        raise RuntimeError("layer awaited something; use asyncio")

    def three(layers: list[object], inp: VerifyInput) -> None:
        for layer in layers:
            run(layer, inp)

    turn = itertools.count()

    def next_answer() -> VerifyInput:
        return new_input(answers[next(turn) % len(answers)])

    asyncio.run(cold[0].verify(new_input()))  # import/compile warm-up
    three(cold, prepared())
    for text in answers:  # the warm cache holds the context; each answer seen once
        three(warm, new_input(text))
    if not args.no_gc_freeze:
        gc.freeze()  # as the served gateway does: start-up objects leave the GC's full passes
    n = args.iterations
    print(f"context {len(context.split())} words, answer {len(answer.split())} words, "
          f"{n} iterations")
    rows: list[tuple[str, Callable[..., object], Callable[[], object] | None]] = [
        ("index build", lambda: build_index([("system-1", context)]), None),
        ("facts scan (numbers, dates)", lambda fresh: fresh.facts(),
         lambda: build_index([("system-1", context)])),
        ("grounding (prepared)", lambda inp: run(cold[0], inp), prepared),
        ("claims", lambda inp: run(cold[1], inp), prepared),
        ("citations (prepared)", lambda inp: run(cold[2], inp), prepared),
        ("all three, cold", lambda inp: three(cold, inp), new_input),
        ("all three, prepared", lambda inp: three(cold, inp), prepared),
        ("all three, warm", lambda inp: three(warm, inp), next_answer),
    ]
    print(f"{'':32} {'wall ms: p50':>12} {'p99':>8} {'max':>8}   {'cpu ms: p50':>11} {'p99':>8} "
          f"{'max':>8}")
    for name, fn, setup in rows:
        wall, cpu = timed(fn, n, setup)
        print(f"{name:32} {percentiles(wall):>30}   {percentiles(cpu):>29}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
