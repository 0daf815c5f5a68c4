"""OTLP metric names as Prometheus sees them, and the metrics a PromQL query selects.

:func:`prometheus_names` applies the OpenTelemetry Collector ``prometheus``
exporter's default translation (``UnderscoreEscapingWithSuffixes``, the
OpenTelemetry-to-Prometheus compatibility spec as implemented by the
``otlptranslator`` library): runs of characters outside ``[a-zA-Z0-9:]`` become
one underscore, the unit becomes a suffix (``s`` -> ``seconds``; ``1`` and
annotations in braces such as ``{request}`` add none), monotonic sums end in
``_total``, gauges of unit ``1`` in ``_ratio``, and a histogram is the three series
``_bucket``, ``_sum`` and ``_count``. Attribute keys become labels the same way
(:func:`label_name`).

:func:`selections` reads a PromQL expression (Grafana variables allowed) and returns
the metrics it selects with the labels its matchers name, plus the labels its
``by``/``without``/``on``/``ignoring`` clauses group by. It is a scanner, not a
parser: enough for dashboard queries, which are checked against real exports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Selection", "label_name", "prometheus_names", "selections"]

UNITS = {"d": "days", "h": "hours", "min": "minutes", "s": "seconds", "ms": "milliseconds",
         "us": "microseconds", "ns": "nanoseconds", "By": "bytes", "KiBy": "kibibytes",
         "MiBy": "mebibytes", "GiBy": "gibibytes", "KBy": "kilobytes", "MBy": "megabytes",
         "GBy": "gigabytes", "m": "meters", "V": "volts", "A": "amperes", "J": "joules",
         "W": "watts", "g": "grams", "Cel": "celsius", "Hz": "hertz", "1": "", "%": "percent"}
PER_UNITS = {"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week",
             "mo": "month", "y": "year"}

_NOT_NAME = re.compile(r"[^a-zA-Z0-9:]+")
_NOT_LABEL = re.compile(r"[^a-zA-Z0-9_]")


def _unit_suffixes(unit: str) -> tuple[str, str]:
    main, _, per = unit.partition("/")
    main, per = main.strip(), per.strip()
    main_suffix = UNITS.get(main, main) if main and not set(main) & set("{}") else ""
    per_suffix = ""
    if per and not set(per) & set("{}"):
        per_suffix = "per_" + PER_UNITS.get(per, per)
    clean = [re.sub(r"_+", "_", _NOT_LABEL.sub("_", s)).strip("_") for s in (main_suffix,
                                                                           per_suffix)]
    return clean[0], clean[1]


def base_name(name: str, unit: str, kind: str, monotonic: bool | None = None) -> str:
    """The Prometheus name of an OTLP metric (a histogram's, before ``_bucket`` etc.).

    ``kind`` is the OTLP data type: ``sum``, ``gauge`` or ``histogram``."""
    tokens = [t for t in _NOT_NAME.split(name) if t]
    main, per = _unit_suffixes(unit)
    if main and main not in tokens:
        tokens.append(main)
    if per and per not in tokens:
        tokens.append(per)
    if kind == "sum" and monotonic:
        tokens = [t for t in tokens if t != "total"] + ["total"]
    if unit == "1" and kind == "gauge":
        tokens = [t for t in tokens if t != "ratio"] + ["ratio"]
    out = "_".join(tokens)
    return "_" + out if out[:1].isdigit() else out


def prometheus_names(name: str, unit: str, kind: str,
                     monotonic: bool | None = None) -> list[str]:
    """Every series name the metric becomes (three for a histogram)."""
    base = base_name(name, unit, kind, monotonic)
    if kind in ("histogram", "summary"):
        return [f"{base}_bucket" if kind == "histogram" else base, f"{base}_sum",
                f"{base}_count"]
    return [base]


def label_name(key: str) -> str:
    """The Prometheus label of an attribute key (``verity.policy.name`` ->
    ``verity_policy_name``)."""
    out = re.sub(r"_+", "_", _NOT_LABEL.sub("_", key))
    return "key_" + out if out[:1].isdigit() else out


# ---- PromQL -----------------------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_IDENT = re.compile(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2", "by",
                       "without", "on", "ignoring", "group_left", "group_right"})


@dataclass
class Selection:
    metrics: dict[str, set[str]] = field(default_factory=dict)
    """Metric name -> label names its matchers use."""
    grouping: set[str] = field(default_factory=set)
    """Labels named in by / without / on / ignoring / group_left / group_right."""


def selections(expr: str) -> Selection:
    """What ``expr`` selects (see the module docstring)."""
    out = Selection()
    text = _STRING.sub('""', expr)
    text = _RANGE.sub("", text)
    for match in _GROUPING.finditer(text):
        out.grouping |= {label.strip() for label in match.group(2).split(",") if label.strip()}
    text = _GROUPING.sub(" ", text)

    def selector(match: re.Match[str]) -> str:
        name, body = match.group(1), match.group(2)
        if name is None:
            raise ValueError(f"selector without a metric name in {expr!r}")
        out.metrics.setdefault(name, set()).update(_MATCHER.findall(body))
        return " "

    text = _SELECTOR.sub(selector, text)
    for match in _IDENT.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name in _KEYWORDS:
            continue  # a function (or aggregation) call, or an operator keyword
        out.metrics.setdefault(name, set())
    return out
