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

``--schema`` sends each call's reply schema (the one beside its prompt, picked by the
call's marker) as ``response_format: {"type": "json_object", "schema": …}`` — what
llama.cpp's server turns into constrained decoding — through a minimal judge of this
script's own, to see what structured output does for these prompts before the
gateway's judge asks for it itself. Only the two claim layers' calls have a schema.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.eval.cases import Case, load_cases, to_messages  # noqa: E402
from gateway.eval.metrics import auroc, recall_at_fpr  # noqa: E402
from gateway.layers import _fact_decomposition_prompts as fd  # noqa: E402
from gateway.layers import _multi_source_prompts as ms  # noqa: E402
from gateway.layers.base import (  # noqa: E402
    Judge,
    JudgeError,
    JudgeReply,
    LayerResources,
    VerifyInput,
)
from gateway.layers.registry import resolve  # noqa: E402
from gateway.settings import JudgeConfig  # noqa: E402
from gateway.sources.context import ContextSpec, extract_context  # noqa: E402
from gateway.upstream.judge import OpenAIJudge  # noqa: E402

SCHEMAS = ((fd.MARK_DECOMPOSE, fd.DECOMPOSE_SCHEMA), (fd.MARK_CHECK, fd.CHECK_SCHEMA),
           (ms.MARK_SOURCE, ms.REPLY_SCHEMA), (ms.MARK_KNOWLEDGE, ms.REPLY_SCHEMA))


class SchemaJudge:
    """A bare OpenAI-compatible judge that asks for each call's reply schema."""

    def __init__(self, base_url: str, model: str, timeout: float) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.client = httpx.AsyncClient(timeout=timeout)

    async def complete(self, messages: Any, *, temperature: float = 0.0,
                       max_tokens: int = 512, n: int = 1, model: str | None = None,
                       override: str | None = None) -> JudgeReply:
        user = str(messages[-1].get("content", ""))
        body: dict[str, Any] = {"model": override or self.model, "messages": list(messages),
                                "temperature": temperature, "max_tokens": max_tokens}
        schema = next((s for mark, s in SCHEMAS if user.startswith(mark)), None)
        if schema is not None and not user.startswith(fd.MARK_DECOMPOSE):
            count = len(re.findall(r"^\d+\. ", user.split("Claims:")[-1], re.MULTILINE))
            schema = (fd.check_schema(count) if user.startswith(fd.MARK_CHECK)
                      else ms.reply_schema(count))
        if schema is not None:
            body["response_format"] = {"type": "json_object", "schema": schema}
        try:
            r = await self.client.post(self.url, json=body)
            r.raise_for_status()
            data = r.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise JudgeError(f"judge call failed ({type(exc).__name__})") from None
        return JudgeReply(texts=[str(c["message"].get("content") or "")
                                 for c in data.get("choices", [])], model=self.model)

    async def aclose(self) -> None:
        await self.client.aclose()


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
    ap.add_argument("--schema", action="store_true",
                    help="ask for each call's reply schema (response_format json_object)")
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
    judge: OpenAIJudge | SchemaJudge = (
        SchemaJudge(args.judge_url, args.judge_model, args.timeout) if args.schema else
        OpenAIJudge(JudgeConfig(model=args.judge_model, cache_size=0, timeout=args.timeout,
                                max_concurrency=1), args.judge_url, None))
    try:
        for name in args.layer:
            print(await run_layer(name, configs[name], cases, judge, args.judge_model),
                  flush=True)
    finally:
        await judge.aclose()


if __name__ == "__main__":
    asyncio.run(main())
