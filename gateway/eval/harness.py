"""Run labeled cases through a real gateway and collect what it decided.

For each case the scripted upstream answers with the case's ``model_output``
(selected by the ``x-scripted-reply-id`` header); the request carries the
context and question as ``gateway.eval.cases.to_messages`` builds them; the
official SDK sends it. The policy under test is loaded as given and then run
*for measurement*: inline, always selected, every action turned into ``flag`` so
the answer is never changed, candidates off. Scores come from the response
headers (``x-verity-score``, ``x-verity-verdict``, ``x-verity-layers``) and
per-layer latencies from the audit record of each request.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from gateway.eval.cases import Case, to_messages

__all__ = ["CaseResult", "measurement_policy", "run_cases"]

Progress = Callable[[int, int], None]


@dataclass(slots=True)
class CaseResult:
    case: Case
    score: float | None
    """The verdict score (higher = more trustworthy), full precision from the audit
    record; 1.0 when nothing was checkable ("n/a"); None when the gateway gave none."""
    verdict: str | None
    layers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """layer key -> {"score", "passed", "latency_ms", "credit_score", "judge_calls",
    "judge_input_tokens", "error"}."""
    error: str | None = None


def measurement_policy(path: Path) -> tuple[str, dict[str, Any]]:
    """Load and validate ``path``; return (name, the measurement variant as a dict)."""
    from gateway.policy.loader import load_policy_file
    from gateway.sources.corpus import resolve_corpus_dir

    policy = load_policy_file(path)
    data = policy.spec.model_dump(mode="json", by_alias=True)
    corpus_dir = policy.spec.context.corpus_dir
    if corpus_dir:  # the copy lives elsewhere: a relative path would point at nothing
        data["context"]["corpus_dir"] = str(resolve_corpus_dir(corpus_dir, path).resolve())
    data.update(name=policy.name, default=True, match={}, mode="inline", sample_rate=1.0,
                candidates=[], allow_header_selection=False,
                actions={"pass": {"type": "flag"}, "marginal": {"type": "flag"},
                         "fail": {"type": "flag"}})
    return policy.name, data


def _parse_layers(header: str | None) -> dict[str, dict[str, Any]]:
    """``grounding=0.9134:pass,claims=1.0000:pass`` -> {key: {score, passed}}."""
    out: dict[str, dict[str, Any]] = {}
    for item in (header or "").split(","):
        key, _, rest = item.strip().partition("=")
        if not key or not rest:
            continue
        value, _, status = rest.partition(":")
        try:
            score: float | None = float(value)
        except ValueError:
            score = None
        out[key] = {"score": score, "passed": status == "pass", "status": status}
    return out


def _read_audit(path: Path) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return records
    for line in path.read_bytes().splitlines():
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(rec, dict) and rec.get("audit_id"):
            records[str(rec["audit_id"])] = rec
    return records


async def _send_all(base_url: str, cases: Sequence[Case], concurrency: int,
                    progress: Progress | None, timeout: float = 60.0
                    ) -> list[tuple[Case, dict[str, str], str | None]]:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="eval", max_retries=0,
                                timeout=timeout)
    sem = asyncio.Semaphore(concurrency)
    done = 0
    out: list[tuple[Case, dict[str, str], str | None]] = [None] * len(cases)  # type: ignore[list-item]

    async def one(i: int, case: Case) -> None:
        nonlocal done
        async with sem:
            try:
                raw = await client.chat.completions.with_raw_response.create(
                    model="eval", messages=to_messages(case),  # type: ignore[arg-type]
                    extra_headers={"x-scripted-reply-id": case.id})
                out[i] = (case, {k.lower(): v for k, v in raw.headers.items()}, None)
            except openai.APIError as exc:
                out[i] = (case, {}, f"{type(exc).__name__}: {exc}")
        done += 1
        if progress:
            progress(done, len(cases))

    try:
        await asyncio.gather(*(one(i, c) for i, c in enumerate(cases)))
    finally:
        await client.close()
    return out


def run_cases(cases: Sequence[Case], policy_path: Path, *, concurrency: int = 8,
              progress: Progress | None = None, judge: dict[str, Any] | None = None,
              timeout: float = 60.0) -> tuple[str, list[CaseResult]]:
    """Serve a scripted upstream and a gateway on loopback, send every case, collect.
    ``judge``: the gateway's ``judge`` settings (a real judge for the model-based
    layers; without it the judge is the scripted upstream, which cannot judge).
    ``timeout``: seconds one case may take."""
    from gateway.app import create_app
    from gateway.settings import load_settings
    from gateway.testing.scripted import ScriptedUpstream
    from gateway.testing.servers import ServerThread

    name, policy = measurement_policy(policy_path)
    upstream = ScriptedUpstream(replies={c.id: c.answer for c in cases}, record=False)
    with tempfile.TemporaryDirectory(prefix="verity-eval-") as tmp:
        pdir = Path(tmp) / "policies"
        pdir.mkdir()
        (pdir / f"{name}.yaml").write_text(yaml.safe_dump(policy, sort_keys=False))
        audit = Path(tmp) / "audit.jsonl"
        with ServerThread(upstream) as up:
            overrides: dict[str, Any] = {
                "upstreams": [{"name": "scripted", "base_url": up.url + "/v1"}],
                "policies_dir": str(pdir), "reload_policies": False,
                "audit": {"path": str(audit)}}
            if judge:
                overrides["judge"] = judge
            settings = load_settings(environ={}, overrides=overrides)
            with ServerThread(create_app(settings)) as gw:
                sent = asyncio.run(_send_all(gw.url + "/v1", cases, concurrency, progress,
                                             timeout))
        records = _read_audit(audit)
    results = []
    for case, headers, error in sent:
        score_text = headers.get("x-verity-score")
        layers = _parse_layers(headers.get("x-verity-layers"))
        record = records.get(headers.get("x-verity-audit-id", ""))
        for layer in (record or {}).get("layers") or ():
            key = layer.get("key") or layer.get("name")
            if key:  # the audit record has full precision; headers carry two decimals
                entry = layers.setdefault(key, {})
                if layer.get("score") is not None:
                    entry["score"] = layer["score"]
                entry["latency_ms"] = layer.get("latency_ms")
                entry["credit_score"] = layer.get("credit_score")
                entry["judge_calls"] = layer.get("judge_calls") or 0
                entry["judge_input_tokens"] = layer.get("judge_input_tokens") or 0
                entry["error"] = layer.get("error") is not None
        score: float | None = None
        if record is not None and record.get("score") is not None:
            score = float(record["score"])
        elif score_text not in (None, "n/a"):
            score = float(score_text)
        elif score_text == "n/a":
            score = 1.0  # nothing was checkable (e.g. no context): no evidence of error
        if error is None and score_text is None:
            error = "the gateway returned no x-verity-score (policy not applied?)"
        results.append(CaseResult(case=case, score=score, verdict=headers.get("x-verity-verdict"),
                                  layers=layers, error=error))
    return name, results


def stderr_progress(done: int, total: int) -> None:
    """A progress bar on stderr (redrawn in place on a terminal, every 10% otherwise)."""
    tty = sys.stderr.isatty()
    step = max(1, total // 10)
    if not tty and done % step and done != total:
        return
    width = 30
    filled = width * done // max(total, 1)
    bar = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} cases"
    sys.stderr.write(("\r" + bar) if tty else (bar + "\n"))
    if tty and done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()
