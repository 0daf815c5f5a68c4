"""Prototype: a server-rendered SVG chart of the dashboard's main query, and its cost.

    .venv/bin/python bench/proto_svg_chart.py --flat /tmp/pa/compacted/flat --out /tmp/pa/chart.svg

Hourly verdicts of the last 7 days as stacked columns (pass / marginal / fail / not
verified), each column a link to the filtered record list, each segment with a
``<title>`` tooltip; axis ticks per day. No JavaScript, no library: the page stays
``Content-Security-Policy: default-src 'none'; style-src 'self'``-clean, renders in
any browser, and a test can parse it as XML. Prints the query and render times.
Bench-only prototype for docs/design/audit-store.md.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timedelta
from html import escape
from pathlib import Path

COLORS = {"pass": "#3a9b5c", "marginal": "#e0a526", "fail": "#d1493f", "none": "#9aa0a6"}
ORDER = ("fail", "marginal", "pass", "none")


def stacked_columns(buckets: list[datetime], series: dict[str, list[int]], *,
                    width: int = 960, height: int = 240, link: str = "/records?hour=") -> str:
    pad_l, pad_b, pad_t = 48, 22, 8
    plot_w, plot_h = width - pad_l - 8, height - pad_b - pad_t
    totals = [sum(series[k][i] for k in series) for i in range(len(buckets))]
    top = max(totals, default=0) or 1
    col_w = plot_w / max(len(buckets), 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="verdicts per hour" '
           f'font-family="sans-serif" font-size="11">']
    for frac in (0.0, 0.5, 1.0):  # y grid
        y = pad_t + plot_h * (1 - frac)
        out.append(f'<line x1="{pad_l}" x2="{width - 8}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="#ddd"/><text x="{pad_l - 4}" y="{y + 4:.1f}" '
                   f'text-anchor="end">{round(top * frac)}</text>')
    for i, start in enumerate(buckets):
        x = pad_l + i * col_w
        y = pad_t + plot_h
        out.append(f'<a href="{escape(link + start.isoformat())}">')
        for verdict in ORDER:
            n = series.get(verdict, [0] * len(buckets))[i]
            if not n:
                continue
            h = plot_h * n / top
            y -= h
            out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(col_w - 1, 1):.1f}" '
                       f'height="{h:.1f}" fill="{COLORS[verdict]}"><title>'
                       f'{escape(start.strftime("%a %H:00"))}: {n} {verdict}</title></rect>')
        out.append("</a>")
        if start.hour == 0:
            out.append(f'<text x="{x:.1f}" y="{height - 6}">{start:%a %d}</text>')
    out.append("</svg>")
    return "".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flat", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path("/tmp/pa/chart.svg"))
    args = ap.parse_args()
    import duckdb

    t0 = time.perf_counter()
    con = duckdb.connect()
    rows = con.execute(f"""
        WITH r AS (SELECT started_at, verdict FROM
                   read_parquet('{args.flat}/records/*/*.parquet'))
        SELECT date_trunc('hour', started_at) AS hour, coalesce(verdict, 'none'), count(*)
        FROM r WHERE started_at >= (SELECT max(started_at) FROM r) - INTERVAL 7 DAY
        GROUP BY ALL ORDER BY 1""").fetchall()
    t1 = time.perf_counter()
    first = min(r[0] for r in rows).replace(tzinfo=None)
    hours = int((max(r[0] for r in rows).replace(tzinfo=None) - first).total_seconds() // 3600)
    buckets = [first + timedelta(hours=h) for h in range(hours + 1)]
    index = {b: i for i, b in enumerate(buckets)}
    series: dict[str, list[int]] = {v: [0] * len(buckets) for v in COLORS}
    for hour, verdict, n in rows:
        series[verdict][index[hour.replace(tzinfo=None)]] += n
    svg = stacked_columns(buckets, series)
    t2 = time.perf_counter()
    args.out.write_text(svg, encoding="utf-8")
    print(f"query {t1 - t0:.3f} s, render {t2 - t1:.4f} s, {len(buckets)} columns, "
          f"{len(svg) / 1024:.0f} KiB SVG -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
