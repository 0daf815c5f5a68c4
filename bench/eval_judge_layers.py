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
import json
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
    """The first ``per_source`` cases of each source, taken two at a time from each
    source in turn (a HaluEval row's faithful and hallucinated answers are
    consecutive), so that a run stopped early has covered every source alike."""
    by_source: dict[str, list[Case]] = {}
    for c in cases:
        group = by_source.setdefault(c.source, [])
        if len(group) < per_source:
            group.append(c)
    out = []
    for start in range(0, per_source, 2):
        for group in by_source.values():
            out.extend(group[start:start + 2])
    return out


async def run_layer(name: str, config: dict[str, Any], cases: list[Case],
                    judge: Judge, model: str, out: Any = None,
                    done: dict[str, set[str]] | None = None) -> dict[str, Any]:
    done = done or {}
    cls = resolve(name)
    layer = cls(cls.Config.model_validate(config), LayerResources(judge=judge))
    scores, labels, latencies, calls = [], [], [], []
    errors: Counter[str] = Counter()
    parsed = skipped = 0
    for case in cases:
        if case.id in done.get(name, ()):
            continue
        messages = to_messages(case)
        inp = VerifyInput(messages=messages, response_text=case.answer, model=model,
                          context=extract_context(messages, ContextSpec()))
        t0 = time.perf_counter()
        row: dict[str, Any] = {"layer": name, "id": case.id, "source": case.source,
                               "label": case.label}
        try:
            result = await layer.verify(inp)
        except Exception as exc:  # JudgeError and the like: what fail-open would do
            errors[f"{type(exc).__name__}: {str(exc)[:60]}"] += 1
            scores.append(0.5)
            row["error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
        else:
            parsed += 1
            skipped += result.skipped
            calls.append(result.judge_calls)
            scores.append(0.5 if result.skipped else 1.0 - result.score)
            row |= {"skipped": result.skipped, "judge_calls": result.judge_calls,
                    "repairs": result.details.get("judge_repairs", 0),
                    "salvaged": result.details.get("judge_salvaged", 0)}
        latencies.append((time.perf_counter() - t0) * 1000)
        labels.append(case.label == "hallucinated")
        if out is not None:  # one line per case: a run stopped early still counts
            row |= {"flag_score": scores[-1], "ms": round(latencies[-1])}
            out.write(json.dumps(row) + "\n")
            out.flush()
    n = len(scores)  # the cases run now (a resumed run skips those already written)
    if n == 0 or len(set(labels)) < 2:
        return {"layer": name, "cases": n, "parsed": parsed / max(n, 1)}
    return {"layer": name, "cases": n, "parsed": parsed / n,
            "skipped": skipped / n, "auroc": auroc(scores, labels),
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
    ap.add_argument("--source", action="append", default=[],
                    help="only these sources (e.g. halueval-dialogue); default all")
    ap.add_argument("--out", help="append one JSON line per case to this file (cases "
                    "already in it are skipped: a stopped run resumes; the printed summary "
                    "then covers the new cases only, bench/judge_runs_table.py all)")
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
    cases = sample([c for c in load_cases(args.data)
                    if not args.source or c.source in args.source], args.per_source)
    judge = OpenAIJudge(JudgeConfig(model=args.judge_model, cache_size=0,
                                    timeout=args.timeout, max_concurrency=1),
                        args.judge_url, None)
    done: dict[str, set[str]] = {}  # --out lines already written: a resumed run skips them
    if args.out and Path(args.out).exists():
        for line in Path(args.out).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            done.setdefault(row["layer"], set()).add(row["id"])
    out = open(args.out, "a") if args.out else None  # noqa: SIM115
    try:
        for name in args.layer:
            print(await run_layer(name, configs[name], cases, judge, args.judge_model, out,
                                  done),
                  flush=True)
    finally:
        await judge.aclose()
        if out is not None:
            out.close()


if __name__ == "__main__":
    asyncio.run(main())
