"""Render the Helm chart and check the manifests; ``helm lint`` it.

Needs Helm: the ``helm`` binary on PATH, or the ``helm-python-sdk`` package
(``pip install helm-python-sdk``: Helm's own Go SDK as a shared library, offline).
Without either, every test here is skipped (marker ``helm``).

What is checked: probes on ``/healthz``/``/readyz``, non-root and read-only root
filesystem with a writable emptyDir where the audit file goes, the config checksum
annotation (changes with the config, not with the replica count), a grace period that
covers the shadow drain, the policies ConfigMap mounted as a whole directory at
``GATEWAY_POLICIES_DIR``, HPA/PDB wiring, the Grafana dashboard ConfigMap (off by
default; sidecar label; the shipped JSON verbatim), and that the rendered ``gateway.yaml`` is
accepted by :func:`gateway.settings.load_settings`.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
import yaml

from gateway.settings import ConfigError, load_settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "verity-gateway"
FULL_VALUES = CHART / "ci" / "full-values.yaml"
DASHBOARD = CHART / "dashboards" / "verity-gateway.json"

pytestmark = pytest.mark.helm


class RenderError(Exception):
    """The chart refused to render (a template error or a ``fail``)."""


class Helm(Protocol):
    def render(self, values: dict[str, Any]) -> list[dict[str, Any]]: ...

    def lint(self, values: dict[str, Any]) -> list[str]: ...


def _documents(texts: list[str]) -> list[dict[str, Any]]:
    docs = [d for text in texts for d in yaml.safe_load_all(text) if d]
    return sorted(docs, key=lambda d: (d["kind"], d["metadata"]["name"]))


class _Binary:
    def __init__(self, exe: str, tmp: Path) -> None:
        self.exe, self.tmp = exe, tmp

    def _values_file(self, values: dict[str, Any]) -> str:
        path = self.tmp / "values.json"  # JSON is YAML
        path.write_text(json.dumps(values), encoding="utf-8")
        return str(path)

    def render(self, values: dict[str, Any]) -> list[dict[str, Any]]:
        run = subprocess.run(
            [self.exe, "template", "rel", str(CHART), "--namespace", "ns",
             "-f", self._values_file(values)], capture_output=True, text=True, check=False)
        if run.returncode:
            raise RenderError(run.stderr)
        return _documents([run.stdout])

    def lint(self, values: dict[str, Any]) -> list[str]:
        run = subprocess.run([self.exe, "lint", "--strict", str(CHART),
                              "-f", self._values_file(values)],
                             capture_output=True, text=True, check=False)
        return [run.stdout + run.stderr] if run.returncode else []


class _Sdk:
    def __init__(self) -> None:
        import helm_python

        self.helm = helm_python

    def render(self, values: dict[str, Any]) -> list[dict[str, Any]]:
        chart = self.helm.Chart.load(CHART)
        try:
            manifests = chart.render(values, name="rel", namespace="ns")
        except self.helm.HelmError as exc:
            raise RenderError(str(exc)) from exc
        return _documents([t for p, t in manifests.items() if p.endswith((".yaml", ".yml"))])

    def lint(self, values: dict[str, Any]) -> list[str]:
        report = self.helm.lint(CHART, values, strict=True)
        return [*report["errors"],
                *(f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2)]


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    exe = shutil.which("helm")
    if exe:
        return _Binary(exe, tmp_path_factory.mktemp("helm"))
    try:
        return _Sdk()
    except ImportError:
        pytest.skip("no helm: install the helm binary or `pip install helm-python-sdk`")


def full_values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(FULL_VALUES.read_text(encoding="utf-8"))
    return loaded


def one(docs: list[dict[str, Any]], kind: str, suffix: str = "") -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, f"expected one {kind}*{suffix}, got {len(found)}"
    return found[0]


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return [d["kind"] for d in docs]


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def env(deployment: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(deployment)["env"]}


def gateway_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(one(docs, "ConfigMap", "-gateway")["data"]["gateway.yaml"])
    return data


@pytest.fixture(params=["default", "full"])
def values(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    yield {} if request.param == "default" else full_values()


# ----------------------------------------------------------------------------- tests


def test_lint_is_clean(helm: Helm, values: dict[str, Any]) -> None:
    assert helm.lint(values) == []


def test_default_render_has_the_expected_objects(helm: Helm) -> None:
    docs = helm.render({})
    assert kinds(docs) == ["ConfigMap", "Deployment", "PodDisruptionBudget", "Service"]
    assert kinds(helm.render(full_values())) == [
        "ConfigMap", "ConfigMap", "ConfigMap", "Deployment", "HorizontalPodAutoscaler",
        "PodDisruptionBudget", "Service"]


def test_grafana_dashboard_configmap_carries_the_sidecar_label_and_the_json(
        helm: Helm) -> None:
    assert not [d for d in helm.render({}) if d["metadata"]["name"].endswith("-dashboard")]
    docs = helm.render({"grafanaDashboard": {"enabled": True}})
    cm = one(docs, "ConfigMap", "-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert "namespace" not in cm["metadata"]  # the release's
    assert set(cm["data"]) == {"verity-gateway.json"}
    shipped = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert json.loads(cm["data"]["verity-gateway.json"]) == shipped
    assert shipped["uid"] == "verity-gateway"
    body = cm["data"]["verity-gateway.json"]
    assert "{{verity_policy_name}}" in body  # Grafana's legend templates, not Helm's

    docs = helm.render({"grafanaDashboard": {
        "enabled": True, "namespace": "monitoring", "labels": {"team-dashboards": "yes"},
        "annotations": {"grafana_folder": "LLM"}}})
    meta = one(docs, "ConfigMap", "-dashboard")["metadata"]
    assert meta["namespace"] == "monitoring"
    assert meta["labels"]["team-dashboards"] == "yes"  # merged with the default label
    assert meta["labels"]["grafana_dashboard"] == "1"
    assert meta["annotations"] == {"grafana_folder": "LLM"}


def test_probes_ports_and_args_agree(helm: Helm, values: dict[str, Any]) -> None:
    docs = helm.render(values)
    c = container(one(docs, "Deployment"))
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    port = next(p["containerPort"] for p in c["ports"] if p["name"] == "http")
    assert c["args"][:1] == ["serve"]
    assert c["args"][c["args"].index("--port") + 1] == str(port)
    assert c["args"][c["args"].index("--host") + 1] == "0.0.0.0"
    service = one(docs, "Service")
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


def test_runs_non_root_on_a_read_only_root_filesystem(helm: Helm, values: dict[str, Any]) -> None:
    deployment = one(helm.render(values), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    c = container(deployment)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert pod["automountServiceAccountToken"] is False


def test_audit_file_is_on_a_writable_empty_dir(helm: Helm, values: dict[str, Any]) -> None:
    docs = helm.render(values)
    deployment = one(docs, "Deployment")
    audit_path = Path(gateway_config(docs)["audit"]["path"])
    mounts = {m["mountPath"]: m for m in container(deployment)["volumeMounts"]}
    mount = mounts.get(str(audit_path.parent))
    assert mount is not None, f"nothing mounted at {audit_path.parent}"
    assert not mount.get("readOnly", False)
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert "emptyDir" in volumes[mount["name"]]


def test_audit_file_can_be_turned_off(helm: Helm) -> None:
    docs = helm.render({"audit": {"enabled": False}})
    assert gateway_config(docs)["audit"] == {"path": None}


def test_rendered_gateway_config_is_accepted_by_the_gateway(
        helm: Helm, values: dict[str, Any], tmp_path: Path) -> None:
    docs = helm.render(values)
    path = tmp_path / "gateway.yaml"
    path.write_text(one(docs, "ConfigMap", "-gateway")["data"]["gateway.yaml"], encoding="utf-8")
    settings = load_settings(path, environ={})
    expected = values.get("shadow", {}).get("queue_size", 1000)
    assert settings.shadow.queue_size == expected
    assert [u.name for u in settings.upstreams]


def test_a_bad_extra_config_key_fails_settings_validation(helm: Helm, tmp_path: Path) -> None:
    docs = helm.render({"extraConfig": {"shadow": {"queueSize": 5}}})
    path = tmp_path / "gateway.yaml"
    path.write_text(one(docs, "ConfigMap", "-gateway")["data"]["gateway.yaml"], encoding="utf-8")
    with pytest.raises(ConfigError, match="queueSize"):
        load_settings(path, environ={})


def test_config_checksum_rolls_pods_on_config_change_only(helm: Helm) -> None:
    def checksum(values: dict[str, Any]) -> str:
        deployment = one(helm.render(values), "Deployment")
        value: str = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        return value

    base = checksum({})
    assert len(base) == 64
    assert checksum({"shadow": {"queue_size": 7}}) != base
    assert checksum({"replicaCount": 5}) == base


def test_grace_period_covers_the_shadow_drain(helm: Helm, values: dict[str, Any]) -> None:
    merged = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    shadow = {**merged["shadow"], **values.get("shadow", {})}
    shutdown = merged["shutdown"]
    pod = one(helm.render(values), "Deployment")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] >= (
        shutdown["preStopSleepSeconds"] + shutdown["inflightSeconds"] + shadow["drain_seconds"])
    pre_stop = container(one(helm.render(values), "Deployment"))["lifecycle"]["preStop"]
    assert pre_stop["exec"]["command"] == ["sleep", str(shutdown["preStopSleepSeconds"])]
    longer = helm.render({"shadow": {"drain_seconds": 300}})
    assert one(longer, "Deployment")["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"] >= 300 + shutdown["preStopSleepSeconds"]


def test_grace_period_covers_the_telemetry_flush(helm: Helm, tmp_path: Path) -> None:
    """The telemetry flush (after the shadow drain) is in the config and in the sum."""
    merged = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    shutdown = merged["shutdown"]
    assert merged["telemetry"]["flush_seconds"] > 0

    def grace(values: dict[str, Any]) -> int:
        pod = one(helm.render(values), "Deployment")["spec"]["template"]["spec"]
        return int(pod["terminationGracePeriodSeconds"])

    base = grace({})
    assert base == (shutdown["preStopSleepSeconds"] + shutdown["inflightSeconds"]
                    + merged["shadow"]["drain_seconds"] + merged["telemetry"]["flush_seconds"]
                    + shutdown["marginSeconds"])
    slower = {"telemetry": {"flush_seconds": 42.5}}
    assert grace(slower) == base - merged["telemetry"]["flush_seconds"] + 43  # rounded up
    docs = helm.render(slower)
    path = tmp_path / "gateway.yaml"
    path.write_text(one(docs, "ConfigMap", "-gateway")["data"]["gateway.yaml"], encoding="utf-8")
    assert load_settings(path, environ={}).telemetry.flush_seconds == 42.5


def test_policies_are_mounted_as_a_directory_at_the_policies_dir(helm: Helm) -> None:
    values = full_values()
    docs = helm.render(values)
    deployment = one(docs, "Deployment")
    policies = one(docs, "ConfigMap", "-policies")
    assert set(policies["data"]) == set(values["policies"])
    for name, text in policies["data"].items():
        assert isinstance(yaml.safe_load(text), dict), name
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"]
                  if v.get("configMap", {}).get("name") == policies["metadata"]["name"])
    mount = next(m for m in container(deployment)["volumeMounts"] if m["name"] == volume["name"])
    # A subPath mount never sees ConfigMap updates; the whole directory does.
    assert "subPath" not in mount
    assert mount["mountPath"] == env(deployment)["GATEWAY_POLICIES_DIR"]


def test_without_inline_policies_the_image_policies_are_used(helm: Helm) -> None:
    docs = helm.render({})
    assert [d for d in docs if d["metadata"]["name"].endswith("-policies")] == []
    deployment = one(docs, "Deployment")
    assert env(deployment)["GATEWAY_POLICIES_DIR"] == "/etc/verity/policies"


def test_keys_come_from_the_existing_secret(helm: Helm) -> None:
    values = full_values()
    docs = helm.render(values)
    variables = env(one(docs, "Deployment"))
    for name, key in values["secretEnv"]["env"].items():
        assert variables[name] == {"secretKeyRef": {
            "name": values["secretEnv"]["secretName"], "key": key}}
    assert variables["OTEL_EXPORTER_OTLP_ENDPOINT"] == values["otel"]["endpoint"]
    assert "Secret" not in kinds(docs)


@pytest.mark.parametrize(("bad", "message"), [
    ({"auth": {"keys": [{"name": "a", "tenant": "a", "key": "sk-plaintext"}]}}, "key_env"),
    ({"secretEnv": {"env": {"OPENAI_API_KEY": "k"}}}, "secretName"),
    ({"policies": {"../escape.yaml": "a: 1"}}, "not a valid policy file name"),
    ({"autoscaling": {"enabled": True}, "resources": {"requests": {"cpu": None}}},
     "requests.cpu"),
])
def test_unsafe_values_are_refused(helm: Helm, bad: dict[str, Any], message: str) -> None:
    with pytest.raises(RenderError, match=message):
        helm.render(bad)


def test_autoscaling_owns_the_replica_count(helm: Helm) -> None:
    values = copy.deepcopy(full_values())
    docs = helm.render(values)
    assert "replicas" not in one(docs, "Deployment")["spec"]
    hpa = one(docs, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"]["name"] == one(docs, "Deployment")["metadata"]["name"]
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert one(helm.render({"replicaCount": 4}), "Deployment")["spec"]["replicas"] == 4


def test_pdb_selects_the_gateway_pods(helm: Helm) -> None:
    docs = helm.render({})
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["selector"] == one(docs, "Deployment")["spec"]["selector"]
    assert "PodDisruptionBudget" not in kinds(helm.render({"pdb": {"enabled": False}}))
