"""The dashboard's HTML: the overview, the record list, a record, and errors.

Pages are built as strings from what :mod:`gateway.dashboard.data` returns; every
value from the audit is escaped. **Model text is never shown** unless the record
holds it because its policy opted into recording content (``content``: the
messages and the answer, after redaction) — then, and only then, on the record's own
page. Links keep the filters (``?policy=…``), so every chart column and table row
drills down to the records it counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from gateway.audit.filters import AuditFilter
from gateway.audit.report import NOT_VERIFIED
from gateway.dashboard.data import BREAKDOWNS, Overview
from gateway.dashboard.svg import share_bar, stacked_columns

__all__ = ["CSS", "error_page", "overview_page", "record_page", "records_page"]

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2937;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:center}
header a{color:#fff;text-decoration:none}header h1{font-size:16px;margin:0}
main{padding:12px 16px;max-width:1200px}
form.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:end;margin:8px 0 14px}
form.filters label{display:flex;flex-direction:column;font-size:12px;color:#555}
form.filters input,form.filters select{font:inherit;padding:2px 4px;width:9em}
table{border-collapse:collapse;margin:6px 0 18px;background:#fff}
th,td{border:1px solid #e3e3e3;padding:3px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
h2{font-size:15px;margin:18px 0 4px}.muted{color:#777}.err{color:#b3261e}
.v-pass{color:#2e7d4f}.v-fail{color:#b3261e}.v-marginal{color:#a86d00}
pre{background:#fff;border:1px solid #e3e3e3;padding:8px;white-space:pre-wrap;max-width:1100px}
.grid{display:flex;flex-wrap:wrap;gap:24px}
"""


def _href(base: str, path: str, where: AuditFilter | None = None,
          extra: Iterable[tuple[str, str]] = ()) -> str:
    pairs = [*(where.query_pairs() if where else []), *extra]
    return f"{base}{path}" + (f"?{urlencode(pairs)}" if pairs else "")


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    return str(value)


def _cells(values: Sequence[Any], numeric: Sequence[bool] = ()) -> str:
    return "".join(
        f'<td class="n">{escape(_fmt(v))}</td>' if i < len(numeric) and numeric[i]
        else f"<td>{escape(_fmt(v))}</td>" for i, v in enumerate(values))


def _verdict(value: str | None) -> str:
    text = value or NOT_VERIFIED
    return f'<span class="v-{escape(text)}">{escape(text)}</span>'


def layout(title: str, body: str, *, base: str, where: AuditFilter | None = None,
           form_path: str = "/") -> str:
    w = where or AuditFilter()

    def field(name: str, label: str, value: str) -> str:
        return (f'<label>{label}<input name="{name}" value="{escape(value)}" '
                f'placeholder="any"></label>')

    def first(values: tuple[str, ...]) -> str:
        return values[0] if values else ""

    options = "".join(
        f'<option value="{v}"{" selected" if first(w.verdict) == v else ""}>{v or "any"}'
        f"</option>" for v in ("", "pass", "marginal", "fail", "none"))
    form = (f'<form class="filters" method="get" action="{escape(base + form_path)}">'
            + field("since", "since (24h, 7d, ISO)",
                    w.since.isoformat(timespec="seconds") if w.since else "")
            + field("until", "until", w.until.isoformat(timespec="seconds") if w.until else "")
            + field("policy", "policy", ",".join(w.policy))
            + field("model", "model", ",".join(w.model))
            + field("tenant", "tenant (- none)", ",".join(w.tenant))
            + f'<label>verdict<select name="verdict">{options}</select></label>'
            + field("action", "action", ",".join(w.action))
            + '<button type="submit">apply</button>'
            + f' <a href="{escape(base + form_path)}">clear</a></form>')
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{escape(title)} · Verity audit</title>"
            f'<link rel="stylesheet" href="{escape(base)}/static/style.css"></head><body>'
            f'<header><h1>Verity audit</h1><a href="{escape(_href(base, "/", where))}">'
            f'overview</a><a href="{escape(_href(base, "/records", where))}">records</a>'
            f"</header><main>{form}{body}</main></body></html>")


def error_page(message: str, *, base: str) -> str:
    return layout("error", f'<p class="err">{escape(message)}</p>', base=base)


def overview_page(ov: Overview, where: AuditFilter, *, base: str) -> str:
    if not ov.total:
        return layout("overview", '<p class="muted">No records match.</p>', base=base,
                      where=where)
    step = timedelta(hours=1) if ov.unit == "hour" else timedelta(days=1)

    def column_link(t: datetime) -> str:
        return _href(base, "/records", where.with_(since=t, until=t + step
                                                   - timedelta(microseconds=1)))

    body = [f"<p>{ov.total} records, {escape(_fmt(ov.first))} – {escape(_fmt(ov.last))} "
            f'(UTC, per {ov.unit}). <a href="{escape(_href(base, "/records", where))}">'
            f"list them</a></p>",
            "<h2>Verdicts over time</h2>",
            stacked_columns(ov.buckets, ov.verdicts, unit=ov.unit, link=column_link,
                            title="verdicts over time"),
            "<h2>Actions over time</h2>",
            stacked_columns(ov.buckets, ov.actions, unit=ov.unit, link=column_link,
                            title="actions over time")]
    body.append('<div class="grid">')
    for dim in BREAKDOWNS:
        rows = []
        for row in ov.breakdowns[dim]:
            value = row["value"]
            key = "tenant" if dim == "tenant" else dim
            link = _href(base, "/", where.with_(**{key: (value if value is not None
                                                          else "-",)}))
            n = row["count"]
            rates = [f"{100 * row['verdicts'][v] / n:.1f}" for v in ("fail", "marginal")]
            rows.append(f'<tr><td><a href="{escape(link)}">{escape(_fmt(value))}</a></td>'
                        + _cells([n, *rates, f"{100 * row['blocked'] / n:.1f}"],
                                 (True, True, True, True))
                        + f"<td>{share_bar(row['verdicts'])}</td></tr>")
        body.append(f"<div><h2>By {dim}</h2><table><tr><th>{dim}</th><th>records</th>"
                    f"<th>fail %</th><th>marginal %</th><th>blocked %</th><th>verdicts</th>"
                    f"</tr>{''.join(rows)}</table></div>")
    body.append("</div>")
    body.append(_candidates(ov.summary["candidates"], where, base))
    body.append(_layers(ov.summary["layers"]))
    return layout("overview", "".join(body), base=base, where=where)


def _candidates(rows: list[dict[str, Any]], where: AuditFilter, base: str) -> str:
    if not rows:
        return ('<h2>Live vs candidate</h2><p class="muted">No candidate policies were '
                "evaluated on these records.</p>")
    out = ["<h2>Live vs candidate</h2><table><tr><th>live policy</th><th>candidate</th>"
           "<th>evaluated</th><th>verdict differs</th><th>would block more</th>"
           "<th>would block fewer</th><th>candidate verdicts</th></tr>"]
    for r in rows:
        verdicts = ", ".join(f"{k} {n}" for k, n in sorted(r["verdicts"].items()))
        out.append(f"<tr><td>{escape(r['policy'])}</td><td>{escape(r['candidate'])}</td>"
                   + _cells([r["evaluated"], r["verdict_differs"], r["would_block_more"],
                             r["would_block_fewer"]], (True,) * 4)
                   + f"<td>{escape(verdicts)}</td></tr>")
        out.append(f'<tr><td colspan="7" class="muted">Promoting {escape(r["candidate"])} '
                   f"would have blocked {r['would_block_more']} more, "
                   f"{r['would_block_fewer']} fewer.</td></tr>")
    out.append("</table>")
    return "".join(out)


def _layers(layers: dict[str, dict[str, Any]]) -> str:
    out = ["<h2>Layers</h2><table><tr><th>policy/layer</th><th>runs</th><th>mean score</th>"
           "<th>fired</th><th>fire %</th><th>errors</th><th>skipped</th><th>p50 ms</th>"
           "<th>p99 ms</th><th>judge calls</th><th>judge $</th></tr>"]
    for key, v in layers.items():
        fire = None if v["fire_rate"] is None else f"{100 * v['fire_rate']:.1f}"
        out.append(f"<tr><td>{escape(key)}</td>" + _cells(
            [v["runs"], v["mean_score"], v["failed"], fire, v["errors"], v["skipped"],
             v["latency_ms_p50"], v["latency_ms_p99"], v["judge_calls"],
             f"{v['cost']:.4f}"], (True,) * 10) + "</tr>")
    out.append("</table>")
    return "".join(out)


def records_page(records: list[dict[str, Any]], more: bool, offset: int,
                 where: AuditFilter, *, base: str, limit: int) -> str:
    rows = []
    for r in records:
        layers = " ".join(
            f"{key}={'err' if error else 'skip' if skipped else _fmt(score)}"
            for key, score, _passed, error, skipped in r["layers"])
        action = r["action"] if r["verdict"] is not None else (r["note"] or "")
        if r["verdict"] is not None and r["applied"] is False:
            action = f"{action} (not applied)"
        link = f"{base}/records/{quote(str(r['audit_id']))}"
        rows.append(f'<tr><td><a href="{escape(link)}">{escape(str(r["audit_id"])[:12])}</a>'
                    f"</td>" + _cells([r["started_at"], r["policy"], r["mode"], r["model"],
                                       r["tenant"]])
                    + f"<td>{_verdict(r['verdict'])}</td>"
                    + _cells([r["score"], action, r["duration_ms"], layers],
                             (True, False, True, False)) + "</tr>")
    pager = []
    if offset:
        pager.append(f'<a href="{escape(_href(base, "/records", where, [("offset", str(max(0, offset - limit)))]))}">newer</a>')
    if more:
        pager.append(f'<a href="{escape(_href(base, "/records", where, [("offset", str(offset + limit))]))}">older</a>')
    body = (f"<p>Records {offset + 1}–{offset + len(records)}, newest first.</p>"
            if records else '<p class="muted">No records match.</p>')
    body += ("<table><tr><th>audit id</th><th>started (UTC)</th><th>policy</th><th>mode</th>"
             "<th>model</th><th>tenant</th><th>verdict</th><th>score</th><th>action</th>"
             f"<th>ms</th><th>layers</th></tr>{''.join(rows)}</table>"
             f"<p>{' · '.join(pager)}</p>")
    return layout("records", body, base=base, where=where, form_path="/records")


_FIELDS = ("audit_id", "started_at", "finished_at", "duration_ms", "policy", "policy_version",
           "mode", "model", "tenant", "stream", "streaming", "risk_level", "verdict", "score",
           "min_confidence", "action", "applied", "attempts", "upstream_status", "response_id",
           "note", "trace_id", "failed_claim_count")
_LAYER_COLS = ("key", "name", "score", "raw_score", "passed", "label", "latency_ms",
               "skipped", "error", "judge_calls", "cost", "weight", "explanation")


def record_page(rec: dict[str, Any], *, base: str, jaeger_url: str | None) -> str:
    body = [f"<h2>Record {escape(str(rec.get('audit_id')))}</h2><table>"]
    for key in _FIELDS:
        if key in rec:
            value = _verdict(rec.get("verdict")) if key == "verdict" else escape(_fmt(rec[key]))
            body.append(f"<tr><th>{key}</th><td>{value}</td></tr>")
    trace = rec.get("trace_id")
    if trace and jaeger_url:
        body.append(f'<tr><th>trace</th><td><a href="{escape(jaeger_url)}/trace/'
                    f'{quote(str(trace))}">open in Jaeger</a></td></tr>')
    body.append("</table>")
    if rec.get("reasons"):
        body.append("<h2>Reasons</h2><ul>" + "".join(
            f"<li>{escape(_fmt(r))}</li>" for r in rec["reasons"]) + "</ul>")
    body.append(_layer_table("Layers", rec.get("layers")))
    for cand in rec.get("candidates") or ():
        if not isinstance(cand, dict):
            continue
        body.append(f"<h2>Candidate {escape(_fmt(cand.get('name')))}: "
                    f"{_verdict(cand.get('verdict'))} → {escape(_fmt(cand.get('action')))}"
                    + (f' <span class="err">{escape(_fmt(cand.get("error")))}</span>'
                       if cand.get("error") else "") + "</h2>")
        body.append(_layer_table("", cand.get("layers")))
    for i, attempt in enumerate(rec.get("attempt_history") or (), 1):
        if isinstance(attempt, dict):
            body.append(f"<h2>Attempt {i}</h2><pre>{escape(_json(attempt))}</pre>")
    content = rec.get("content")
    if content is not None:
        body.append("<h2>Content</h2><p class=\"muted\">Recorded because the policy opts "
                    "into recording content (after redaction).</p>"
                    f"<pre>{escape(_json(content))}</pre>")
        if rec.get("failed_claims"):
            body.append("<h2>Failed claims</h2><ul>" + "".join(
                f"<li>{escape(_fmt(c))}</li>" for c in rec["failed_claims"]) + "</ul>")
    else:
        body.append('<p class="muted">No content: this policy does not record prompts or '
                    "answers.</p>")
    return layout(f"record {str(rec.get('audit_id'))[:12]}", "".join(body), base=base)


def _layer_table(title: str, layers: Any) -> str:
    if not layers:
        return ""
    head = f"<h2>{escape(title)}</h2>" if title else ""
    rows = []
    for lay in layers:
        if isinstance(lay, dict):
            rows.append("<tr>" + _cells([lay.get(c) for c in _LAYER_COLS]) + "</tr>")
    return (head + "<table><tr>" + "".join(f"<th>{c}</th>" for c in _LAYER_COLS) + "</tr>"
            + "".join(rows) + "</table>")


def _json(value: Any) -> str:
    import orjson

    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()


