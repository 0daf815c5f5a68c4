"""Generate synthetic audit records in the gateway's real record shape.

    .venv/bin/python bench/gen_audit.py --records 1000000 --out /tmp/audit.jsonl
    .venv/bin/python bench/gen_audit.py --records 1000000 --out /tmp/audit-dir --writers 4 \
        --rotate-mb 64 --weeks 6

Each record is built by the gateway's own :class:`gateway.verify.outcome.Outcome`,
:class:`LayerOutcome` and :class:`CandidateOutcome` and serialized with their
``to_dict()`` and ``orjson`` (what ``JsonlAuditSink`` writes), so a change of the
record shape shows up here too. The traffic is a made-up but plausible mix: six
policies (shadow and inline, model-free and judge-backed layers, regenerate attempts,
candidates), five models, seven tenants (and none), a few percent of records never
verified (shadow queue full, upstream stream cut), a content share for replay
research, timestamps spread evenly over ``--weeks`` weeks ending now, in time order.

``--out`` ending in ``.jsonl`` writes one file. Otherwise it is a directory laid out
as one writer per process and day, the layout proposed in docs/design/audit-store.md::

    OUT/date=2026-11-24/verity-<writer>-<seq>.jsonl

(``--writers`` processes writing side by side, each rotating to a new file when the
current one passes ``--rotate-mb`` or the day changes). Deterministic for a given
``--seed``. Bench-only: nothing in ``gateway/`` imports this.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import orjson

from gateway.verify.outcome import CandidateOutcome, LayerOutcome, Outcome

__all__ = ["POLICIES", "Generator", "main"]


@dataclass(frozen=True)
class LayerSpec:
    key: str
    name: str
    weight: float = 1.0
    median_ms: float = 1.0
    fail_rate: float = 0.05
    skip_rate: float = 0.0
    error_rate: float = 0.0
    judge_calls: int = 0
    cost: float = 0.0
    label_pass: str = "supported"
    label_fail: str = "unsupported"


@dataclass(frozen=True)
class PolicySpec:
    name: str
    mode: str
    share: float
    layers: tuple[LayerSpec, ...]
    candidates: tuple[str, ...] = ()
    actions: dict[str, str] = field(default_factory=lambda: {
        "pass": "pass", "marginal": "disclaimer", "fail": "block"})
    record_content: bool = False


GROUNDING = LayerSpec("grounding", "grounding", median_ms=1.4, fail_rate=0.06,
                      skip_rate=0.15)
CLAIMS = LayerSpec("claims", "claims", weight=0.0, median_ms=0.3, fail_rate=0.0,
                   label_pass="assertive", label_fail="assertive")
CITATIONS = LayerSpec("citations", "citations", median_ms=0.1, fail_rate=0.03,
                      skip_rate=0.7, label_pass="cited", label_fail="miscited")
CITATIONS_REQ = LayerSpec("citations-required", "citations", median_ms=0.1, fail_rate=0.12,
                          label_pass="cited", label_fail="uncited")
KEYWORD = LayerSpec("k1", "keyword", median_ms=0.05, fail_rate=0.01,
                    label_pass="clean", label_fail="blocked")
AUDIT = LayerSpec("audit", "audit", median_ms=2400.0, fail_rate=0.08, error_rate=0.01,
                  judge_calls=3, cost=0.0021, label_pass="GOOD", label_fail="BAD")
FACT_CHECK = LayerSpec("fact-check", "fact-check", median_ms=1700.0, fail_rate=0.07,
                       error_rate=0.015, judge_calls=5, cost=0.0034,
                       label_pass="VERIFIED", label_fail="CONTRADICTED")

POLICIES: tuple[PolicySpec, ...] = (
    PolicySpec("default", "shadow", 0.42, (GROUNDING, CLAIMS, CITATIONS),
               candidates=("grounding",)),
    PolicySpec("grounding", "inline", 0.20, (GROUNDING, CLAIMS, CITATIONS),
               candidates=("grounding-strict",)),
    PolicySpec("strict-rag", "inline", 0.10, (GROUNDING, CITATIONS, CLAIMS),
               actions={"pass": "pass", "marginal": "disclaimer", "fail": "regenerate"},
               record_content=True),
    PolicySpec("compliance", "inline", 0.10, (CLAIMS, GROUNDING, CITATIONS, CITATIONS_REQ)),
    PolicySpec("audit", "inline", 0.05, (AUDIT, FACT_CHECK)),
    PolicySpec("support-bot-with-a-rather-long-policy-name", "shadow", 0.13,
               (KEYWORD, GROUNDING), candidates=("support-bot-v2", "support-bot-v3-experimental"),
               record_content=True),
)
CANDIDATE_LAYERS: dict[str, tuple[LayerSpec, ...]] = {
    "grounding": (GROUNDING, CLAIMS, CITATIONS),
    "grounding-strict": (LayerSpec("grounding", "grounding", median_ms=1.4, fail_rate=0.11),),
    "support-bot-v2": (KEYWORD, GROUNDING, CITATIONS_REQ),
    "support-bot-v3-experimental": (AUDIT,),
}
MODELS = (("gpt-4o-mini", 0.40), ("gpt-4o", 0.25), ("claude-sonnet-4", 0.15),
          ("llama-3.1-70b-instruct", 0.15), ("smollm2-360m", 0.05))
TENANTS = (("team-a", 0.30), ("team-b", 0.20), ("support", 0.15), ("search", 0.10),
           ("legal", 0.05), ("eval-harness", 0.05), ("partner-acme", 0.05), (None, 0.10))
QUESTIONS = ("What is the refund window for annual plans?",
             "Summarise the attached contract's termination clause.",
             "When was the Eiffel Tower completed, and how tall is it?",
             "Which regions does the Pro tier run in?",
             "Give me three sources on the 2008 financial crisis.")
ANSWERS = ("Annual plans can be refunded within 30 days of purchase [1].",
           "Either party may terminate with 60 days' written notice (section 12.2).",
           "It was completed in 1889 and is about 330 metres tall.",
           "The Pro tier runs in eu-west-1, us-east-1 and ap-southeast-2.",
           "See [1] Smith 2010, [2] the FCIC report (2011) and [3] Lewis 2010.")


def _weighted(rng: random.Random, table: tuple[tuple[Any, float], ...]) -> Any:
    return rng.choices([v for v, _ in table], weights=[w for _, w in table])[0]


def _explanation(spec: LayerSpec, passed: bool, score: float) -> str:
    if spec.name == "grounding":
        n = 1 + int(score * 7) % 5
        bad = 0 if passed else 1 + n // 3
        return (f"{n + bad} sentence(s): {n} supported, {bad} unsupported, 0 contradicted by "
                f"the context; score {score:.2f} {'>=' if passed else '<'} threshold 0.93")
    if spec.name == "claims":
        return ("2 claim(s): 2 verifiable, 0 hedged, 0 opinion; types regulatory=0, "
                "quantitative=1, temporal=1, named_entity=1")
    if spec.name == "citations":
        return "answer cites no sources; nothing to check" if passed else \
            "1 of 2 citation(s) not backed by the cited source"
    if spec.name == "keyword":
        return "no rule matched" if passed else "blocked by block[1] (1 match)"
    return (f"credit score {int(score * 100)}; worst finding F1: "
            f"{'low' if passed else 'high'} factual")


class Generator:
    """Builds records one at a time (``record(ts)``), deterministic per seed."""

    def __init__(self, seed: int = 15, content_share: float = 0.3) -> None:
        self.rng = random.Random(seed)
        self.content_share = content_share
        self._policy_table = tuple((p, p.share) for p in POLICIES)
        self._versions = {p.name: f"{self.rng.getrandbits(64):016x}" for p in POLICIES}
        self._versions.update({c: f"{self.rng.getrandbits(64):016x}" for c in CANDIDATE_LAYERS})

    def _id(self) -> str:
        n = self.rng.getrandbits(128)
        return f"{(n & ~((0xF000 << 64) | (0xC000 << 48))) | (0x4000 << 64) | (0x8000 << 48):032x}"

    def _layer(self, spec: LayerSpec, bias: float) -> LayerOutcome:
        rng = self.rng
        latency = rng.lognormvariate(0.0, 0.6) * spec.median_ms
        if spec.error_rate and rng.random() < spec.error_rate:
            return LayerOutcome(spec.key, spec.name, latency_ms=min(latency * 4, 30000.0),
                                error="timeout", error_type="timeout", weight=spec.weight,
                                judge_calls=spec.judge_calls, cost=spec.cost / 2)
        if spec.skip_rate and rng.random() < spec.skip_rate:
            return LayerOutcome(spec.key, spec.name, score=0.5, raw_score=0.5, passed=True,
                                latency_ms=latency / 5, label="skipped", skipped=True,
                                explanation="nothing to check", weight=spec.weight)
        fails = rng.random() < spec.fail_rate * bias
        score = rng.uniform(0.0, 0.6) if fails else rng.uniform(0.85, 1.0)
        if spec.weight == 0:
            score, fails = rng.uniform(0.0, 0.4), False
        claims = [rng.choice(ANSWERS)] if fails else []
        return LayerOutcome(
            spec.key, spec.name, score=score, raw_score=min(1.0, score * 1.02),
            passed=not fails, latency_ms=latency,
            label=spec.label_fail if fails else spec.label_pass,
            explanation=_explanation(spec, not fails, score),
            cache_hit=bool(spec.judge_calls) and rng.random() < 0.2,
            judge_calls=spec.judge_calls, cost=spec.cost * rng.uniform(0.6, 1.4),
            failed_claims=claims, weight=spec.weight)

    def _verdict(self, layers: list[LayerOutcome]) -> tuple[str, float | None]:
        counted = [o for o in layers if o.counted]
        if not counted:
            return "pass", None
        score = sum(o.score or 0.0 for o in counted) / len(counted)
        if any(not o.passed for o in counted):
            return ("fail" if score < 0.7 else "marginal"), score
        return ("marginal" if score < 0.88 and self.rng.random() < 0.3 else "pass"), score

    def record(self, ts: datetime) -> dict[str, Any]:
        rng = self.rng
        policy: PolicySpec = _weighted(rng, self._policy_table)
        stream = rng.random() < 0.35
        out = Outcome(policy=policy.name, policy_version=self._versions[policy.name],
                      mode=policy.mode, model=_weighted(rng, MODELS),
                      tenant=_weighted(rng, TENANTS), stream=stream,
                      streaming=rng.choice(("buffer", "passthrough")) if stream else None,
                      audit_id=self._id())
        out.started_at = ts.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        out.response_id = f"chatcmpl-{rng.getrandbits(64):016x}"
        out.upstream_status = 200
        bias = 2.5 if out.model == "smollm2-360m" else 1.0
        unverified = rng.random() < 0.02
        if unverified:
            out.note = rng.choice(("not verified: shadow queue full",
                                   "not verified: the upstream stream was cut")) \
                if policy.mode == "shadow" else "not verified: the upstream stream was cut"
        else:
            layers = [self._layer(s, bias) for s in policy.layers]
            verdict, score = self._verdict(layers)
            out.risk_level = rng.choice(("low", "medium", "medium", "high"))
            out.verdict, out.score = verdict, score
            out.min_confidence = 0.925
            out.layers = layers
            out.action = policy.actions[verdict]
            out.applied = policy.mode == "inline"
            out.reasons = [f"{o.key}: {o.explanation}" for o in layers
                           if o.counted and not o.passed]
            out.failed_claims = [c for o in layers for c in o.failed_claims]
            if out.action == "regenerate":
                self._regenerate(out, verdict, score)
            for name in policy.candidates:
                out.candidates.append(self._candidate(name, bias))
            if policy.record_content and rng.random() < self.content_share:
                q, a = rng.choice(QUESTIONS), rng.choice(ANSWERS)
                out.content = {"messages": [
                    {"role": "system", "content": "<context>Plans: annual, monthly. "
                                                  "Refunds within 30 days.</context>"},
                    {"role": "user", "content": q}], "output": a}
                out.redact = str  # records content: failed claims are kept
        duration = sum(o.latency_ms for o in out.layers) + rng.uniform(0.2, 2.0)
        out.duration_ms = duration
        out.finished_at = (ts + timedelta(milliseconds=duration)).isoformat(
            timespec="milliseconds").replace("+00:00", "Z")
        return out.to_dict()

    def _regenerate(self, out: Outcome, verdict: str, score: float | None) -> None:
        rng = self.rng
        out.attempts = attempts = rng.choice((1, 1, 1, 2))
        history: list[dict[str, Any]] = [{"attempt": 0, "verdict": verdict, "score": score,
                                          "failed_claims": list(out.failed_claims)}]
        for n in range(1, attempts + 1):
            ok = n == attempts and rng.random() < 0.7
            history.append({"attempt": n, "model": out.model, "status": 200,
                            "verdict": "pass" if ok else "fail",
                            "score": rng.uniform(0.9, 1.0) if ok else rng.uniform(0.2, 0.6),
                            "failed_claims": [] if ok else [rng.choice(ANSWERS)],
                            **({"action": "pass"} if ok else {})})
        out.attempt_history = history
        if history[-1]["verdict"] != "pass":
            out.action = "block"
            out.note = f"regenerate failed after {attempts} attempt(s); fallback block"

    def _candidate(self, name: str, bias: float) -> CandidateOutcome:
        if self.rng.random() < 0.003:
            return CandidateOutcome(name, self._versions[name], error="dropped")
        layers = [self._layer(s, bias * 1.3) for s in CANDIDATE_LAYERS[name]]
        verdict, score = self._verdict(layers)
        action = {"pass": "pass", "marginal": "disclaimer", "fail": "block"}[verdict]
        return CandidateOutcome(name, self._versions[name], verdict=verdict, score=score,
                                action=action, layers=layers)


def _timestamps(n: int, weeks: float, end: datetime, rng: random.Random) -> list[datetime]:
    """``n`` sorted times over ``weeks`` weeks ending at ``end``, busier on weekdays."""
    span = timedelta(weeks=weeks).total_seconds()
    start = end - timedelta(weeks=weeks)
    out: list[float] = []
    while len(out) < n:
        t = rng.random() * span
        day = (start + timedelta(seconds=t)).weekday()
        if day < 5 or rng.random() < 0.4:
            out.append(t)
    out.sort()
    return [start + timedelta(seconds=t) for t in out]


class _Writer:
    """One writer process: rotates by size and day under ``root/date=YYYY-MM-DD/``."""

    def __init__(self, root: Path, name: str, rotate_bytes: int) -> None:
        self.root, self.name, self.rotate_bytes = root, name, rotate_bytes
        self.fh: IO[bytes] | None = None
        self.day = ""
        self.size = 0
        self.seq = 0
        self.files: list[Path] = []

    def write(self, day: str, line: bytes) -> None:
        if self.fh is None or day != self.day or self.size >= self.rotate_bytes:
            self.close()
            folder = self.root / f"date={day}"
            folder.mkdir(parents=True, exist_ok=True)
            self.seq += 1
            path = folder / f"verity-{self.name}-{self.seq:05d}.jsonl"
            self.fh, self.day, self.size = path.open("wb"), day, 0
            self.files.append(path)
        self.fh.write(line)
        self.size += len(line)

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def generate(records: int, out: Path, *, weeks: float = 4.0, writers: int = 1,
             rotate_mb: float = 64.0, seed: int = 15, content_share: float = 0.3,
             end: datetime | None = None) -> list[Path]:
    """Write ``records`` records to ``out`` (a ``.jsonl`` file or a directory)."""
    gen = Generator(seed, content_share)
    end = end or datetime.now(UTC).replace(microsecond=0)
    times = _timestamps(records, weeks, end, random.Random(seed + 1))
    if out.suffix == ".jsonl":
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("wb") as fh:
            for ts in times:
                fh.write(orjson.dumps(gen.record(ts)) + b"\n")
        return [out]
    pool = [_Writer(out, f"pod{i}", int(rotate_mb * 1024 * 1024)) for i in range(writers)]
    for i, ts in enumerate(times):
        pool[i % writers].write(ts.strftime("%Y-%m-%d"), orjson.dumps(gen.record(ts)) + b"\n")
    for w in pool:
        w.close()
    return [p for w in pool for p in w.files]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--out", type=Path, required=True,
                    help="a .jsonl file, or a directory (date=…/ folders of rotated files)")
    ap.add_argument("--weeks", type=float, default=4.0)
    ap.add_argument("--writers", type=int, default=4, help="processes writing side by side "
                    "(directory output only)")
    ap.add_argument("--rotate-mb", type=float, default=64.0)
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--content-share", type=float, default=0.3,
                    help="share of records of content-recording policies that carry content")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    files = generate(args.records, args.out, weeks=args.weeks, writers=args.writers,
                     rotate_mb=args.rotate_mb, seed=args.seed, content_share=args.content_share)
    size = sum(p.stat().st_size for p in files)
    print(f"{args.records} records, {len(files)} file(s), {size / 1e6:.1f} MB "
          f"({size / max(args.records, 1):.0f} B/record) in {time.perf_counter() - t0:.1f} s "
          f"-> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
