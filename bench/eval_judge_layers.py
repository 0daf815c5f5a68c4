"""Offline measurement of a judge layer against a real judge endpoint.

Runs a layer in-process over the first ``--per-source`` cases of each source of a
labeled JSONL set (the ``gateway eval`` case format; input built as in
``bench/eval_layers_offline.py``), calling the judge at ``--judge-url`` (any
OpenAI-compatible ``/v1``), and prints per layer: the share of cases with a parsed
result (no ``JudgeError`` / error), the share skipped, AUROC and recall at 5 % false
flags of ``1 - score`` (an error or a skip counts as the neutral 0.5, as fail-open
would), p50 latency and judge calls per case.

    .venv/bin/python bench/eval_judge_layers.py DATA.jsonl --judge-url http://127.0.0.1:8080/v1 \\
        --judge-model smollm2 --layer fact-decomposition --layer multi-source \\
        --set multi-source:second_model=smollm2 --per-source 10

The gateway's judge asks for each call's reply schema (structured output, with its
fallback chain: docs/layers.md, "Judge replies").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.eval.cases import Case, load_cases, to_messages  # noqa: E402
from gateway.eval.metrics import auroc, recall_at_fpr  # noqa: E402
from gateway.layers.base import (  # noqa: E402
    Judge,
    LayerResources,
    VerifyInput,
)
from gateway.layers.registry import resolve  # noqa: E402
from gateway.settings import JudgeConfig  # noqa: E402
from gateway.sources.context import ContextSpec, extract_context  # noqa: E402
from gateway.upstream.judge import OpenAIJudge  # noqa: E402


def sample(cases: list[Case], per_source: int) -> list[Case]:
    seen: Counter[str] = Counter()
    out = []
    for c in cases:
        if seen[c.source] < per_source:
            seen[c.source] += 1
            out.append(c)
    return out


async def run_layer(name: str, config: dict[str, Any], cases: list[Case],
                    judge: Judge, model: str) -> dict[str, Any]:
    cls = resolve(name)
    layer = cls(cls.Config.model_validate(config), LayerResources(judge=judge))
    scores, labels, latencies, calls = [], [], [], []
    errors: Counter[str] = Counter()
    parsed = skipped = 0
    for case in cases:
        messages = to_messages(case)
        inp = VerifyInput(messages=messages, response_text=case.answer, model=model,
                          context=extract_context(messages, ContextSpec()))
        t0 = time.perf_counter()
        try:
            result = await layer.verify(inp)
        except Exception as exc:  # JudgeError and the like: what fail-open would do
            errors[f"{type(exc).__name__}: {str(exc)[:60]}"] += 1
            scores.append(0.5)
        else:
            parsed += 1
            skipped += result.skipped
            calls.append(result.judge_calls)
            scores.append(0.5 if result.skipped else 1.0 - result.score)
        latencies.append((time.perf_counter() - t0) * 1000)
        labels.append(case.label == "hallucinated")
    return {"layer": name, "cases": len(cases), "parsed": parsed / len(cases),
            "skipped": skipped / len(cases), "auroc": auroc(scores, labels),
            "recall@5%": recall_at_fpr(scores, labels, 0.05),
            "p50_ms": statistics.median(latencies),
            "judge_calls": statistics.mean(calls) if calls else 0.0,
            "errors": dict(errors.most_common(3))}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data")
    ap.add_argument("--judge-url", required=True)
    ap.add_argument("--judge-model", required=True)
    ap.add_argument("--layer", action="append", required=True)
    ap.add_argument("--set", action="append", default=[],
                    help="LAYER:key=value (a JSON-ish value: numbers, true/false, text)")
    ap.add_argument("--per-source", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    configs: dict[str, dict[str, Any]] = {name: {} for name in args.layer}
    for item in args.set:
        target, _, pair = item.partition(":")
        key, _, raw = pair.partition("=")
        value: Any = {"true": True, "false": False}.get(raw, raw)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = float(raw) if "." in raw else int(raw)
        configs[target][key] = value
    cases = sample(load_cases(args.data), args.per_source)
    judge = OpenAIJudge(JudgeConfig(model=args.judge_model, cache_size=0,
                                    timeout=args.timeout, max_concurrency=1),
                        args.judge_url, None)
    try:
        for name in args.layer:
            print(await run_layer(name, configs[name], cases, judge, args.judge_model),
                  flush=True)
    finally:
        await judge.aclose()


if __name__ == "__main__":
    asyncio.run(main())
