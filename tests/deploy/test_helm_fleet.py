"""The chart in fleet mode (``fleet.enabled``): the relays' config publishes to Redis, a
worker Deployment runs ``gateway worker`` with the same config, policies and secrets,
and (``fleet.keda.enabled``) a KEDA ScaledObject scales it on the group's lag. Also
``server.workers``, the relay processes per pod. Off by default: nothing new renders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from test_helm_render import (
    CHART,
    Helm,
    RenderError,
    container,
    env,
    gateway_config,
    helm,  # noqa: F401 - the fixture
    kinds,
    one,
)

from gateway.settings import load_settings

pytestmark = pytest.mark.helm

FLEET_VALUES = CHART / "ci" / "fleet-values.yaml"


def fleet_values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(FLEET_VALUES.read_text(encoding="utf-8"))
    return loaded


def test_fleet_is_off_by_default(helm: Helm) -> None:  # noqa: F811
    docs = helm.render({})
    assert "ScaledObject" not in kinds(docs)
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"] == [
        "rel-verity-gateway"]
    config = gateway_config(docs)
    assert "redis" not in config and "runner" not in config["shadow"]
    assert config["server"]["workers"] == 1


def test_fleet_lints_clean(helm: Helm) -> None:  # noqa: F811
    assert helm.lint(fleet_values()) == []


def test_fleet_renders_a_worker_deployment_with_the_relays_config(
        helm: Helm, tmp_path: Path) -> None:  # noqa: F811
    docs = helm.render(fleet_values())
    assert kinds(docs) == ["ConfigMap", "Deployment", "Deployment", "PodDisruptionBudget",
                           "ScaledObject", "Service"]
    config = gateway_config(docs)
    assert config["shadow"]["runner"] == "redis"
    assert config["redis"]["url"] == "redis://redis-master.redis:6379/2"
    assert config["server"]["workers"] == 2
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    settings = load_settings(str(path), environ={"OPENAI_API_KEY": "x", "REDIS_PASSWORD": "y"})
    assert settings.shadow.runner == "redis" and settings.redis.password_env == "REDIS_PASSWORD"

    relay, worker = one(docs, "Deployment", "-gateway"), one(docs, "Deployment", "-worker")
    c = container(worker)
    assert c["args"] == ["worker", "--concurrency", "1"]
    assert "ports" not in c and "readinessProbe" not in c
    assert env(worker)["GATEWAY_CONFIG"] == env(relay)["GATEWAY_CONFIG"]
    assert env(worker)["REDIS_PASSWORD"] == {"secretKeyRef": {
        "name": "verity-gateway-secrets", "key": "redis-password"}}
    assert env(worker)["OTEL_SERVICE_NAME"] == "verity-gateway-worker"
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert "replicas" not in worker["spec"], "KEDA owns the worker replica count"
    labels = worker["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "worker"
    assert worker["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # No relay selector may match a worker pod (they serve no HTTP), nor the reverse.
    for selector in (one(docs, "Service")["spec"]["selector"],
                     one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
                     relay["spec"]["selector"]["matchLabels"]):
        assert not selector.items() <= labels.items()
    relay_labels = relay["spec"]["template"]["metadata"]["labels"]
    assert not worker["spec"]["selector"]["matchLabels"].items() <= relay_labels.items()


def test_keda_scales_the_workers_on_the_group_lag(helm: Helm) -> None:  # noqa: F811
    scaled = one(helm.render(fleet_values()), "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "rel-verity-gateway-worker"
    assert scaled["spec"]["maxReplicaCount"] == 6
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "redis-streams"
    assert trigger["metadata"] == {
        "address": "redis-master.redis:6379", "databaseIndex": "2", "enableTLS": "false",
        "stream": "verity:jobs", "consumerGroup": "verity-workers", "lagCount": "200",
        "passwordFromEnv": "REDIS_PASSWORD"}


def test_fleet_without_a_redis_url_is_refused(helm: Helm) -> None:  # noqa: F811
    with pytest.raises(RenderError, match="fleet.redis.url"):
        helm.render({"fleet": {"enabled": True}})
