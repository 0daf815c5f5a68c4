"""Static checks of the Helm chart that need no ``helm``.

Every ``.Values.<path>`` a template reads must be declared in ``values.yaml`` (a typo
renders as an empty string and ships silently otherwise); ``Chart.yaml`` must be a
v2 chart whose ``appVersion`` is the gateway's version (the default image tag); and
the gateway settings sections in ``values.yaml`` and ``ci/*-values.yaml`` must be
valid for :mod:`gateway.settings`, whose strict schema would reject them at pod start.
Rendering and ``helm lint`` are in ``test_helm_render.py``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "verity-gateway"

# `.Values.a.b` or `$.Values.a.b`, keys made of identifier characters.
VALUES_REF = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
# Keys of values.yaml passed verbatim into the gateway's config file (snake_case there).
SETTINGS_SECTIONS = ("upstreams", "auth", "shadow", "judge", "server")


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def template_texts(chart: Path = CHART) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8")
            for p in sorted((chart / "templates").iterdir()) if p.is_file()}


def missing_values(templates: dict[str, str], values: dict[str, Any]) -> list[str]:
    """``file: .Values.path`` for each reference whose path is not in ``values``."""
    missing = []
    for name, text in templates.items():
        for match in VALUES_REF.finditer(text):
            node: Any = values
            for key in match.group(1).lstrip(".").split("."):
                if not isinstance(node, dict) or key not in node:
                    missing.append(f"{name}: .Values{match.group(1)}")
                    break
                node = node[key]
    return sorted(set(missing))


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Helm's merge of a values file over the defaults (maps merge, the rest replaces)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def values_files() -> list[Path]:
    return [CHART / "values.yaml", *sorted((CHART / "ci").glob("*-values.yaml"))]


# ----------------------------------------------------------------------------- tests


def test_chart_is_a_v2_application_chart_of_this_gateway_version() -> None:
    chart = load_yaml(CHART / "Chart.yaml")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == CHART.name
    assert chart.get("type", "application") == "application"
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?", str(chart["version"]))
    # The default image tag is appVersion: it must name the version pyproject builds.
    assert str(chart["appVersion"]) == project["version"]


def test_chart_has_its_templates() -> None:
    names = set(template_texts())
    assert {"_helpers.tpl", "NOTES.txt", "deployment.yaml", "service.yaml", "configmap.yaml",
            "configmap-policies.yaml", "hpa.yaml", "pdb.yaml"} <= names


def test_every_values_reference_in_the_templates_exists_in_values_yaml() -> None:
    values = load_yaml(CHART / "values.yaml")
    assert missing_values(template_texts(), values) == []


def test_the_reference_check_catches_a_typo() -> None:
    values = load_yaml(CHART / "values.yaml")
    templates = {"deployment.yaml": "replicas: {{ .Values.replicaCount }}\n"
                                    "port: {{ $.Values.service.prot }}\n"
                                    "x: {{ .Values.shadow.drain_seconds.deeper }}\n"}
    assert missing_values(templates, values) == [
        "deployment.yaml: .Values.service.prot",
        "deployment.yaml: .Values.shadow.drain_seconds.deeper",
    ]


def test_the_reference_check_sees_the_real_templates() -> None:
    """Guard against the regex silently matching nothing."""
    refs = {m.group(1) for text in template_texts().values() for m in VALUES_REF.finditer(text)}
    assert {".replicaCount", ".shadow.drain_seconds", ".policiesDir", ".otel.endpoint"} <= refs


@pytest.mark.parametrize("path", values_files(), ids=lambda p: p.name)
def test_settings_sections_of_values_are_valid_gateway_settings(path: Path) -> None:
    values = load_yaml(CHART / "values.yaml")
    if path.name != "values.yaml":
        values = deep_merge(values, load_yaml(path))
    section = {k: values[k] for k in SETTINGS_SECTIONS if values.get(k)}
    Settings.model_validate(section)  # raises on an unknown or ill-typed key


def test_settings_check_rejects_a_misspelt_key() -> None:
    with pytest.raises(ValueError, match="queueSize"):
        Settings.model_validate({"shadow": {"queueSize": 10}})


@pytest.mark.parametrize("path", values_files(), ids=lambda p: p.name)
def test_inline_policies_are_yaml_files_with_valid_configmap_keys(path: Path) -> None:
    policies = load_yaml(path).get("policies") or {}
    for name, text in policies.items():
        assert re.fullmatch(r"[-._a-zA-Z0-9]+\.ya?ml", name), name
        document = yaml.safe_load(text) if isinstance(text, str) else text
        assert isinstance(document, dict), f"{name}: a policy file is a mapping"


def test_no_secret_value_in_values() -> None:
    for path in values_files():
        for key in (load_yaml(path).get("auth") or {}).get("keys") or []:
            assert "key" not in key, f"{path.name}: auth.keys[].key puts a secret in a ConfigMap"
