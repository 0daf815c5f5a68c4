"""Charts drawn on the server as SVG: no JavaScript, no vendored library, no CDN.

:func:`stacked_columns` draws counts over time (one column per time bucket, one
colour per series, each column a link to the records it counts, a ``<title>`` as its
tooltip); :func:`share_bar` draws one horizontal bar of shares (a policy's verdict
mix). Every text is escaped; colours come from :data:`COLORS` (by series name) or a
fixed palette, as ``fill`` attributes (the page's CSP allows no inline style).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from html import escape

__all__ = ["COLORS", "share_bar", "stacked_columns"]

COLORS: dict[str, str] = {
    "pass": "#2e9e5b", "marginal": "#e0a526", "fail": "#d2453c", "not verified": "#8c8c8c",
    "block": "#d2453c", "disclaimer": "#e0a526", "annotate": "#5b8def",
    "regenerate": "#9b59b6", "none": "#8c8c8c",
}
_PALETTE = ("#5b8def", "#2e9e5b", "#e0a526", "#d2453c", "#9b59b6", "#17a2b8", "#8c8c8c")


def color(name: str, index: int) -> str:
    return COLORS.get(name, _PALETTE[index % len(_PALETTE)])


def _label(t: datetime, unit: str) -> str:
    return f"{t:%m-%d %H:00}" if unit == "hour" else f"{t:%Y-%m-%d}"


def stacked_columns(buckets: Sequence[datetime], series: Mapping[str, Sequence[int]], *,
                    unit: str, link: Callable[[datetime], str] | None = None,
                    title: str = "", width: int = 900, height: int = 220) -> str:
    """Counts per bucket stacked by series (``series[name][i]`` for ``buckets[i]``)."""
    left, right, top, bottom = 44, 8, 22, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    totals = [sum(s[i] for s in series.values()) for i in range(len(buckets))]
    peak = max(totals, default=0) or 1
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{escape(title)}">']
    for frac in (0.0, 0.5, 1.0):  # y axis: 0, half, peak
        y = top + plot_h * (1 - frac)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="#ddd"/><text x="{left - 4}" y="{y + 4:.1f}" '
                   f'text-anchor="end" font-size="11" fill="#555">{round(peak * frac)}</text>')
    n = max(len(buckets), 1)
    step = plot_w / n
    bar = max(step * 0.8, 1.0)
    label_every = max(1, round(n / 8))
    for i, bucket in enumerate(buckets):
        x = left + i * step + (step - bar) / 2
        y = top + plot_h
        parts = []
        for j, (name, counts) in enumerate(series.items()):
            value = counts[i]
            if not value:
                continue
            h = plot_h * value / peak
            y -= h
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                         f'fill="{color(name, j)}"/>')
        tip = escape(f"{_label(bucket, unit)}: " + ", ".join(
            f"{name} {counts[i]}" for name, counts in series.items() if counts[i]))
        group = f'<g class="col"><title>{tip}</title>{"".join(parts)}</g>'
        if link is not None and parts:
            group = f'<a href="{escape(link(bucket))}">{group}</a>'
        out.append(group)
        if i % label_every == 0:
            out.append(f'<text x="{left + i * step + step / 2:.1f}" y="{height - bottom + 14}" '
                       f'text-anchor="middle" font-size="11" fill="#555">'
                       f'{escape(_label(bucket, unit))}</text>')
    x = left
    for j, name in enumerate(series):  # legend, top left
        out.append(f'<rect x="{x}" y="4" width="10" height="10" fill="{color(name, j)}"/>'
                   f'<text x="{x + 14}" y="13" font-size="11" fill="#333">{escape(name)}</text>')
        x += 24 + 7 * len(name)
    out.append("</svg>")
    return "".join(out)


def share_bar(counts: Mapping[str, int], *, width: int = 160, height: int = 12) -> str:
    """One bar split by share (empty when everything is 0)."""
    total = sum(counts.values())
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="bar" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}">']
    x = 0.0
    for j, (name, value) in enumerate(counts.items()):
        if not value or not total:
            continue
        w = width * value / total
        out.append(f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="{height}" '
                   f'fill="{color(name, j)}"><title>{escape(name)} {value} '
                   f'({100 * value / total:.1f} %)</title></rect>')
        x += w
    out.append("</svg>")
    return "".join(out)
