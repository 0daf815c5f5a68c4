"""The shipped otel-collector.yaml and docker-compose.yaml hang together.

The collector itself is not run here (no image on CI); these are the mistakes that
make it refuse to start or silently drop a signal: a pipeline naming a component
that is not defined, a connector used on one side only, a defined component that
no pipeline uses, and compose wiring that does not match the config's endpoints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("receivers", "processors", "exporters", "connectors", "extensions")


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "otel-collector.yaml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    assert isinstance(data, dict)
    return data


def defined(config: dict[str, Any], kind: str) -> set[str]:
    return set(config.get(kind) or {})


def test_pipelines_reference_only_defined_components(config: dict[str, Any]) -> None:
    pipelines = config["service"]["pipelines"]
    connectors = defined(config, "connectors")
    problems = []
    for name, pipeline in pipelines.items():
        assert name.split("/")[0] in ("traces", "metrics", "logs"), name
        assert pipeline.get("receivers") and pipeline.get("exporters"), name
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind) or []:
                ok = component in defined(config, kind) or (
                    kind != "processors" and component in connectors)
                if not ok:
                    problems.append(f"service.pipelines.{name}.{kind}: {component!r}")
    for extension in config["service"].get("extensions") or []:
        if extension not in defined(config, "extensions"):
            problems.append(f"service.extensions: {extension!r}")
    assert not problems, "undefined components: " + ", ".join(problems)


def test_every_component_is_used_and_connectors_have_both_ends(config: dict[str, Any]) -> None:
    pipelines = config["service"]["pipelines"].values()
    used = {kind: {c for p in pipelines for c in p.get(kind) or []}
            for kind in ("receivers", "processors", "exporters")}
    for kind in ("receivers", "processors", "exporters"):
        assert defined(config, kind) <= used[kind], f"unused {kind}"
    for connector in defined(config, "connectors"):
        assert connector in used["exporters"] and connector in used["receivers"], connector
    assert defined(config, "extensions") <= set(config["service"].get("extensions") or [])


def test_signals_go_where_the_docs_say(config: dict[str, Any]) -> None:
    pipelines = config["service"]["pipelines"]
    assert "otlp" in pipelines["traces"]["receivers"]
    assert any(e.startswith("otlp_grpc/") for e in pipelines["traces"]["exporters"])
    assert "spanmetrics" in pipelines["traces"]["exporters"]
    assert {"prometheus"} <= set(pipelines["metrics"]["exporters"])
    assert {"otlp", "spanmetrics"} <= set(pipelines["metrics"]["receivers"])
    assert pipelines["logs"]["exporters"] == ["debug"]
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"].endswith(":4317")
    assert protocols["http"]["endpoint"].endswith(":4318")


def test_compose_wiring_matches_the_collector_config(config: dict[str, Any],
                                                     compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"gateway", "otel-collector", "jaeger"} <= set(services)
    assert services["jaeger"]["image"].startswith("jaegertracing/jaeger:2.")
    assert services["gateway"]["build"] == "."
    env = services["gateway"]["environment"]
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector:4318"
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert not [k for k in env if "KEY" in k or "TOKEN" in k], "no secrets in compose"
    collector = services["otel-collector"]
    assert any(v.startswith("./otel-collector.yaml:") for v in collector["volumes"])
    jaeger = next(v for k, v in config["exporters"].items() if k.startswith("otlp_grpc/"))
    assert jaeger["endpoint"].split(":")[0] == "jaeger"
    published = {p.split(":")[0] for p in collector["ports"]}
    assert {"4317", "4318", config["exporters"]["prometheus"]["endpoint"].split(":")[-1]
            } <= published


def _mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path (relative to the repo) of a service's bind mounts."""
    out = {}
    for volume in service.get("volumes") or []:
        host, container = volume.split(":")[:2]
        assert host.startswith("./"), f"{volume}: bind mounts are repo-relative"
        out[container] = ROOT / host
    return out


def test_prometheus_scrapes_the_collector_and_grafana_reads_prometheus(
        config: dict[str, Any], compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"prometheus", "grafana"} <= set(services)
    prometheus, grafana = services["prometheus"], services["grafana"]
    for name, service in (("prometheus", prometheus), ("grafana", grafana)):
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), f"{name}: pin the image"
        for host in _mounts(service).values():
            assert host.exists(), f"{name}: mounts {host}, which does not exist"

    # Prometheus: scrapes the collector's prometheus exporter, keeping its job label.
    scrape_config = next(f"{c}" for c in prometheus["command"] if c.startswith("--config.file="))
    prom = yaml.safe_load(_mounts(prometheus)[scrape_config.split("=", 1)[1]].read_text())
    (job,) = prom["scrape_configs"]
    exporter_port = config["exporters"]["prometheus"]["endpoint"].split(":")[-1]
    assert job["static_configs"][0]["targets"] == [f"otel-collector:{exporter_port}"]
    assert job["honor_labels"] is True  # `job` stays the gateway's service.name
    assert "prometheus" in config["service"]["pipelines"]["metrics"]["exporters"]

    # Grafana: the provisioned data source is that Prometheus, the dashboard provider
    # reads the folder the dashboard JSON is mounted at.
    grafana_mounts = _mounts(grafana)
    provisioning = grafana_mounts["/etc/grafana/provisioning"]
    (source,) = yaml.safe_load(
        (provisioning / "datasources" / "prometheus.yaml").read_text())["datasources"]
    published = {p.split(":")[-1] for p in prometheus["ports"]}
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    assert "9090" in published
    (provider,) = yaml.safe_load(
        (provisioning / "dashboards" / "verity-gateway.yaml").read_text())["providers"]
    folder = grafana_mounts[provider["options"]["path"]]
    assert (folder / "verity-gateway.json").is_file()
    assert folder == ROOT / "helm" / "verity-gateway" / "dashboards"  # one copy, the chart's
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == provider["options"]["path"] + "/verity-gateway.json"
