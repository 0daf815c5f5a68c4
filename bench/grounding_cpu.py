"""CPU time of the ``grounding`` layer alone, per request, in one or more checkouts.

Alternates the checkouts given (``.`` = this one) so that a shared, loaded box slows
them alike, and prints for each round the CPU p20 of a *prepared* request (context
indexed and prepared before the answer, as inline policies get it) and of a *cold* one
(everything inside the verification), with the prepared cost per 100 answer words.
News prose (HaluEval articles and summaries, as ``bench_layers.py --text news``).

    .venv/bin/python bench/grounding_cpu.py . [OTHER_CHECKOUT ...] [--rounds 3]
        [--answer-words 250] [--context-words 10000] [--iterations 40]

Each checkout runs in its own process with its own ``gateway`` package first on
``sys.path`` (the other checkout needs ``data/halueval/halueval-dev.jsonl``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

CHILD = r'''
import gc, sys, time
root, answer_words, context_words, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, root); sys.path.insert(0, root + "/bench")
import bench_layers as B
from pathlib import Path
from gateway.layers.base import LayerResources, VerifyInput
from gateway.layers.grounding import GroundingConfig, GroundingLayer
from gateway.sources.context import Document, GroundingContext
context, answers = B.news_request(Path(root) / "data/halueval/halueval-dev.jsonl",
                                  context_words, answer_words, 1)
answer = answers[0]
messages = [{"role": "system", "content": context},
            {"role": "user", "content": "Summarize the records above."}]
layer = GroundingLayer(GroundingConfig(index_cache_chars=0), LayerResources())
def fresh():
    ctx = GroundingContext(documents=[Document(id="system-1", text=context, kind="system")])
    return VerifyInput(messages=messages, response_text=answer, context=ctx)
def run(inp):
    coro = layer.verify(inp)
    try:
        coro.send(None)
    except StopIteration as e:
        return e.value
run(fresh())
gc.freeze()
prep, cold = [], []
for _ in range(n):
    inp = fresh(); layer.prepare(inp.context)
    t = time.process_time(); run(inp); prep.append(time.process_time() - t)
    inp = fresh()
    t = time.process_time(); run(inp); cold.append(time.process_time() - t)
w = len(answer.split())
p = sorted(prep)[len(prep) // 5] * 1e3
c = sorted(cold)[len(cold) // 5] * 1e3
print(f"{root:28} answer {w}w, context {len(context.split())}w: prepared {p:6.2f} ms "
      f"({p / w * 100:4.2f} per 100 words), cold {c:6.2f} ms")
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkouts", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--answer-words", type=int, default=250)
    ap.add_argument("--context-words", type=int, default=10_000)
    ap.add_argument("--iterations", type=int, default=40)
    args = ap.parse_args()
    for _ in range(args.rounds):
        for root in args.checkouts:
            subprocess.run([sys.executable, "-c", CHILD, str(root.resolve()),
                            str(args.answer_words), str(args.context_words),
                            str(args.iterations)], check=True)


if __name__ == "__main__":
    main()
