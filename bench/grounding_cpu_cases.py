"""CPU of the ``grounding`` layer per 100 answer words over labelled cases, A/B in one process.

``bench/grounding_cpu.py`` times one long news request with the layer's defaults; a
check that runs only in conversations or short passages (``name_variants``) needs the
traffic it runs on. This script verifies every case of the given files with the
shipped policy's grounding config (A) and with ``--set`` overrides applied (B),
alternating A and B case by case so a loaded box slows both alike, each case's
context prepared first (as an inline policy gets it) and not timed; a case's time is
its least CPU time in ``--repeats`` tries. It prints, per round, the CPU per 100
answer words of A and B and their ratio.

    .venv/bin/python bench/grounding_cpu_cases.py --set name_variants=false \
        --source halueval-dialogue data/halueval/halueval-dev.jsonl data/halueval/halueval-tuning.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_layers_offline import verify_input  # noqa: E402
from fit_shape_powers import policy_config  # noqa: E402

from gateway.eval.cases import load_cases  # noqa: E402
from gateway.layers.base import LayerResources, VerifyInput  # noqa: E402
from gateway.layers.grounding import GroundingConfig, GroundingLayer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def cpu_per_case(layers: list[GroundingLayer], inputs: list[VerifyInput],
                 repeats: int) -> list[float]:
    """Per layer, the sum over ``inputs`` of each case's least CPU time of ``verify`` in
    ``repeats`` tries, the layers alternated case by case (contexts prepared, untimed)."""
    async def go() -> list[float]:
        totals = [0.0] * len(layers)
        gc.disable()
        try:
            for inp in inputs:
                assert inp.context is not None
                best = [float("inf")] * len(layers)
                for layer in layers:
                    layer.prepare(inp.context)
                for _ in range(repeats):
                    for i, layer in enumerate(layers):
                        t = time.process_time()
                        await layer.verify(inp)
                        best[i] = min(best[i], time.process_time() - t)
                totals = [a + b for a, b in zip(totals, best, strict=True)]
        finally:
            gc.enable()
        return totals

    return asyncio.run(go())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--policy", type=Path, default=REPO / "policies" / "grounding.yaml")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config of B (A is the policy's)")
    ap.add_argument("--source", help="only cases of this source")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3,
                    help="tries per case and configuration; the least CPU time counts")
    args = ap.parse_args(argv)
    base = policy_config(args.policy)
    other = dict(base)
    for item in args.set:
        key, _, value = item.partition("=")
        other[key] = value if value in ("true", "false") else float(value)
    cases = [c for f in args.files for c in load_cases(f)
             if args.source is None or c.source == args.source]
    inputs = [verify_input(c) for c in cases]
    words = sum(len(c.answer.split()) for c in cases)
    layers = [GroundingLayer(GroundingConfig.model_validate(cfg), LayerResources())
              for cfg in (base, other)]
    print(f"{len(cases)} cases, {words} answer words; B = A with {args.set}")
    for r in range(args.rounds):
        a, b = (1e5 * t / words for t in cpu_per_case(layers, inputs, args.repeats))
        print(f"round {r + 1}: A {a:.3f} ms / 100 answer words, B {b:.3f}, A/B {a / b:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
