"""``gateway eval CASES.jsonl [--policy FILE] [--json]``: measure a policy on labeled cases."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

__all__ = ["add_parser", "positive_int", "run"]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "eval", help="measure a policy on labeled cases through a real gateway",
        description="Send every case through a real gateway (a scripted upstream answers "
                    "with the case's model_output) and report AUROC, recall at <=5% false "
                    "flags, precision/recall at the policy's threshold, a length-only "
                    "baseline, zone confusion for 1-5 labels, caught/flagged shares per kind "
                    "when the cases name one, and per-layer latency.")
    p.add_argument("cases", type=Path,
                   help="JSONL cases, format in docs/evaluation.md (e.g. "
                        "data/halueval/halueval-dev.jsonl, tests/data/rag-dev.jsonl)")
    p.add_argument("--policy", type=Path, help="policy file (default: shipped grounding.yaml)")
    p.add_argument("--json", action="store_true", help="print one JSON summary on stdout")
    p.add_argument("--source", help="only cases with this source")
    p.add_argument("--limit", type=positive_int, metavar="N",
                   help="only the first N cases (N >= 1; default: all)")
    p.add_argument("--concurrency", type=positive_int, default=8, metavar="N",
                   help="cases in flight at once (default 8)")
    j = p.add_argument_group(
        "judge", "a real judge for the model-based layers (nli, self-consistency, "
        "semantic-entropy, audit, fact-check); without one they have none to call")
    j.add_argument("--judge-url", metavar="URL",
                   help="the judge endpoint's base URL, e.g. http://127.0.0.1:8000/v1")
    j.add_argument("--judge-model", metavar="NAME", help="the judge model name")
    j.add_argument("--judge-kind", choices=("openai", "anthropic"), default="openai",
                   help="the endpoint's API (default openai: any OpenAI-compatible server)")
    j.add_argument("--judge-key-env", metavar="VAR",
                   help="environment variable holding the judge endpoint's API key")
    j.add_argument("--judge-timeout", type=positive_int, default=60, metavar="S",
                   help="seconds per judge call (default 60); a case may take 4x this")
    p.set_defaults(func=run)


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer >= 1 (0 and negatives are usage errors)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from gateway.eval.cases import CaseError, load_cases
    from gateway.eval.harness import run_cases, stderr_progress
    from gateway.eval.report import render_text, summarize
    from gateway.policy.loader import PolicyError
    from gateway.settings import default_policies_dir

    policy = args.policy or default_policies_dir() / "grounding.yaml"
    try:
        cases = load_cases(args.cases, args.source)
    except (OSError, CaseError) as exc:
        print(f"gateway eval: {exc}", file=sys.stderr)
        return 2
    if args.limit is not None:
        cases = cases[: args.limit]
    if not cases:
        print("gateway eval: no cases", file=sys.stderr)
        return 2
    judge = None
    if args.judge_url:
        judge = {"base_url": args.judge_url, "kind": args.judge_kind,
                 "timeout": float(args.judge_timeout)}
        if args.judge_model:
            judge["model"] = args.judge_model
        if args.judge_key_env:
            judge["api_key_env"] = args.judge_key_env
    try:
        name, results = run_cases(cases, policy, concurrency=args.concurrency,
                                  progress=stderr_progress, judge=judge,
                                  timeout=max(60.0, 4.0 * args.judge_timeout))
    except (OSError, PolicyError) as exc:
        print(f"gateway eval: {exc}", file=sys.stderr)
        return 2
    summary = summarize(name, results)
    if args.json:
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(render_text(summary))
    return 0 if not any(r.error for r in results) else 1
