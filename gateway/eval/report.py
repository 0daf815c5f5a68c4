"""Turn per-case results into the evaluation summary and its text rendering.

Detector convention (``gateway.eval.metrics``): higher = more suspicious, so the
gateway's verdict score ``s`` (higher = more trustworthy) enters as ``1 - s``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from gateway.eval.harness import CaseResult
from gateway.eval.metrics import auroc, confusion_at, matched_auroc, recall_at_fpr

__all__ = ["render_text", "summarize"]

MAX_FPR = 0.05


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[k]


def _nan_to_none(x: float) -> float | None:
    return None if isinstance(x, float) and math.isnan(x) else x


def _block(results: Sequence[CaseResult]) -> dict[str, Any]:
    scored = [r for r in results if r.score is not None]
    labels = [r.case.hallucinated for r in scored]
    det = [1.0 - float(r.score) for r in scored]  # type: ignore[arg-type]
    lengths = [float(len(r.case.answer)) for r in scored]
    out: dict[str, Any] = {"cases": len(results), "scored": len(scored),
                           "errors": len(results) - len(scored)}
    both = len(set(labels)) == 2
    out["auroc"] = auroc(det, labels) if both else None
    out["recall_at_5pct_fpr"] = recall_at_fpr(det, labels, MAX_FPR) if both else None
    if both:
        m, pairs = matched_auroc(det, labels, lengths)
        out["length_matched_auroc"] = _nan_to_none(m)
        out["length_matched_pairs"] = pairs
    flagged = [1.0 if r.verdict not in (None, "pass") else 0.0 for r in scored]
    c = confusion_at(flagged, labels, 0.5)
    out["at_policy_threshold"] = {"precision": c.precision, "recall": c.recall,
                                  "false_flag_rate": c.fpr, "flagged": c.tp + c.fp}
    out["length_baseline"] = {
        "auroc": auroc(lengths, labels) if both else None,
        "recall_at_5pct_fpr": recall_at_fpr(lengths, labels, MAX_FPR) if both else None,
    }
    per_layer: dict[str, dict[str, Any]] = {}
    keys = sorted({k for r in scored for k in r.layers})
    for key in keys:
        rows = [(r, r.layers[key]) for r in scored if key in r.layers]
        lat = [float(v["latency_ms"]) for _, v in rows if v.get("latency_ms") is not None]
        sc = [(1.0 - float(v["score"]), r.case.hallucinated) for r, v in rows
              if v.get("score") is not None]
        entry: dict[str, Any] = {"latency_ms_p50": _pct(lat, 0.5), "latency_ms_p99": _pct(lat, 0.99)}
        calls = [float(v.get("judge_calls") or 0) for _, v in rows]
        if any(calls):
            entry["judge_calls_per_request"] = sum(calls) / len(calls)
            per_call = [float(v.get("judge_input_tokens") or 0) / c
                        for (_, v), c in zip(rows, calls, strict=True) if c]
            if any(per_call):  # a case's mean prompt size per call (the judge's usage)
                entry["judge_input_tokens_per_call_p50"] = _pct(per_call, 0.5)
                entry["judge_input_tokens_per_call_max"] = max(per_call)
        failed = sum(1 for _, v in rows if v.get("error") or v.get("status") == "error")
        entry["error_rate"] = failed / len(rows) if rows else None
        if len({y for _, y in sc}) == 2:
            entry["auroc"] = auroc([s for s, _ in sc], [y for _, y in sc])
            entry["recall_at_5pct_fpr"] = recall_at_fpr([s for s, _ in sc],
                                                        [y for _, y in sc], MAX_FPR)
        per_layer[key] = entry
    out["layers"] = per_layer
    zones = _zones(scored)
    if zones is not None:
        out["zones"] = zones
    return out


def _zones(results: Sequence[CaseResult]) -> dict[str, Any] | None:
    """Seed 002 zone confusion when cases carry an expected 1–5 credit score."""
    from gateway.scoring.credit import zone as zone_of

    pairs = []
    band_zone = {"pass": "GOOD", "marginal": "MID", "fail": "BAD"}
    for r in results:
        expected = getattr(r.case, "expected_credit_score", None)
        if expected is None:
            continue
        credit = next((v.get("credit_score") for v in r.layers.values()
                       if v.get("credit_score") is not None), None)
        actual = zone_of(int(credit)) if credit is not None else band_zone.get(r.verdict or "")
        if actual is None:
            continue
        pairs.append((zone_of(int(expected)), actual))
    if not pairs:
        return None
    names = ["BAD", "MID", "GOOD"]
    matrix = {e: {a: 0 for a in names} for e in names}
    for e, a in pairs:
        matrix[str(e)][str(a)] += 1
    cross = matrix["BAD"]["GOOD"] + matrix["GOOD"]["BAD"]
    return {"matrix": matrix, "cross_band_rate": cross / len(pairs),
            "zone_accuracy": sum(matrix[z][z] for z in names) / len(pairs), "n": len(pairs)}


def _share(hits: int, n: int) -> float | None:
    return hits / n if n else None


def _kind_block(results: Sequence[CaseResult]) -> dict[str, Any]:
    """At the policy's own threshold: wrong answers caught, right answers flagged.

    "caught" / "flagged" = verdict marginal or fail; "blocked" = verdict fail. Cases
    without a verdict (errors) are left out of the shares.
    """
    judged = [r for r in results if r.verdict is not None]
    wrong = [r for r in judged if r.case.hallucinated]
    right = [r for r in judged if not r.case.hallucinated]
    return {
        "hallucinated": len(wrong), "faithful": len(right),
        "caught": _share(sum(r.verdict != "pass" for r in wrong), len(wrong)),
        "caught_blocked": _share(sum(r.verdict == "fail" for r in wrong), len(wrong)),
        "false_flags": _share(sum(r.verdict != "pass" for r in right), len(right)),
        "false_blocks": _share(sum(r.verdict == "fail" for r in right), len(right)),
    }


def summarize(policy: str, results: Sequence[CaseResult]) -> dict[str, Any]:
    by_source: dict[str, list[CaseResult]] = defaultdict(list)
    by_kind: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        by_source[r.case.source].append(r)
        if r.case.kind is not None:
            by_kind[r.case.kind].append(r)
    overall = _block(results)
    out: dict[str, Any] = {
        "cases": len(results),
        "policy": policy,
        "overall": overall,
        "per_source": {s: _block(rs) for s, rs in sorted(by_source.items())},
        "errors": [{"id": r.case.id, "error": r.error} for r in results if r.error][:20],
    }
    if by_kind:  # only case files that name kinds (docs/evaluation.md)
        out["per_kind"] = {k: _kind_block(rs) for k, rs in sorted(by_kind.items())}
        out["per_kind_all"] = _kind_block([r for rs in by_kind.values() for r in rs])
    return out


def _render_kinds(summary: dict[str, Any]) -> list[str]:
    head = (f"{'kind':<18}{'wrong':>6}{'caught':>8}{'blocked':>9}"
            f"{'right':>7}{'flagged':>9}{'blocked':>9}")
    lines = ["", "per kind, at the policy's threshold (caught/flagged = marginal or fail, "
                 "blocked = fail):", head, "-" * len(head)]

    def pct(x: float | None) -> str:
        return "—" if x is None else f"{100 * x:.0f}%"

    rows = [*summary["per_kind"].items(), ("all kinds", summary["per_kind_all"])]
    for name, k in rows:
        lines.append(f"{name:<18}{k['hallucinated']:>6}{pct(k['caught']):>8}"
                     f"{pct(k['caught_blocked']):>9}{k['faithful']:>7}"
                     f"{pct(k['false_flags']):>9}{pct(k['false_blocks']):>9}")
    return lines


def _f(x: Any) -> str:
    return "—" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def _ms(x: Any) -> str:
    return "—" if x is None else f"{x:.0f}" if x >= 100 else f"{x:.2f}"


def render_text(summary: dict[str, Any]) -> str:
    lines = [f"policy: {summary['policy']}   cases: {summary['cases']}", ""]
    head = (f"{'source':<26}{'n':>5}{'AUROC':>8}{'R@5%FPR':>9}{'len-AUROC':>11}"
            f"{'len-R@5%':>10}{'matched':>9}{'prec':>7}{'recall':>8}{'flag%':>7}")
    lines.append(head)
    lines.append("-" * len(head))
    rows = [("overall", summary["overall"]), *summary["per_source"].items()]
    for name, b in rows:
        pol = b["at_policy_threshold"]
        lines.append(
            f"{name:<26}{b['scored']:>5}{_f(b['auroc']):>8}{_f(b['recall_at_5pct_fpr']):>9}"
            f"{_f(b['length_baseline']['auroc']):>11}"
            f"{_f(b['length_baseline']['recall_at_5pct_fpr']):>10}"
            f"{_f(b.get('length_matched_auroc')):>9}{_f(pol['precision']):>7}"
            f"{_f(pol['recall']):>8}{_f(pol['false_flag_rate'] * 100):>7}")
    lines += ["", "per layer (overall):",
              f"{'layer':<18}{'AUROC':>8}{'R@5%FPR':>9}{'p50 ms':>9}{'p99 ms':>9}"
              f"{'calls/req':>10}{'err%':>7}"]
    for key, v in summary["overall"]["layers"].items():
        err = v.get("error_rate")
        lines.append(f"{key:<18}{_f(v.get('auroc')):>8}{_f(v.get('recall_at_5pct_fpr')):>9}"
                     f"{_ms(v.get('latency_ms_p50')):>9}{_ms(v.get('latency_ms_p99')):>9}"
                     f"{_f(v.get('judge_calls_per_request')):>10}"
                     f"{_f(None if err is None else err * 100):>7}")
    if summary.get("per_kind"):
        lines += _render_kinds(summary)
    zones = summary["overall"].get("zones")
    if zones:
        lines += ["", f"zone confusion (rows expected, cols actual), n={zones['n']}:",
                  f"{'':<8}{'BAD':>6}{'MID':>6}{'GOOD':>6}"]
        for e in ("BAD", "MID", "GOOD"):
            m = zones["matrix"][e]
            lines.append(f"{e:<8}{m['BAD']:>6}{m['MID']:>6}{m['GOOD']:>6}")
        lines.append(f"cross-band confusion: {zones['cross_band_rate']:.1%}   "
                     f"zone accuracy: {zones['zone_accuracy']:.1%}")
    if summary["errors"]:
        lines += ["", f"errors ({len(summary['errors'])} shown):"]
        lines += [f"  {e['id']}: {e['error']}" for e in summary["errors"]]
    lines.append("")
    lines.append("AUROC/R@5%FPR: verdict score (1 - x-verity-score) as hallucination detector; "
                 "len-*: answer length alone; matched: AUROC over length-matched pairs; "
                 "prec/recall/flag%: verdict != pass at the policy's own threshold.")
    return "\n".join(lines)
