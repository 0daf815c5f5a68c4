"""The Grafana dashboard asks Prometheus only for what the gateway really exports.

``helm/verity-gateway/dashboards/verity-gateway.json`` (the Helm chart's ConfigMap
and docker-compose.yaml's provisioned dashboard) queries the gateway's metrics as the
OpenTelemetry Collector's ``prometheus`` exporter names them. Here a real gateway
(openai SDK -> uvicorn -> scripted upstream) exports to the in-process OTLP receiver
while it serves inline requests (JSON, stream, an upstream 500, a layer that errors, a
layer that reports judge cost, a candidate policy evaluated after the answer) and shadow requests (one whose job fails, one queued,
one dropped by a full queue, the rest cancelled at shutdown). Every exported metric
is translated to its Prometheus series names and labels (``tests/prom_naming.py``);
every metric a panel or variable selects must be among them, and every label it
matches or groups by must be on a metric it selects.

Metrics the dashboard needs that the gateway does not export yet would be listed in
``PENDING`` with the exact name and labels to add (none are now); a test fails once
one is exported, so the list cannot go stale.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import openai
import pytest
from otlp_receiver import OTLPReceiver
from prom_naming import base_name, label_name, prometheus_names, selections
from serving import wait_until

from gateway.telemetry import create_telemetry
from gateway.layers.registry import BUILTIN, LayerRegistry
from gateway.layers.base import LayerConfig, LayerResources, LayerResult, VerifyInput

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "helm" / "verity-gateway" / "dashboards" / "verity-gateway.json"
ALWAYS = {"job", "instance"}  # set by the exporter from service.name / service.instance.id

PENDING: dict[str, set[str]] = {}

INLINE = """
mode: inline
match: {models: ["inline-*"]}
candidates: [cand]
layers:
  - {name: keyword, id: k1, config: {block: [forbidden]}}
  - {name: costly, id: judge1}
  - {name: broken, id: b1}
actions: {fail: {type: block}}
"""
SHADOW = """
mode: shadow
default: true
candidates: [cand]
layers:
  - {name: gate, id: g1, timeout_ms: 60000}
"""
STRICT = """
mode: inline
match: {models: ["strict-*"]}
on_error: fail_closed
layers: [{name: broken, id: b1}]
actions: {fail: {type: block}}
"""
CAND = """
mode: inline
match: {models: ["never-*"]}
layers: [{name: keyword, id: k1, config: {block: [said]}}]
actions: {fail: {type: block}}
"""

GATE = threading.Event()


class CostlyLayer:
    """Passes, reporting one judge call and its cost (feeds ``verity.judge.cost``)."""

    name: ClassVar[str] = "costly"
    Config: ClassVar[type[LayerConfig]] = LayerConfig

    def __init__(self, config: LayerConfig, resources: LayerResources | None = None) -> None:
        pass

    async def verify(self, inp: VerifyInput) -> LayerResult:
        return LayerResult(score=1.0, passed=True, cost=0.0015, judge_calls=1)


class BrokenLayer(CostlyLayer):
    name: ClassVar[str] = "broken"

    async def verify(self, inp: VerifyInput) -> LayerResult:
        raise RuntimeError("judge down")


class GateLayer(CostlyLayer):
    """Passes once :data:`GATE` is set (a shadow job that stays running)."""

    name: ClassVar[str] = "gate"

    async def verify(self, inp: VerifyInput) -> LayerResult:
        while not GATE.is_set():
            await asyncio.sleep(0.01)
        return LayerResult(score=1.0, passed=True)


def load_dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """``(where, PromQL)`` for every panel target and every query variable; a
    variable's ``label_values(selector, label)`` is given as ``selector`` with the
    label as a grouping."""
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for var in dashboard["templating"]["list"]:
        if var["type"] != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        match = re.fullmatch(r"\s*label_values\((.*),\s*([a-zA-Z_]\w*)\)\s*", query)
        assert match, f"variable {var['name']}: not a label_values() query: {query}"
        yield f"variable {var['name']!r}", f"sum by ({match.group(2)}) ({match.group(1)})"


@pytest.fixture
def layers() -> Iterator[LayerRegistry]:
    GATE.set()
    yield BUILTIN.with_layers({cls.name: cls for cls in (CostlyLayer, BrokenLayer, GateLayer)})
    GATE.set()


@pytest.fixture
def exported(layers: LayerRegistry, make_gateway: Callable[..., Any], otlp_receiver: OTLPReceiver,
             upstream: Any, tmp_path: Path, make_client: Callable[..., openai.OpenAI],
             monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """Prometheus series name -> labels, of everything a real gateway exported."""
    for name, text in (("inline", INLINE), ("strict", STRICT), ("shadowed", SHADOW),
                       ("cand", CAND)):
        (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")
    gw = make_gateway(policies_dir=str(tmp_path), reload_policies=False,
                      shadow={"queue_size": 1, "concurrency": 1, "drain_seconds": 0.2},
                      app_kwargs={"telemetry": create_telemetry(otlp_receiver.environ()),
                                  "layers": layers})
    client = make_client(gw)
    engine = gw.app.proxy.engine
    shadow = engine.shadow

    def ask(model: str, text: str = "hello", **kw: Any) -> Any:
        return client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": text}], **kw)

    try:
        # Inline: JSON, a stream (time to first chunk), an upstream error.
        ask("inline-a")
        assert list(ask("inline-a", stream=True, stream_options={"include_usage": True}))
        with pytest.raises(openai.InternalServerError):
            ask("inline-a", extra_headers={"x-mock-status": "500"})
        # A layer error under on_error: fail_closed blocks the answer.
        assert "failed verification" in str(ask("strict-a").choices[0].message.content)
        # Shadow: a job that fails (a bug in the job, simulated), ...
        original = engine.verifier.candidate

        async def failing(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("simulated shadow job bug")

        monkeypatch.setattr(engine.verifier, "candidate", failing)
        ask("scripted-small")
        wait_until(lambda: shadow.failed == 1, message="the shadow job failed")
        monkeypatch.setattr(engine.verifier, "candidate", original)
        # ... one running (held at the gate), one queued, one dropped: the queue holds 1.
        GATE.clear()
        ask("scripted-small")
        wait_until(lambda: shadow.running == 1, message="the shadow job started")
        ask("scripted-small")
        ask("scripted-small")
        # (a shadow job is submitted after the answer is sent: wait for it, bounded)
        wait_until(lambda: (shadow.depth, shadow.dropped) == (1, 1),
                   message="one queued and one dropped job")
    finally:
        gw.stop()  # drain deadline: the held and the queued job are cancelled; then flush
        GATE.set()
    assert shadow.cancelled == 2

    series: dict[str, set[str]] = {}
    for name, exports in otlp_receiver.metrics().items():
        last = exports[-1]
        labels = {label_name(k) for m in exports for p in m.points for k in p.attributes}
        for prom in prometheus_names(name, last.unit, last.kind, last.monotonic):
            series[prom] = labels | ALWAYS | ({"le"} if prom.endswith("_bucket") else set())
    return series


# ---- the translation itself ------------------------------------------------------------


@pytest.mark.parametrize(("otlp", "expected"), [
    (("http.server.request.duration", "s", "histogram", None),
     ["http_server_request_duration_seconds_bucket", "http_server_request_duration_seconds_sum",
      "http_server_request_duration_seconds_count"]),
    (("requests.count", "1", "sum", True), ["requests_count_total"]),
    (("memory.usage", "By", "gauge", None), ["memory_usage_bytes"]),
    (("cpu.utilization", "1", "gauge", None), ["cpu_utilization_ratio"]),
    (("verity.judge.cost", "{USD}", "sum", True), ["verity_judge_cost_total"]),
    (("verity.fail_open", "{request}", "sum", True), ["verity_fail_open_total"]),
    (("queue.size", "{request}", "sum", False), ["queue_size"]),
    (("net.io", "By/s", "gauge", None), ["net_io_bytes_per_second"]),
    (("verity.requests.total", "1", "sum", True), ["verity_requests_total"]),
])
def test_prometheus_names_follow_the_collector_translation(
        otlp: tuple[str, str, str, bool | None], expected: list[str]) -> None:
    assert prometheus_names(*otlp) == expected
    assert label_name("verity.policy.name") == "verity_policy_name"
    assert label_name("2fa.kind") == "key_2fa_kind"


def test_selections_reads_metrics_matchers_and_grouping() -> None:
    sel = selections('histogram_quantile(0.95, sum by (le, m) (rate(a_bucket{job=~"$job", '
                     'x!="a}b"}[$__rate_interval]))) / on (job) group_left b_total * 3600'
                     ' or c unless d{y="1"} offset 5m')
    assert sel.metrics == {"a_bucket": {"job", "x"}, "b_total": set(), "c": set(),
                           "d": {"y"}}
    assert sel.grouping == {"le", "m", "job"}


# ---- the dashboard ------------------------------------------------------------------------


def test_dashboard_is_well_formed() -> None:
    dashboard = load_dashboard()
    assert dashboard["uid"] == "verity-gateway" and dashboard["id"] is None
    variables = [v["name"] for v in dashboard["templating"]["list"]]
    assert variables[0] == "datasource" and {"job", "policy", "model"} <= set(variables)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard["panels"]:
        box = panel["gridPos"]
        assert box["x"] >= 0 and box["x"] + box["w"] <= 24, panel["title"]
        for x in range(box["x"], box["x"] + box["w"]):
            for y in range(box["y"], box["y"] + box["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]
        if panel["type"] == "row":
            continue
        assert panel.get("description"), f"{panel['title']!r}: say what it shows"
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
            assert "$__rate_interval" in target["expr"] or "rate(" not in target["expr"]
    for where, expr in queries(dashboard):
        if where != "variable 'job'":
            assert 'job=~"$job"' in expr, f"{where}: filter by the job variable"


def test_every_metric_and_label_the_dashboard_asks_for_is_exported(
        exported: dict[str, set[str]]) -> None:
    known = {**{m: labels | ALWAYS | ({"le"} if m.endswith("_bucket") else set())
                for m, labels in PENDING.items()}, **exported}
    problems = []
    for where, expr in queries(load_dashboard()):
        sel = selections(expr)
        assert sel.metrics, f"{where}: selects no metric: {expr}"
        for metric, labels in sel.metrics.items():
            if metric not in known:
                problems.append(f"{where}: no metric {metric!r}")
            elif labels - known[metric]:
                problems.append(f"{where}: {metric} has no label(s) "
                                f"{sorted(labels - known[metric])}")
        offered = set().union(*(known.get(m, set()) for m in sel.metrics))
        if sel.grouping - offered:
            problems.append(f"{where}: groups by {sorted(sel.grouping - offered)}, "
                            f"on none of {sorted(sel.metrics)}")
    assert not problems, "\n".join(problems) + f"\nexported: {sorted(exported)}"
    # Nothing pending is exported already: move it out of PENDING (and out of the docs).
    assert not set(PENDING) & set(exported), sorted(set(PENDING) & set(exported))


def test_pending_metrics_are_used_by_the_dashboard() -> None:
    used = {m for _, expr in queries(load_dashboard()) for m in selections(expr).metrics}
    assert set(PENDING) <= used, "PENDING lists a metric the dashboard does not use"


def test_request_duration_and_candidate_decisions_are_exported(
        exported: dict[str, set[str]]) -> None:
    """The two metrics the dashboard once listed as pending, with their labels."""
    duration = base_name("http.server.request.duration", "s", "histogram")
    for suffix in ("_bucket", "_count", "_sum"):
        assert {"http_request_method", "http_route", "http_response_status_code",
                "error_type"} <= exported[duration + suffix]
    candidates = base_name("verity.candidate.decisions", "{decision}", "sum", True)
    assert {"verity_policy_name", "verity_candidate_name", "verity_verdict",
            "verity_action"} <= exported[candidates]
