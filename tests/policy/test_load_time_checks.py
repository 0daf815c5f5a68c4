"""Problems caught at load time rather than on a request: redact regexes, template
placeholders, ``marginal_at`` vs ``min_confidence``, unrouted ``fallback_model``;
one error per problem (no echo on ``layers``); risk profiles' default confidence."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.policy.loader import Policy, PolicyError, load_policy_text
from gateway.policy.models import TEMPLATE_PLACEHOLDERS
from gateway.policy.store import PolicyStore
from gateway.settings import Settings
from gateway.verify.actions import fill_template
from gateway.verify.outcome import Verification
from gateway.verify.pipeline import min_confidence_for
from gateway.policy.profiles import RISK_PROFILES

Write = Callable[[str, str], Path]


def load(text: str) -> Policy:
    return load_policy_text(textwrap.dedent(text).lstrip("\n"), "p.yaml")


def errors(text: str) -> list[str]:
    with pytest.raises(PolicyError) as info:
        load(text)
    return [str(e) for e in info.value.errors]


# ---- 1. telemetry.redact: compiled at load ------------------------------------------------

def test_invalid_redact_regex_is_a_load_error_naming_the_key_and_the_regex_error() -> None:
    assert errors("""
        layers: [{name: length}]
        telemetry:
          record_content: true
          redact: ['\\bok\\b', "(unclosed"]
    """) == ["p.yaml:4: telemetry.redact.1: invalid regex '(unclosed': "
             "missing ), unterminated subpattern at position 0"]


def test_valid_redact_regexes_load() -> None:
    load(r"""
        layers: [{name: length}]
        telemetry: {record_content: true, redact: ['\b\d{8,17}\b', 'secret-\w+']}
    """)


def test_hot_reload_of_a_bad_redact_regex_keeps_the_last_good_version(
        policy_dir: Path, write: Write) -> None:
    path = write("a.yaml", "layers: [{name: length}]\n")
    store = PolicyStore(policy_dir)
    store.load()
    good = store.policies["a"].version
    write("a.yaml", "layers: [{name: length}]\ntelemetry: {redact: ['[a-']}\n")
    assert store.reload() is True
    assert store.policies["a"].version == good
    assert store.errors[str(path)].startswith(
        f"{path}:2: telemetry.redact.0: invalid regex '[a-': unterminated character set")


# ---- 2. template placeholders --------------------------------------------------------------

def test_placeholder_list_is_what_fill_template_fills() -> None:
    v = Verification(risk_level="medium", layers=[], verdict="fail", score=0.25,
                     min_confidence=0.8, reasons=["r"], failed_claims=["c"])
    template = " ".join("{" + p + "}" for p in TEMPLATE_PLACEHOLDERS)
    assert "{" not in fill_template(template, v, "pol")
    assert fill_template(template, v, "pol") == "r 0.2500 fail pol c"


@pytest.mark.parametrize("key,action", [
    ("actions.marginal.template", "marginal: {type: disclaimer, template: 'x {nosuch} y'}"),
    ("actions.fail.message", "fail: {type: block, message: 'x {nosuch} y'}"),
    ("actions.fail.feedback_template",
     "fail: {type: regenerate, feedback_template: 'x {nosuch} y'}"),
    ("actions.fail.fallback.template",
     "fail: {type: regenerate, fallback: {type: disclaimer, template: 'x {nosuch} y'}}"),
])
def test_unknown_template_placeholder_is_a_load_error(key: str, action: str) -> None:
    (err,) = errors(f"""
        layers: [{{name: length}}]
        actions:
          {action}
    """)
    assert err.startswith(f"p.yaml:3: {key}: unknown placeholder {{nosuch}}")
    assert "{reasons}, {score}, {verdict}, {policy}, {failed_claims}" in err


def test_near_miss_placeholder_suggests_the_real_one() -> None:
    (err,) = errors("""
        layers: [{name: length}]
        actions: {marginal: {type: disclaimer, template: "({ reasons }, {Score})"}}
    """)
    assert "unknown placeholders { reasons }, {Score}" in err
    assert "did you mean {reasons}, {score}?" in err


def test_known_placeholders_and_other_literal_braces_are_accepted() -> None:
    load("""
        layers: [{name: length}]
        actions:
          marginal: {type: disclaimer, template: '{reasons} {score} {verdict} {policy} {}'}
          fail: {type: block, message: 'failed: {failed_claims} {"code": 1} {1} { x'}
    """)


# ---- 3. marginal_at must not exceed min_confidence -------------------------------------------

def test_marginal_at_above_decision_min_confidence_is_an_error() -> None:
    (err,) = errors("""
        layers: [{name: length}]
        decision:
          min_confidence: 0.6
          marginal_at: 0.7
    """)
    assert err.startswith("p.yaml:4: decision.marginal_at: 0.7 is above "
                          "decision.min_confidence 0.6")


def test_only_a_written_marginal_at_is_checked_as_for_profiles() -> None:
    """A default ``marginal_at`` above ``min_confidence`` (no marginal band) loaded
    before the check existed; it still does, for the decision as for a risk profile —
    one rule in both places: only what the file writes is checked."""
    for text in ("""
        layers: [{name: length}]
        decision: {min_confidence: 0.3}
    """, """
        layers: [{name: length}]
        risk:
          level: low
          profiles: {low: {layers: [length], min_confidence: 0.3}}
    """):
        assert load(text).spec.decision.marginal_at == 0.5


def test_marginal_at_equal_to_min_confidence_is_allowed() -> None:
    load("""
        layers: [{name: length}]
        decision: {min_confidence: 0.6, marginal_at: 0.6}
    """)


def test_marginal_at_above_a_reachable_profile_min_confidence_is_an_error() -> None:
    (err,) = errors("""
        layers: [{name: length}]
        risk:
          level: assess
          profiles:
            low: {layers: [length], min_confidence: 0.6}
        decision: {marginal_at: 0.65}
    """)
    assert err.startswith("p.yaml:6: decision.marginal_at: 0.65 is above "
                          "risk.profiles.low.min_confidence 0.6")


def test_profiles_a_fixed_level_never_uses_are_not_compared() -> None:
    load("""
        layers: [{name: length}]
        risk:
          level: high
          profiles:
            low: {layers: [length], min_confidence: 0.6}
        decision: {marginal_at: 0.65}
    """)


# ---- 5. one error per problem ---------------------------------------------------------------

@pytest.mark.parametrize("item,key", [
    ("weight: -1", "layers.0.weight"),
    ("timeout_ms: 0", "layers.0.timeout_ms"),
    ("calibration: {a: 1}", "layers.0.calibration.b"),
    ("id: 'bad id'", "layers.0.id"),
])
def test_a_bad_layer_key_gives_only_its_own_error(item: str, key: str) -> None:
    (err,) = errors(f"""
        layers:
          - name: length
            {item}
    """)
    assert err.startswith(f"p.yaml:3: {key}: ")


def test_empty_layers_is_still_an_error() -> None:
    (err,) = errors("layers: []\n")
    assert err.startswith("p.yaml:1: layers: Tuple should have at least 1 item")


# ---- 6. risk profile min_confidence defaults to the level's seed value -----------------------

def test_profile_min_confidence_defaults_to_the_seed_value_of_its_level() -> None:
    p = load("""
        layers: [{name: length}]
        risk:
          level: assess
          profiles:
            low: {layers: [length]}
            critical: {layers: [length], min_confidence: 0.99}
    """)
    assert min_confidence_for(p, "low") == RISK_PROFILES["low"].min_confidence == 0.7
    assert min_confidence_for(p, "critical") == 0.99


# ---- 4. fallback_model no upstream serves ----------------------------------------------------

REGEN = """
layers: [{name: length}]
actions:
  marginal: {type: disclaimer}
  fail: {type: regenerate, fallback_model: %s}
"""


def test_store_reports_a_fallback_model_no_upstream_serves_and_keeps_serving(
        policy_dir: Path, write: Write) -> None:
    settings = Settings.model_validate({"upstreams": [
        {"name": "oa", "base_url": "http://a/v1", "models": ["gpt-*"]},
        {"name": "an", "base_url": "http://b/v1", "models": ["claude-*"]}]})
    path = write("a.yaml", REGEN % "llama-3")
    write("b.yaml", REGEN % "claude-3-5-haiku")  # routed by a glob: no false error
    store = PolicyStore(policy_dir, route=settings.route)
    store.load()
    assert sorted(store.policies) == ["a", "b"]
    assert list(store.errors) == [str(path)]
    assert store.errors[str(path)] == (
        f"{path}:4: actions.fail.fallback_model: no configured upstream serves model "
        f"'llama-3' (upstream `models` globs decide routing): the fallback attempt would "
        f"fail at request time")
    ready, detail = store.status()
    assert ready is True and detail["broken"][str(path)]["serving"] is not None


def test_store_without_routing_does_not_judge_fallback_models(
        policy_dir: Path, write: Write) -> None:
    write("a.yaml", REGEN % "llama-3")
    store = PolicyStore(policy_dir)
    store.load()
    assert not store.errors


def policy_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", "policy", "check", *args],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin"})


def test_policy_check_with_config_reports_unrouted_fallback_models(
        tmp_path: Path, policy_dir: Path, write: Write) -> None:
    path = write("a.yaml", REGEN % "llama-3")
    config = tmp_path / "gateway.yaml"
    config.write_text("upstreams:\n  - {name: oa, base_url: 'http://a/v1', models: ['gpt-*']}\n",
                      encoding="utf-8")
    assert policy_check(str(policy_dir)).returncode == 0  # no config: not judged
    out = policy_check("--config", str(config), str(policy_dir))
    assert out.returncode == 1
    assert f"{path}:4: actions.fail.fallback_model: no configured upstream serves " \
           f"model 'llama-3'" in out.stderr
    config.write_text("upstreams:\n  - {name: any, base_url: 'http://a/v1'}\n",
                      encoding="utf-8")  # models: ['*'] serves everything
    assert policy_check("--config", str(config), str(policy_dir)).returncode == 0


def test_policy_check_with_a_broken_config_says_so(tmp_path: Path, policy_dir: Path,
                                                   write: Write) -> None:
    write("a.yaml", REGEN % "llama-3")
    config = tmp_path / "gateway.yaml"
    config.write_text("upstreams: [{name: x}]\n", encoding="utf-8")
    out = policy_check("--config", str(config), str(policy_dir))
    assert out.returncode == 2
    assert "base_url" in out.stderr


def test_the_served_gateway_reports_an_unrouted_fallback_model_in_readyz(
        policy_dir: Path, write: Write) -> None:
    """The running server checks with its own upstreams' routing (gateway serve)."""
    import httpx

    from gateway.app import create_app
    from gateway.testing.servers import ServerThread
    from gateway.settings import load_settings

    path = write("a.yaml", REGEN % "llama-3")
    settings = load_settings(environ={}, overrides={
        "upstreams": [{"name": "oa", "base_url": "http://127.0.0.1:9/v1", "models": ["gpt-*"]}],
        "policies_dir": str(policy_dir), "audit": {"path": None},
        "readyz_detail": "public"})  # forward mode: /readyz detail is off by default
    with ServerThread(create_app(settings)) as gw:
        ready = httpx.get(gw.url + "/readyz")
    assert ready.status_code == 200
    broken = ready.json()["broken"]
    assert list(broken) == [str(path)] and "fallback_model" in broken[str(path)]["error"]


# ---- risk profiles never drop a layer silently (issue 17) ----------------------------------

def test_a_profile_naming_a_layer_the_policy_lacks_is_a_load_error_naming_the_profile() -> None:
    (msg,) = errors("""
        layers: [{name: length}]
        risk:
          level: assess
          profiles:
            high: {layers: [length, fact-decomposition]}
    """)
    assert "risk.profiles.high.layers names layers not in `layers`: fact-decomposition" in msg


def test_an_unregistered_layer_is_a_load_error_naming_it() -> None:
    (msg,) = errors("""
        layers: [{name: length}, {name: no-such-layer}]
    """)
    assert "unknown layer 'no-such-layer'" in msg
