"""Probe a judge endpoint with the model-based layers' real prompts.

Runs the gateway's own judge layers (``nli``, ``self-consistency``,
``semantic-entropy``, ``audit``, ``fact-check``, resolved by name through the layer
registry) in-process on labelled cases, against any OpenAI-compatible endpoint,
through a judge that can change how each call is asked — so one run measures
what structured output buys with *this* server and *this* model:

- ``caps``: what the endpoint accepts for structured output (``response_format``
  ``json_schema`` / ``json_object`` + ``schema`` / ``json_object``, a forced tool
  call) — rejected (status), accepted but ignored, or enforced — and whether it
  honours ``n`` > 1; plus the context window when the server tells it.
- ``sizes``: every judge call's prompt length in tokens (the server's own count)
  for a typical QA case and the median and longest summarization case, today's
  prompt and the short one, and whether it leaves room for the reply.
- ``parse``: per layer and regime, how often the layer gets a usable reply
  (parsed / judge error / skipped), p50 latency, judge calls, the failure modes
  per call (HTTP errors, empty, cut at ``max_tokens``, not JSON, schema
  violations) and, on the parsed cases, an AUROC — a sanity check that parsed is
  not the same as useful (30 cases: a wide interval).

Regimes: ``today`` (the layers' prompts, no constraint), ``json_object`` (today's
prompts + ``{"type": "json_object"}``), ``schema`` (today's prompts + the reply
schema in the best mode ``caps`` found, see ``bench/judge_probe_kinds.py``),
``short`` (short prompts + minimal schemas + a small-model config, ``SHORT_CONFIG``),
``short-repair`` (``short`` + one repair retry quoting the parse error).

    .venv/bin/python bench/judge_probe.py caps --base-url http://127.0.0.1:8080/v1 --model m
    .venv/bin/python bench/judge_probe.py sizes --base-url URL --model M
    .venv/bin/python bench/judge_probe.py parse --base-url URL --model M --limit 30 \\
        --regimes today,schema,short --out /tmp/probe.jsonl

Semantic-entropy's samples (free text, no schema) are cached per case across the
regimes of one run, so the regimes differ only in the calls they change.
Findings and the design they feed: docs/design/judge-structured-output.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_probe_kinds import (  # noqa: E402
    classify,
    instance,
    schema_for,
    short_messages,
    validate,
)

from gateway.sources.context import ContextSpec, extract_context  # noqa: E402
from gateway.eval.metrics import auroc  # noqa: E402
from gateway.layers.base import JudgeError, JudgeReply, LayerResources, VerifyInput  # noqa: E402
from gateway.layers.registry import resolve  # noqa: E402

LAYERS = ("nli", "self-consistency", "semantic-entropy", "audit", "fact-check")
REGIMES = ("today", "json_object", "schema", "short", "short-repair")
SHORT_CONFIG: dict[str, dict[str, Any]] = {
    # Small-model profile: premise/context cut to fit a 2k window with room for the reply.
    "nli": {"max_premise_chars": 3500, "max_tokens": 320},
    "self-consistency": {"max_context_chars": 3500, "max_tokens": 192},
    "semantic-entropy": {"max_answer_chars": 400, "max_tokens": 256},
    "audit": {"max_context_chars": 3500, "max_tokens": 384},
    "fact-check": {"max_tokens": 320},
}
PROBE_VALUE = "verity-7f3a"
PROBE_SCHEMA = {"type": "object", "properties": {"probe": {"enum": [PROBE_VALUE]}},
                "required": ["probe"], "additionalProperties": False}
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def request_extra(mode: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The request fields that ask for ``schema`` in structured-output ``mode``."""
    if mode == "json_schema":
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": "verity_judge", "schema": schema, "strict": True}}}
    if mode == "json_object+schema":
        return {"response_format": {"type": "json_object", "schema": schema}}
    if mode == "json_object":
        return {"response_format": {"type": "json_object"}}
    if mode == "tools":
        return {"tools": [{"type": "function", "function": {
                    "name": "verdict", "description": "Record the verdict.",
                    "parameters": schema}}],
                "tool_choice": {"type": "function", "function": {"name": "verdict"}}}
    return {}


def extract_json(text: str) -> Any:
    """Lenient extraction (the recommended one): the whole text, else a fenced block,
    else the first balanced ``{…}`` / ``[…]`` that parses. Raises ``ValueError``."""
    candidates = [text.strip(), *(m.strip() for m in _FENCE.findall(text))]
    for c in candidates:
        try:
            return json.loads(c)
        except ValueError:
            pass
    for start, ch in enumerate(text):
        if ch not in "{[":
            continue
        depth, in_str, esc = 0, False, False
        for end in range(start, len(text)):
            c = text[end]
            if in_str:
                esc, in_str = (not esc and c == "\\"), (in_str if esc or c != '"' else False)
                continue
            if c == '"':
                in_str = True
            elif c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    try:
                        return json.loads(text[start:end + 1])
                    except ValueError:
                        break
    raise ValueError("no JSON value" if text.strip() else "empty reply")


class Endpoint:
    """One OpenAI-compatible endpoint; every request is recorded in ``self.log``."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout: float,
                 concurrency: int) -> None:
        self.base = base_url.rstrip("/")
        self.model = model
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.AsyncClient(timeout=timeout, headers=headers)
        self.sem = asyncio.Semaphore(concurrency)

    async def chat(self, messages: Sequence[Mapping[str, Any]], **fields: Any
                   ) -> tuple[int, dict[str, Any], float]:
        body = {"model": self.model, "messages": list(messages), **fields}
        async with self.sem:
            t0 = time.perf_counter()
            resp = await self.http.post(f"{self.base}/chat/completions", json=body)
            ms = (time.perf_counter() - t0) * 1000
        try:
            data = resp.json()
        except ValueError:
            data = {}
        return resp.status_code, data if isinstance(data, dict) else {}, ms

    async def count_tokens(self, messages: Sequence[Mapping[str, Any]]) -> tuple[int, bool]:
        """(prompt tokens, exact): the server's usage for a 1-token reply; when the
        prompt does not fit, a tokenizer endpoint's count of the joined contents."""
        status, data, _ = await self.chat(messages, max_tokens=1, temperature=0)
        usage = data.get("usage") or {}
        if status == 200 and isinstance(usage.get("prompt_tokens"), int):
            return usage["prompt_tokens"], True
        text = "\n".join(str(m.get("content", "")) for m in messages)
        root = self.base.removesuffix("/v1")
        for path, body, key in ((f"{root}/extras/tokenize/count", {"input": text}, "count"),
                                (f"{root}/tokenize", {"content": text}, "tokens")):
            try:
                r = await self.http.post(path, json=body)
            except httpx.HTTPError:
                continue
            if r.status_code == 200:
                value = r.json().get(key)
                return (len(value) if isinstance(value, list) else int(value)) \
                    + 5 * len(messages), False
        return len(text) // 4, False

    async def aclose(self) -> None:
        await self.http.aclose()


def _error(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``error`` object of an OpenAI-shaped error body ({} when there is none)."""
    err = data.get("error")
    return err if isinstance(err, dict) else {}


def reply_texts(data: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(texts, finish reasons) of a chat completion; a forced tool call's arguments
    count as its text."""
    texts, finishes = [], []
    for choice in data.get("choices") or ():
        msg = choice.get("message") or {}
        text = msg.get("content")
        calls = msg.get("tool_calls") or []
        if not text and calls:
            text = ((calls[0] or {}).get("function") or {}).get("arguments")
        texts.append(text if isinstance(text, str) else "")
        finishes.append(str(choice.get("finish_reason")))
    return texts, finishes


# -- caps ------------------------------------------------------------------------------

async def detect(ep: Endpoint) -> dict[str, Any]:
    """What the endpoint does with each structured-output request shape, and ``n``."""
    ask = [{"role": "user", "content": "Reply with a JSON object."}]
    out: dict[str, Any] = {"formats": {}}
    for mode in ("json_schema", "json_object+schema", "tools", "json_object"):
        status, data, ms = await ep.chat(ask, max_tokens=24, temperature=0,
                                         **request_extra(mode, PROBE_SCHEMA))
        row: dict[str, Any] = {"status": status, "ms": round(ms)}
        if status >= 400:
            err = _error(data)
            row["error"] = f"{err.get('type')}/{err.get('code')}: {str(err.get('message'))[:90]}"
        else:
            texts, _ = reply_texts(data)
            try:
                value = extract_json(texts[0] if texts else "")
            except ValueError:
                value = None
            row["json"] = value is not None
            row["enforced"] = (value == {"probe": PROBE_VALUE}) if mode != "json_object" \
                else isinstance(value, dict)
        out["formats"][mode] = row
    status, data, _ = await ep.chat([{"role": "user", "content": "Name a colour."}],
                                    max_tokens=8, temperature=1.0, n=3)
    out["n3_choices"] = len(data.get("choices") or ()) if status == 200 else f"HTTP {status}"
    out["n_ctx"] = await context_window(ep)
    return out


async def context_window(ep: Endpoint) -> int | None:
    """The context window if the server says (vLLM ``max_model_len``, llama-server
    ``/props``); llama-cpp-python does not."""
    root = ep.base.removesuffix("/v1")
    for url in (f"{ep.base}/models", f"{root}/props"):
        try:
            r = await ep.http.get(url)
            data = r.json() if r.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            continue
        for m in data.get("data") or ():
            if isinstance(m, dict) and isinstance(m.get("max_model_len"), int):
                return int(m["max_model_len"])
        n = (data.get("default_generation_settings") or {}).get("n_ctx")
        if isinstance(n, int):
            return n
    return None


def best_mode(caps: Mapping[str, Any]) -> str:
    fmts = caps["formats"]
    for mode in ("json_schema", "json_object+schema", "tools"):
        if fmts.get(mode, {}).get("enforced"):
            return mode
    return "none"


# -- the probing judge ---------------------------------------------------------------------

class ProbeJudge:
    """A :class:`gateway.verify.base.Judge` that asks per ``regime`` and records calls."""

    def __init__(self, ep: Endpoint, regime: str, mode: str, log: list[dict[str, Any]],
                 samples: dict[str, list[str]], keep_text: bool) -> None:
        self.ep, self.regime, self.mode, self.log = ep, regime, mode, log
        self.samples, self.keep_text = samples, keep_text
        self.case: dict[str, Any] = {}
        self.layer = ""

    async def complete(self, messages: Sequence[Mapping[str, Any]], *,
                       temperature: float = 0.0, max_tokens: int = 512, n: int = 1,
                       model: str | None = None, override: str | None = None) -> JudgeReply:
        call = classify(messages)
        msgs: list[Mapping[str, Any]] = list(messages)
        schema = None
        rewritten = None
        if call.kind == "se-sample":
            key = f"{self.case.get('id')}|{json.dumps(msgs)}|{temperature}|{max_tokens}"
            if key in self.samples:
                return JudgeReply(texts=list(self.samples[key][:n]), model=self.ep.model)
        elif self.regime.startswith("short"):
            rewritten = short_messages(call, messages, self.case.get("question", ""))
            msgs = list(rewritten or msgs)
            schema = schema_for(call, "minimal")
        elif self.regime in ("schema", "json_object"):
            schema = schema_for(call, "full")
        expect = schema or schema_for(call, "full")
        extra = (request_extra("json_object", {}) if self.regime == "json_object" else
                 request_extra(self.mode, schema) if schema else {})
        texts: list[str] = []
        tokens = [0, 0]
        want = n
        while len(texts) < n:
            got, error = await self._post(call.kind, msgs, temperature, max_tokens, want, extra,
                                          expect, tokens, rewritten is not None)
            if error is not None and self.regime == "short-repair" and call.kind != "se-sample":
                repair = [*msgs, {"role": "user", "content": (
                    f"Your reply could not be used: {error}. Reply again with JSON only, "
                    "exactly in the format asked above.")}]
                got, error = await self._post(call.kind, repair, temperature, max_tokens, 1,
                                              extra, expect, tokens, True, repair=True)
            if not got:
                raise JudgeError("judge reply has no choices")
            texts += got
            want = 1  # servers that ignore `n`: ask for the rest one at a time
        if call.kind == "se-sample":
            self.samples[f"{self.case.get('id')}|{json.dumps(list(messages))}|{temperature}|"
                         f"{max_tokens}"] = list(texts)
        return JudgeReply(texts=texts[:n], input_tokens=tokens[0], output_tokens=tokens[1],
                          model=self.ep.model)

    async def _post(self, kind: str, msgs: Sequence[Mapping[str, Any]], temperature: float,
                    max_tokens: int, n: int, extra: Mapping[str, Any],
                    expect: Mapping[str, Any] | None, tokens: list[int], rewritten: bool,
                    repair: bool = False) -> tuple[list[str], str | None]:
        fields: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, **extra}
        if n > 1:
            fields["n"] = n
        try:
            status, data, ms = await self.ep.chat(msgs, **fields)
        except httpx.HTTPError as exc:
            self._record(kind, {"status": 0, "error": type(exc).__name__}, repair)
            raise JudgeError(f"judge request failed: {type(exc).__name__}") from exc
        usage = data.get("usage") or {}
        row: dict[str, Any] = {"status": status, "ms": round(ms, 1), "n_asked": n,
                               "prompt_tokens": usage.get("prompt_tokens"),
                               "completion_tokens": usage.get("completion_tokens"),
                               "rewritten": rewritten}
        if status >= 400:
            err = _error(data)
            row["error"] = str(err.get("code") or err.get("type") or status)
            self._record(kind, row, repair)
            raise JudgeError(f"judge answered HTTP {status}")
        tokens[0] += usage.get("prompt_tokens") or 0
        tokens[1] += usage.get("completion_tokens") or 0
        texts, finishes = reply_texts(data)
        row |= {"choices": len(texts), "finish": finishes[0] if finishes else None,
                "chars": len(texts[0]) if texts else 0}
        problem = None
        if kind != "se-sample" and texts:
            try:
                value = extract_json(texts[0])
                row["json"] = True
                bad = validate(value, expect) if expect else []
                row["violations"] = sorted({v.split(": ", 1)[1] for v in bad})
                # out-of-range numbers are clamped by the layers: not worth a retry
                serious = [v for v in bad if not v.endswith(": bounds")]
                problem = f"it does not follow the format ({serious[0]})" if serious else None
            except ValueError as exc:
                row["json"] = False
                problem = f"it is not JSON ({exc})"
        if self.keep_text:
            row["text"] = texts[0] if texts else ""
        self._record(kind, row, repair)
        return texts, problem

    def _record(self, kind: str, row: dict[str, Any], repair: bool) -> None:
        self.log.append({"type": "call", "regime": self.regime, "case": self.case.get("id"),
                         "layer": self.layer, "kind": kind, "repair": repair, **row})


# -- cases, layers ------------------------------------------------------------------------

def load_cases(path: str, limit: int) -> list[dict[str, Any]]:
    """``limit`` cases, both answers of each row, sources taken in turn (file order)."""
    by_source: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                by_source[row["source"]].append(row)
    queues = [list(v) for v in by_source.values()]
    out: list[dict[str, Any]] = []
    while len(out) < limit and any(queues):
        for q in queues:
            take, q[:] = q[:2], q[2:]
            out += take[: limit - len(out)]
    return out


def verify_input(case: Mapping[str, Any], model: str) -> VerifyInput:
    messages = [{"role": "system", "content": case["context_input"]},
                {"role": "user", "content": case["question"]}]
    return VerifyInput(messages=messages, response_text=case["model_output"],
                       context=extract_context(messages, ContextSpec()), model=model)


def build_layer(name: str, regime: str, judge: Any, overrides: Mapping[str, Any]) -> Any:
    cls: Any = resolve(name)  # a layer class: (config, resources) constructor
    config = dict(SHORT_CONFIG.get(name, {})) if regime.startswith("short") else {}
    config |= overrides.get(name, {})
    return cls(cls.Config(**config), LayerResources(judge=judge))


def parse_sets(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for item in items:
        key, _, raw = item.partition("=")
        layer, _, field = key.partition(".")
        out[layer][field] = json.loads(raw) if raw[:1] in "0123456789-[{tf" else raw
    return out


# -- parse ------------------------------------------------------------------------------

async def run_parse(args: argparse.Namespace, ep: Endpoint) -> list[dict[str, Any]]:
    caps = await detect(ep)
    mode = args.mode or best_mode(caps)
    print(f"# structured output mode: {mode}; n=3 -> {caps['n3_choices']} choice(s); "
          f"context window: {caps['n_ctx'] or 'not reported'}", flush=True)
    cases = load_cases(args.cases, args.limit)
    print(f"# {len(cases)} cases from {Path(args.cases).name}; load average at start: "
          f"{os.getloadavg()[0]:.1f} (latencies are this box's, under its load)", flush=True)
    layers = args.layers.split(",")
    log: list[dict[str, Any]] = []
    samples: dict[str, list[str]] = {}
    overrides = parse_sets(args.set)
    out = open(args.out, "w", encoding="utf-8") if args.out else None  # noqa: SIM115
    for regime in args.regimes.split(","):
        judge = ProbeJudge(ep, regime, mode, log, samples, args.record_text)
        for i, case in enumerate(cases, 1):
            judge.case = {"id": case["id"], "question": case["question"]}
            inp = verify_input(case, ep.model)
            for name in layers:
                judge.layer = name
                layer = build_layer(name, regime, judge, overrides)
                start = len(log)
                t0 = time.perf_counter()
                row: dict[str, Any] = {"type": "layer", "regime": regime, "case": case["id"],
                                       "source": case["source"], "label": case["label"],
                                       "layer": name}
                try:
                    res = await layer.verify(inp)
                    row |= {"outcome": "skipped" if res.skipped else "parsed",
                            "score": res.score, "passed": res.passed, "label_out": res.label}
                except JudgeError as exc:
                    row |= {"outcome": "error", "error": re.sub(r"\d+", "N", str(exc))}
                row |= {"ms": round((time.perf_counter() - t0) * 1000),
                        "calls": len(log) - start}
                log.append(row)
                if out:
                    for rec in log[start:]:
                        out.write(json.dumps(rec) + "\n")
                    out.flush()
            print(f"# {regime}: case {i}/{len(cases)} done", file=sys.stderr, flush=True)
    if out:
        out.close()
    print(f"# load average at end: {os.getloadavg()[0]:.1f}", flush=True)
    return log


def _p50(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.0f}" if values else "-"


def _auroc(parsed: Sequence[Mapping[str, Any]]) -> str:
    """AUROC of suspicion (1 − score) for hallucinated answers, on the parsed cases."""
    try:
        value = auroc([1 - r["score"] for r in parsed],
                      [r["label"] == "hallucinated" for r in parsed])
    except ValueError:
        return "-"
    return f"{value:.2f} (n={len(parsed)})"


def _passed(parsed: Sequence[Mapping[str, Any]]) -> str:
    """How many parsed faithful / hallucinated answers the layer passed: a judge that
    passes (or fails) everything parses fine and tells nothing."""
    out = []
    for label in ("faithful", "hallucinated"):
        mine = [r for r in parsed if r["label"] == label]
        out.append(f"{sum(1 for r in mine if r['passed'])}/{len(mine)}")
    return " / ".join(out)


def report(log: Sequence[Mapping[str, Any]]) -> str:
    lines = ["| layer | regime | cases | parsed | judge error | skipped | parse rate | "
             "calls/case | p50 call ms | p50 layer ms | AUROC (parsed) | passed: faithful / "
             "hallucinated | top error |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    layers = [r for r in log if r["type"] == "layer"]
    calls = [r for r in log if r["type"] == "call"]
    for (layer, regime) in dict.fromkeys((r["layer"], r["regime"]) for r in layers):
        rows = [r for r in layers if r["layer"] == layer and r["regime"] == regime]
        c = Counter(r["outcome"] for r in rows)
        tried = c["parsed"] + c["error"]
        mine = [k for k in calls if k["layer"] == layer and k["regime"] == regime]
        parsed = [r for r in rows if r["outcome"] == "parsed"]
        auc = _auroc(parsed)
        top = Counter(r["error"] for r in rows if r["outcome"] == "error").most_common(1)
        lines.append(
            f"| {layer} | {regime} | {len(rows)} | {c['parsed']} | {c['error']} | {c['skipped']} "
            f"| {c['parsed'] / tried:.0%} | {len(mine) / len(rows):.1f} | "
            f"{_p50([k['ms'] for k in mine if 'ms' in k])} | {_p50([r['ms'] for r in rows])} | "
            f"{auc} | {_passed(parsed)} | {f'{top[0][0]} ({top[0][1]})' if top else ''} |"
            if tried else f"| {layer} | {regime} | {len(rows)} | 0 | 0 | {c['skipped']} | - | "
            f"{len(mine) / len(rows):.1f} | - | {_p50([r['ms'] for r in rows])} | - | - | |")
    lines += ["", "| call | regime | calls | HTTP error | empty | cut at max_tokens | JSON | "
              "schema-valid | violations | p50 ms | p50 prompt tok | p50 reply tok |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (kind, regime) in dict.fromkeys((k["kind"], k["regime"]) for k in calls):
        ks = [k for k in calls if k["kind"] == kind and k["regime"] == regime]
        ok = [k for k in ks if k.get("status") == 200]
        viol = Counter(v for k in ok for v in k.get("violations", ()))
        js = [k for k in ok if "json" in k]
        lines.append(
            f"| {kind} | {regime} | {len(ks)} | {len(ks) - len(ok)} "
            f"{dict(Counter(k.get('error') for k in ks if k.get('status') != 200)) or ''} | "
            f"{sum(1 for k in ok if not k.get('chars'))} | "
            f"{sum(1 for k in ok if k.get('finish') == 'length')} | "
            f"{sum(1 for k in js if k['json'])}/{len(js)} | "
            f"{sum(1 for k in js if k['json'] and not k.get('violations'))}/{len(js)} | "
            f"{', '.join(f'{v} {n}' for v, n in viol.most_common(3))} | "
            f"{_p50([k['ms'] for k in ok])} | {_p50([k['prompt_tokens'] for k in ok if k.get('prompt_tokens')])} | "
            f"{_p50([k['completion_tokens'] for k in ok if k.get('completion_tokens')])} |")
    return "\n".join(lines)


# -- sizes ------------------------------------------------------------------------------

class CaptureJudge:
    """Answers every call with the smallest schema-valid reply, recording its prompt,
    so every phase of every layer runs without a model."""

    def __init__(self, profile: str = "full") -> None:
        self.prompts: list[list[Mapping[str, Any]]] = []
        self.profile = profile

    async def complete(self, messages: Sequence[Mapping[str, Any]], *, temperature: float = 0.0,
                       max_tokens: int = 512, n: int = 1, model: str | None = None,
                       override: str | None = None) -> JudgeReply:
        self.prompts.append(list(messages))
        schema = schema_for(classify(messages), self.profile)
        if schema is None:
            return JudgeReply(texts=[f"Sample answer number {i}." for i in range(n)])
        return JudgeReply(texts=[json.dumps(instance(schema))] * n)


async def run_sizes(args: argparse.Namespace, ep: Endpoint) -> str:
    with open(args.cases, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    # hallucinated answers: full sentences, so every layer has claims to check
    rows = [r for r in rows if r["label"] == "hallucinated"]
    qa = sorted((r for r in rows if r["source"].endswith("qa")),
                key=lambda r: len(r["context_input"]))
    summ = sorted((r for r in rows if r["source"].endswith("summarization")),
                  key=lambda r: len(r["context_input"]))
    picks = [("qa median", qa[len(qa) // 2]), ("summ median", summ[len(summ) // 2]),
             ("summ longest", summ[-1])]
    n_ctx = args.n_ctx or await context_window(ep) or 2048
    lines = [f"context window used for 'fits': {n_ctx} tokens",
             "| case (context chars) | layer | call | today: prompt tok | short: prompt tok | "
             "reply budget | reply need | fits today | fits short |", "|---|---|---|---|---|---|---|---|---|"]
    overrides = parse_sets(args.set)
    for label, case in picks:
        for name in args.layers.split(","):
            capture = CaptureJudge()
            await build_layer(name, "today", capture, overrides).verify(verify_input(case, ep.model))
            short_capture = CaptureJudge()
            await build_layer(name, "short", short_capture, overrides).verify(
                verify_input(case, ep.model))
            cfg_today = build_layer(name, "today", None, overrides).config
            cfg_short = build_layer(name, "short", None, overrides).config
            for today_msgs, short_src in zip(capture.prompts, short_capture.prompts, strict=False):
                call = classify(today_msgs)
                short_msgs = short_messages(classify(short_src), short_src, case["question"]) \
                    or short_src
                t_today, exact_t = await ep.count_tokens(today_msgs)
                t_short, exact_s = await ep.count_tokens(short_msgs)
                budget_t = getattr(cfg_today, "sample_tokens" if call.kind == "se-sample"
                                   else "max_tokens", 0)
                budget_s = getattr(cfg_short, "sample_tokens" if call.kind == "se-sample"
                                   else "max_tokens", 0)
                need = await reply_need(ep, call)
                lines.append(
                    f"| {label} ({len(case['context_input'])}) | {name} | {call.kind} | "
                    f"{'' if exact_t else '~'}{t_today} | {'' if exact_s else '~'}{t_short} | "
                    f"{budget_t} / {budget_s} | {need} | "
                    f"{'yes' if t_today + need <= n_ctx else 'NO'} | "
                    f"{'yes' if t_short + need <= n_ctx else 'NO'} |")
    return "\n".join(lines)


async def reply_need(ep: Endpoint, call: Any) -> int:
    """Tokens of a realistic full reply: the schema's instance with 12-word strings."""
    schema = schema_for(call, "full")
    if schema is None:
        return 128
    text = json.dumps(instance(schema)).replace(
        "The answer states this.", " ".join(["word"] * 12))
    count, _ = await ep.count_tokens([{"role": "assistant", "content": text}])
    return max(count - 10, 1)


async def amain(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("caps", "sizes", "parse"))
    ap.add_argument("--base-url", required=True, help="OpenAI-compatible base URL (…/v1)")
    ap.add_argument("--model", required=True)
    ap.add_argument("--api-key-env", help="environment variable holding the API key")
    ap.add_argument("--cases", default=str(Path(__file__).resolve().parents[1]
                                           / "data/halueval/halueval-dev.jsonl"))
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--layers", default=",".join(LAYERS))
    ap.add_argument("--regimes", default="today,schema,short")
    ap.add_argument("--mode", choices=("json_schema", "json_object+schema", "tools", "none"),
                    help="structured-output mode for the schema regimes (default: caps' best)")
    ap.add_argument("--set", action="append", default=[], metavar="LAYER.KEY=VALUE",
                    help="layer config override, e.g. nli.max_tokens=256 (repeatable)")
    ap.add_argument("--n-ctx", type=int, help="context window for 'sizes' (default: asked)")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--out", help="write every call and layer outcome here (JSONL)")
    ap.add_argument("--record-text", action="store_true",
                    help="keep the judge's reply texts in --out (off: lengths only)")
    args = ap.parse_args(argv)
    for regime in args.regimes.split(","):
        if regime not in REGIMES:
            ap.error(f"unknown regime {regime!r} (known: {', '.join(REGIMES)})")
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    ep = Endpoint(args.base_url, args.model, key, args.timeout, args.concurrency)
    try:
        if args.command == "caps":
            print(json.dumps(await detect(ep), indent=2))
        elif args.command == "sizes":
            print(await run_sizes(args, ep))
        else:
            print(report(await run_parse(args, ep)))
    finally:
        await ep.aclose()


if __name__ == "__main__":
    asyncio.run(amain())
