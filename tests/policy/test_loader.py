"""Strict loading: every error names file, dotted key and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gateway.layers.keyword import KeywordConfig, KeywordLayer
from gateway.layers.length import LengthConfig, LengthLayer
from gateway.policy.loader import PolicyError, load_policy_file, load_policy_text


def load(text: str, source: str = "p.yaml") -> object:
    return load_policy_text(textwrap.dedent(text).lstrip("\n"), source)


def error(text: str, source: str = "p.yaml") -> PolicyError:
    with pytest.raises(PolicyError) as info:
        load(text, source)
    return info.value


def only(err: PolicyError) -> PolicyError:
    assert len(err.errors) == 1, err.describe()
    return err.errors[0]


def test_minimal_policy_resolves_layers_and_typed_configs() -> None:
    p = load_policy_text(textwrap.dedent("""
        layers:
          - name: length
            config: {min_chars: 5, max_chars: 50}
          - name: keyword
            id: no-secrets
            config: {block: [password]}
    """), "x.yaml", name="x")
    assert p.name == "x"
    assert [(rl.key, rl.name) for rl in p.layers] == [("length", "length"),
                                                      ("no-secrets", "keyword")]
    assert p.layer("length").cls is LengthLayer
    assert p.layer("length").config == LengthConfig(min_chars=5, max_chars=50)
    assert p.layer("no-secrets").cls is KeywordLayer
    assert isinstance(p.layer("no-secrets").config, KeywordConfig)
    assert p.layer("no-secrets").spec.id == "no-secrets"
    with pytest.raises(KeyError, match="no-secrets"):
        p.layer("nope")


def test_name_in_file_beats_the_given_name_and_version_is_a_content_hash() -> None:
    a = load_policy_text("name: chosen\nlayers: [{name: length}]\n", name="stem")
    b = load_policy_text("name: chosen\nlayers: [{name: length}]  \n", name="stem")
    assert a.name == "chosen"
    assert a.version != b.version
    assert a.version == load_policy_text("name: chosen\nlayers: [{name: length}]\n").version


def test_file_name_is_the_default_name(tmp_path: Path) -> None:
    path = tmp_path / "my-policy.yaml"
    path.write_text("layers: [{name: length}]\n")
    p = load_policy_file(path)
    assert (p.name, p.source) == ("my-policy", path)


def test_unknown_top_level_key_names_line_and_suggests() -> None:
    e = only(error("""
        layers: [{name: length}]
        mdoe: inline
    """))
    assert (e.file, e.key, e.line) == ("p.yaml", "mdoe", 2)
    assert "unknown key" in e.message and "did you mean 'mode'" in e.message
    assert str(e).startswith("p.yaml:2: mdoe: unknown key")


def test_nested_unknown_key_and_wrong_type() -> None:
    err = error("""
        layers: [{name: length}]
        match:
          models: [gpt-4o]
          tenant: [a]
        sample_rate: lots
    """)
    got = {(e.key, e.line) for e in err.errors}
    assert got == {("match.tenant", 4), ("sample_rate", 5)}
    tenant = next(e for e in err.errors if e.key == "match.tenant")
    assert "did you mean 'tenants'" in tenant.message


def test_out_of_range_value_in_a_list_item() -> None:
    e = only(error("""
        layers:
          - name: length
          - name: keyword
            weight: -1
    """))
    assert (e.key, e.line) == ("layers.1.weight", 4)
    assert "greater than or equal to 0" in e.message


def test_discriminated_action_error_points_at_the_written_key() -> None:
    e = only(error("""
        layers: [{name: length}]
        actions:
          fail:
            type: regenerate
            max_attempts: 9
    """))
    assert (e.key, e.line) == ("actions.fail.max_attempts", 5)


def test_missing_layers_points_at_the_file() -> None:
    e = only(error("description: no layers\n"))
    assert e.key == "layers" and "required" in e.message.lower()


def test_unknown_layer_lists_known_names() -> None:
    e = only(error("""
        layers:
          - name: length
          - name: groundng
    """))
    assert (e.key, e.line) == ("layers.1.name", 3)
    assert "unknown layer 'groundng'" in e.message
    for known in ("grounding", "keyword", "length"):
        assert known in e.message


def test_layer_config_is_validated_by_the_layers_own_config() -> None:
    err = error("""
        layers:
          - name: length
            config:
              min_chars: -3
              max_char: 10
          - name: keyword
            config:
              block: ["/([unclosed/"]
    """)
    got = {e.key: e for e in err.errors}
    assert set(got) == {"layers.0.config.min_chars", "layers.0.config.max_char",
                        "layers.1.config.block"}
    assert got["layers.0.config.min_chars"].line == 4
    assert got["layers.0.config.max_char"].line == 5
    assert "did you mean 'max_chars'" in got["layers.0.config.max_char"].message
    assert got["layers.1.config.block"].line == 8
    assert "invalid regex" in got["layers.1.config.block"].message


def test_layer_config_model_validator_error_names_the_config() -> None:
    e = only(error("""
        layers:
          - name: length
            config: {min_chars: 10, max_chars: 5}
    """))
    assert e.key == "layers.0.config" and e.line == 3
    assert "max_chars (5) < min_chars (10)" in e.message


def test_duplicate_layer_ids_and_unknown_profile_layers() -> None:
    e = only(error("""
        layers:
          - name: length
          - name: length
    """))
    assert e.key == "layers" and e.line == 1 and "unique" in e.message
    e = only(error("""
        layers: [{name: length}]
        risk:
          profiles:
            high: {layers: [length, nli], min_confidence: 0.9}
    """))
    assert e.key == "risk.profiles.high.layers" and e.line == 4 and "nli" in e.message


def test_duplicate_yaml_keys_are_errors() -> None:
    e = only(error("""
        layers: [{name: length}]
        mode: inline
        mode: shadow
    """))
    assert (e.key, e.line) == ("mode", 3) and "duplicate key" in e.message


@pytest.mark.parametrize("text, line, needle", [
    ("", None, "empty policy file"),
    ("# only a comment\n", None, "empty policy file"),
    ("- name: length\n", 1, "top level must be a mapping"),
    ("just a string\n", 1, "top level must be a mapping"),
    ("layers: [{name: length}\nmode: inline\n", 2, "invalid YAML"),
    ("layers:\n  - name: length\n bad: indent\n", 3, "invalid YAML"),
    ("a: 1\n---\nb: 2\n", 2, "invalid YAML"),
])
def test_unusable_files(text: str, line: int | None, needle: str) -> None:
    e = only(error(text, "bad.yaml"))
    assert e.file == "bad.yaml" and e.line == line and needle in e.message, str(e)


def test_default_policy_may_not_have_a_match() -> None:
    e = only(error("""
        default: true
        match: {models: [gpt-*]}
        layers: [{name: length}]
    """))
    assert (e.key, e.line) == ("match", 2)


def test_policy_names_must_be_header_safe() -> None:
    e = only(error("name: two words\nlayers: [{name: length}]\n"))
    assert (e.key, e.line) == ("name", 1)


def test_layer_ids_must_be_header_safe() -> None:
    # ids travel in x-verity-layers: a CR/LF made every response of the policy fail
    e = only(error('layers:\n  - {name: length}\n  - {name: length, id: "a\\r\\nx-evil: 1"}\n'))
    assert (e.key, e.line) == ("layers.1.id", 3)
    assert "x-verity-layers" in e.message
    assert load("layers: [{name: length, id: not-empty.v2_1}]").layers[0].key == "not-empty.v2_1"


def test_all_errors_are_reported_at_once() -> None:
    err = error("""
        mdoe: inline
        layers:
          - name: nope
          - name: length
            config: {min_chars: x}
    """)
    assert [e.key for e in err.errors] == ["mdoe", "layers.0.name", "layers.1.config.min_chars"]
    assert err.describe().count("\n") == 2
    assert str(err) == str(err.errors[0])


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(PolicyError, match="not UTF-8"):
        load_policy_file(path)


@pytest.mark.parametrize("text, key, words", [
    ("match: {metadata: {verity: g}}\nenforce: true\n", "enforce", "clients select it"),
    ("match: {headers: {x-p: c}}\nenforce: false\n", "enforce", "clients select it"),
    ("allow_upgrade_to: [x]\n", "allow_upgrade_to", "only an enforced policy"),
    ("default: true\nallow_upgrade_to: [x]\n", "allow_upgrade_to", "only an enforced policy"),
    ("match: {tenants: [a]}\nenforce: false\nallow_upgrade_to: [x]\n", "allow_upgrade_to",
     "only an enforced policy"),
    ("name: p\nmatch: {tenants: [a]}\nallow_upgrade_to: [p]\n", "allow_upgrade_to",
     "cannot list itself"),
])
def test_enforce_and_upgrades_are_checked_at_load(text: str, key: str, words: str) -> None:
    e = only(error(text + "layers: [{name: length}]\n"))
    assert e.key == key and words in e.message, e.describe()
    assert e.line == text.splitlines().index(
        next(ln for ln in text.splitlines() if ln.startswith(key))) + 1


@pytest.mark.parametrize("text, enforced", [
    ("", False),                                    # a catch-all
    ("default: true\n", False),
    ("default: true\nenforce: true\n", True),
    ("match: {tenants: [acme]}\n", True),           # bound to a tenant: the docs' example
    ("match: {keys: [ci-*]}\n", True),
    ("match: {models: [gpt-4o*]}\n", True),
    ("match: {routes: [/v1/chat/*]}\n", True),
    ("match: {models: [gpt-4o*]}\nenforce: false\n", False),
    ("enforce: true\n", True),
    ("match: {tenants: [acme], metadata: {verity: s}}\n", False),  # the client opts in
])
def test_which_policies_are_enforced(text: str, enforced: bool) -> None:
    p = load(text + "layers: [{name: length}]\n")
    assert p.spec.enforced is enforced  # type: ignore[attr-defined]
