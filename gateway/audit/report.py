"""Read the JSONL audit file and summarise it (``gateway audit …``).

The report answers the question a team asks before turning a shadow policy
inline: *what would it have done?* — verdicts and actions by policy and mode,
each layer's scores, latency and errors, and how often each candidate policy's
verdict differed from the live one.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

__all__ = ["iter_records", "summarize_records", "format_record_line", "render_report"]


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Records of an audit file, oldest first; a torn last line is skipped."""
    with path.open("rb") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                yield rec


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def summarize_records(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    total = 0
    outcomes: Counter[tuple[str, str, str | None, str | None]] = Counter()
    layer_scores: dict[str, list[float]] = defaultdict(list)
    layer_lat: dict[str, list[float]] = defaultdict(list)
    layer_fail: Counter[str] = Counter()
    layer_err: Counter[str] = Counter()
    cand_total: Counter[tuple[str, str]] = Counter()
    cand_diff: Counter[tuple[str, str]] = Counter()
    cand_verdicts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for rec in records:
        total += 1
        policy = str(rec.get("policy"))
        outcomes[(policy, str(rec.get("mode")), _opt_str(rec.get("verdict")),
                  _opt_str(rec.get("action")))] += 1
        for layer in rec.get("layers") or ():
            key = f"{policy}/{layer.get('key') or layer.get('name')}"
            if layer.get("error"):
                layer_err[key] += 1
            elif not layer.get("skipped"):
                if layer.get("score") is not None:
                    layer_scores[key].append(float(layer["score"]))
                if layer.get("passed") is False:
                    layer_fail[key] += 1
            if layer.get("latency_ms") is not None:
                layer_lat[key].append(float(layer["latency_ms"]))
        for cand in rec.get("candidates") or ():
            pair = (policy, str(cand.get("name")))
            cand_total[pair] += 1
            verdict = str(cand.get("verdict") or cand.get("error") or "none")
            cand_verdicts[pair][verdict] += 1
            if cand.get("verdict") != rec.get("verdict"):
                cand_diff[pair] += 1
    layers = {}
    for key in sorted(set(layer_scores) | set(layer_lat) | set(layer_err)):
        scores = layer_scores.get(key, [])
        layers[key] = {
            "n": len(scores), "mean_score": sum(scores) / len(scores) if scores else None,
            "failed": layer_fail[key], "errors": layer_err[key],
            "latency_ms_p50": _pct(layer_lat.get(key, []), 0.5),
            "latency_ms_p99": _pct(layer_lat.get(key, []), 0.99)}
    return {
        "records": total,
        # verdict and action are null (JSON) for a record that was never verified
        "outcomes": [{"policy": p, "mode": m, "verdict": v, "action": a, "count": n}
                     for (p, m, v, a), n in sorted(outcomes.items(), key=_outcome_order)],
        "layers": layers,
        "candidates": [{"policy": p, "candidate": c, "evaluated": n,
                        "verdict_differs": cand_diff[(p, c)],
                        "verdicts": dict(cand_verdicts[(p, c)])}
                       for (p, c), n in sorted(cand_total.items())],
    }


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _outcome_order(item: tuple[tuple[str, str, str | None, str | None], int]) -> tuple[Any, ...]:
    (p, m, v, a), _ = item  # None (not verified) sorts after every verdict / action
    return p, m, v is None, v or "", a is None, a or ""


NOT_VERIFIED = "not verified"
_NOTE_PREFIX = NOT_VERIFIED + ": "


def format_record_line(rec: dict[str, Any]) -> str:
    """One fixed-column line: time, audit id, policy/mode, verdict, score, action, layers.

    A record that was never verified (``verdict`` null: the upstream failed, the
    shadow queue dropped it, ...) shows ``not verified`` in the verdict column and
    the reason from its ``note`` in the action column.
    """
    layers = " ".join(
        f"{lay.get('key')}={'err' if lay.get('error') else 'skip' if lay.get('skipped') else format(lay.get('score') or 0.0, '.2f')}"
        for lay in rec.get("layers") or ())
    where = f"{rec.get('policy')}/{rec.get('mode')}"
    if rec.get("verdict") is None:
        note = str(rec.get("note") or "")
        reason = note[len(_NOTE_PREFIX):] if note.startswith(_NOTE_PREFIX) else note
        verdict, score_text = NOT_VERIFIED, ""
        action = "   " + format(f"({reason})" if reason else "", "<24")
    else:
        score = rec.get("score")
        verdict = str(rec.get("verdict"))
        score_text = "n/a" if score is None else f"{score:.2f}"
        applied = "" if rec.get("applied", True) else " (not applied)"
        action = "-> " + format(f"{rec.get('action')}{applied}", "<24")
    return (f"{str(rec.get('started_at') or '')[:19]:<19}  {rec.get('audit_id')}  "
            f"{where:<20}  {verdict:<12} {score_text:>4}  {action}  [{layers}]")


def _f(x: Any) -> str:
    return "—" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def render_report(summary: dict[str, Any]) -> str:
    out = [f"records: {summary['records']}", "", "verdicts and actions:"]
    out.append(f"  {'policy':<18}{'mode':<8}{'verdict':<14}{'action':<12}{'count':>7}")
    for row in summary["outcomes"]:
        verdict = NOT_VERIFIED if row["verdict"] is None else row["verdict"]
        out.append(f"  {row['policy']:<18}{row['mode']:<8}{verdict:<14}"
                   f"{_f(row['action']):<12}{row['count']:>7}")
    out += ["", "layers:",
            f"  {'policy/layer':<30}{'n':>6}{'mean':>8}{'failed':>8}{'errors':>8}"
            f"{'p50 ms':>9}{'p99 ms':>9}"]
    for key, v in summary["layers"].items():
        out.append(f"  {key:<30}{v['n']:>6}{_f(v['mean_score']):>8}{v['failed']:>8}"
                   f"{v['errors']:>8}{_f(v['latency_ms_p50']):>9}{_f(v['latency_ms_p99']):>9}")
    if summary["candidates"]:
        out += ["", "candidates (what another policy would have decided on the same answers):"]
        for row in summary["candidates"]:
            verdicts = ", ".join(f"{k} {n}" for k, n in sorted(row["verdicts"].items()))
            out.append(f"  {row['policy']} vs {row['candidate']}: {row['evaluated']} evaluated, "
                       f"verdict differs on {row['verdict_differs']} ({verdicts})")
    return "\n".join(out)
