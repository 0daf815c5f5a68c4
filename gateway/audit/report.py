"""The audit summarised: what ``gateway audit report`` and ``tail`` print.

The report answers the question a team asks before turning a shadow policy inline:
*what would it have done?* — verdicts and actions by policy and mode, each layer's
scores, fire rate, latency, errors and judge cost, and how a candidate policy's
decisions differ from the live one's ("would have blocked N more, M fewer").
:func:`summarize` asks an :class:`~gateway.audit.store.AuditStore` (three grouped
queries, whatever the number of records); :func:`render_report` and
:func:`format_record_lines` lay the results out in columns as wide as their widest
value, so no value ever runs into the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gateway.audit.filters import AuditFilter
from gateway.audit.rollup import rolled
from gateway.audit.schema import BLOCKING

if TYPE_CHECKING:
    from gateway.audit.store import AuditStore

__all__ = ["BLOCKING", "NOT_VERIFIED", "format_record_lines", "render_report",
           "render_table", "summarize"]

NOT_VERIFIED = "not verified"
_NOTE_PREFIX = NOT_VERIFIED + ": "
POLICY_WIDTH = 40
"""``tail``'s policy/mode column at most (longer names are cut with ``…``)."""
ACTION_WIDTH = 48
"""``tail``'s action column at most (a long not-verified reason is cut with ``…``)."""


def summarize(store: AuditStore, where: AuditFilter | None = None) -> dict[str, Any]:
    """The report's numbers for the records ``where`` selects (JSON-ready). Counts come
    from rollups where they answer exactly (:func:`gateway.audit.rollup.rolled`);
    latency percentiles from every layer run."""
    where = where or AuditFilter()
    cond, params = where.sql()
    use = store.rollups
    rec, rec_params = rolled("records", where, rollups=use)
    total = store.query(f"SELECT coalesce(sum(n), 0) FROM ({rec})", rec_params)[0][0]
    outcomes = [{"policy": p, "mode": m, "verdict": v, "action": a, "count": n}
                for p, m, v, a, n in store.query(
                    f"SELECT policy, mode, verdict, action, sum(n) FROM ({rec}) "
                    f"GROUP BY ALL ORDER BY policy, mode, verdict NULLS LAST, "
                    f"action NULLS LAST", rec_params)]
    pcts = {(p, k): pct for p, k, pct in store.query(
        f"SELECT policy, layer_key, quantile_disc(layer_latency_ms, [0.5, 0.99]) "
        f"FROM layers WHERE {cond} GROUP BY ALL", params)}
    lay, lay_params = rolled("layers", where, rollups=use)
    layers = {}
    for (policy, key, runs, n, mean, failed, errors, skipped, cost,
         calls) in store.query(f"""
            SELECT policy, layer_key, sum(n), sum(l_scored),
                   sum(l_score_sum)::DOUBLE / nullif(sum(l_scored), 0), sum(l_failed),
                   sum(l_errors), sum(l_skipped), coalesce(sum(l_cost), 0)::DOUBLE,
                   coalesce(sum(l_calls), 0)
            FROM ({lay}) GROUP BY ALL ORDER BY ALL""", lay_params):
        pct = pcts.get((policy, key))
        p50, p99 = pct if pct is not None else (None, None)
        layers[f"{policy}/{key}"] = {
            "runs": runs, "n": n, "mean_score": mean,
            "failed": failed, "errors": errors,
            "skipped": skipped, "fire_rate": failed / n if n else None,
            "latency_ms_p50": p50, "latency_ms_p99": p99, "cost": cost, "judge_calls": calls}
    cand, cand_params = rolled("candidates", where, rollups=use)
    candidates: dict[tuple[str, str], dict[str, Any]] = {}
    for policy, name, verdict, n, differs, more, fewer in store.query(
            f"SELECT policy, candidate_name, candidate_outcome, sum(n), sum(c_differs), "
            f"sum(c_more), sum(c_fewer) FROM ({cand}) GROUP BY ALL ORDER BY ALL", cand_params):
        row = candidates.setdefault((policy, name), {
            "policy": policy, "candidate": name, "evaluated": 0, "verdict_differs": 0,
            "would_block_more": 0, "would_block_fewer": 0, "verdicts": {}})
        row["evaluated"] += n
        row["verdict_differs"] += differs
        row["would_block_more"] += more
        row["would_block_fewer"] += fewer
        row["verdicts"][verdict] = n
    return {"records": total,
            # verdict and action are null (JSON) for a record that was never verified
            "outcomes": outcomes, "layers": layers, "candidates": list(candidates.values())}


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *,
                 right: Sequence[bool] = (), indent: str = "  ", gap: int = 2) -> list[str]:
    """Lines of a table whose columns are as wide as their widest cell, ``gap``
    spaces apart; ``right[i]`` right-aligns column ``i`` (numbers)."""
    cells = [[str(h) for h in headers], *[[_cell(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for row in cells:
        parts = [(c.rjust(w) if i < len(right) and right[i] else c.ljust(w))
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        out.append(indent + (" " * gap).join(parts).rstrip())
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _ms(value: Any) -> str:
    return "—" if value is None else f"{value:.1f}"


def render_report(summary: dict[str, Any]) -> str:
    out = [f"records: {summary['records']}", "", "verdicts and actions:"]
    out += render_table(
        ("policy", "mode", "verdict", "action", "count"),
        [(r["policy"], r["mode"], NOT_VERIFIED if r["verdict"] is None else r["verdict"],
          r["action"], r["count"]) for r in summary["outcomes"]],
        right=(False, False, False, False, True))
    out += ["", "layers (failed = fired; latency in ms over every run):"]
    out += render_table(
        ("policy/layer", "n", "mean", "failed", "fire %", "errors", "skipped", "p50 ms",
         "p99 ms", "judge $"),
        [(key, v["n"], v["mean_score"], v["failed"],
          "—" if v["fire_rate"] is None else f"{100 * v['fire_rate']:.1f}", v["errors"],
          v["skipped"], _ms(v["latency_ms_p50"]), _ms(v["latency_ms_p99"]),
          f"{v['cost']:.4f}") for key, v in summary["layers"].items()],
        right=(False, *([True] * 9)))
    if summary["candidates"]:
        out += ["", "candidates (what another policy would have decided on the same answers):"]
        for row in summary["candidates"]:
            verdicts = ", ".join(f"{k} {n}" for k, n in sorted(row["verdicts"].items()))
            out.append(f"  {row['policy']} vs {row['candidate']}: {row['evaluated']} evaluated, "
                       f"verdict differs on {row['verdict_differs']} ({verdicts}); would have "
                       f"blocked {row['would_block_more']} more, {row['would_block_fewer']} "
                       f"fewer")
    return "\n".join(out)


def _layers_text(rec: dict[str, Any]) -> str:
    def one(lay: dict[str, Any]) -> str:
        if lay.get("error"):
            return f"{lay.get('key')}=err"
        if lay.get("skipped"):
            return f"{lay.get('key')}=skip"
        return f"{lay.get('key')}={float(lay.get('score') or 0.0):.2f}"
    return " ".join(one(lay) for lay in rec.get("layers") or () if isinstance(lay, dict))


def _outcome(rec: dict[str, Any]) -> tuple[str, str, str]:
    """(verdict, score, action) columns; a record never verified says so, with the
    reason from its ``note`` in the action column."""
    if rec.get("verdict") is None:
        note = str(rec.get("note") or "")
        reason = note[len(_NOTE_PREFIX):] if note.startswith(_NOTE_PREFIX) else note
        return NOT_VERIFIED, "", "   " + (f"({reason})" if reason else "")
    score = rec.get("score")
    applied = "" if rec.get("applied", True) else " (not applied)"
    return (str(rec.get("verdict")), "n/a" if score is None else f"{float(score):.2f}",
            f"-> {rec.get('action')}{applied}")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def format_record_lines(records: Sequence[dict[str, Any]], *,
                        widths: tuple[int, int] | None = None
                        ) -> tuple[list[str], tuple[int, int]]:
    """One line per record — time, audit id, policy/mode, verdict, score, action,
    layers — in columns that line up across the lines; and the widths of the
    policy/mode and action columns (pass them back for lines printed later, e.g. by
    ``tail --follow``: longer values are then cut with ``…``)."""
    wheres = [f"{r.get('policy')}/{r.get('mode')}" for r in records]
    outcomes = [_outcome(r) for r in records]
    if widths is None:
        widths = (min(POLICY_WIDTH, max([20, *map(len, wheres)])),
                  min(ACTION_WIDTH, max([26, *(len(o[2]) for o in outcomes)])))
    policy_w, action_w = widths
    lines = []
    for rec, where, (verdict, score, action) in zip(records, wheres, outcomes, strict=True):
        lines.append(f"{str(rec.get('started_at') or '')[:19]:<19}  {rec.get('audit_id')}  "
                     f"{_cut(where, policy_w):<{policy_w}}  {verdict:<12} "
                     f"{score:>4}  {_cut(action, action_w):<{action_w}}  "
                     f"[{_layers_text(rec)}]")
    return lines, widths
