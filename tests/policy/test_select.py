"""Policy selection: header, match (priority, criteria), default, sampling, and the
rules that keep a client from escaping an enforced policy (docs/policies.md, *Who may
choose the policy*)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from gateway.errors import InvalidRequest, PermissionDenied
from gateway.policy.loader import Policy, load_policy_text
from gateway.policy.select import PolicySet, Selection, select_policy
from gateway.types import RequestInfo


def policy(name: str, body: str = "") -> Policy:
    return load_policy_text(f"name: {name}\n{body}\nlayers: [{{name: length}}]\n")


def req(model: str = "gpt-4o", **kw: Any) -> RequestInfo:
    kw.setdefault("route", "/v1/chat/completions")
    kw.setdefault("headers", {})
    return RequestInfo(model=model, **kw)


def pset(*policies: Policy) -> PolicySet:
    return PolicySet(policies)


def chosen(policies: Mapping[str, Policy], info: RequestInfo, **kw: Any) -> tuple[str, str] | None:
    sel = select_policy(policies, info, **kw)
    return None if sel is None else (sel.policy.name, sel.reason)


def never() -> float:
    raise AssertionError("rand() must not be called for sample_rate 1.0")


def test_nothing_loaded_is_pass_through() -> None:
    assert select_policy(pset(), req()) is None
    assert select_policy({}, req()) is None


def test_default_when_nothing_matches() -> None:
    ps = pset(policy("d", "default: true"), policy("m", "match: {models: [claude-*]}"))
    assert chosen(ps, req("gpt-4o"), rand=never) == ("d", "default")
    assert chosen(ps, req("claude-3"), rand=never) == ("m", "match")


def test_no_default_and_no_match_is_none() -> None:
    assert select_policy(pset(policy("m", "match: {models: [claude-*]}")), req()) is None


def test_empty_match_matches_everything_and_beats_default() -> None:
    ps = pset(policy("d", "default: true"), policy("all"))
    assert chosen(ps, req()) == ("all", "match")


def test_highest_priority_wins_ties_by_name() -> None:
    ps = pset(policy("b", "priority: 5"), policy("a", "priority: 5"), policy("z", "priority: 9"),
              policy("low", "priority: -1"))
    assert chosen(ps, req()) == ("z", "match")
    ps = pset(policy("b", "priority: 5"), policy("a", "priority: 5"))
    assert chosen(ps, req()) == ("a", "match")
    assert chosen({"b": ps["b"], "a": ps["a"]}, req()) == ("a", "match")  # plain mapping too


@pytest.mark.parametrize("match, yes, no", [
    ("{models: ['gpt-4o*', 'o1']}", req("gpt-4o-mini"), req("gpt-3.5")),
    ("{models: ['gpt-4o*', 'o1']}", req("o1"), req("O1")),  # case-sensitive globs
    ("{routes: ['/v1/chat/*']}", req(), req(route="/v1/embeddings")),
    ("{tenants: [acme, 'team-*']}", req(tenant="team-x"), req(tenant="other")),
    ("{tenants: [acme]}", req(tenant="acme"), req(tenant=None)),
    ("{keys: ['ci-*']}", req(key_name="ci-7"), req(key_name=None)),
    ("{headers: {X-Verity-Profile: 'comp*'}}", req(headers={"x-verity-profile": "compliance"}),
     req(headers={"x-verity-profile": "other"})),
    ("{headers: {x-env: '*'}}", req(headers={"X-Env": "prod"}), req(headers={})),
    ("{metadata: {verity: strict}}", req(metadata={"verity": "strict"}),
     req(metadata={"verity": "strictish"})),
    ("{metadata: {verity: strict}}", req(metadata={"verity": "strict"}), req(metadata={})),
    ("{metadata: {tier: '2', beta: 'true'}}", req(metadata={"tier": 2, "beta": True}),
     req(metadata={"tier": 2, "beta": False})),
    ("{models: ['gpt-*'], tenants: [acme]}", req(tenant="acme"), req("claude", tenant="acme")),
])
def test_match_criteria(match: str, yes: RequestInfo, no: RequestInfo) -> None:
    ps = pset(policy("p", f"match: {match}"))
    assert chosen(ps, yes) == ("p", "match")
    assert select_policy(ps, no) is None


def test_header_selects_an_allowing_policy_even_if_it_does_not_match() -> None:
    ps = pset(policy("d", "default: true"),
              policy("g", "allow_header_selection: true\nmatch: {metadata: {v: g}}"))
    assert chosen(ps, req(requested_policy="g"), rand=never) == ("g", "header")


def test_header_for_a_policy_that_forbids_it_is_403() -> None:
    ps = pset(policy("secret"))
    with pytest.raises(PermissionDenied) as info:
        select_policy(ps, req(requested_policy="secret"))
    assert info.value.status == 403 and "secret" in info.value.message
    assert info.value.code == "policy_not_allowed"


def test_header_naming_an_unknown_policy_is_400_with_the_param() -> None:
    ps = pset(policy("open", "allow_header_selection: true"), policy("closed"))
    with pytest.raises(InvalidRequest) as info:
        select_policy(ps, req(requested_policy="nope"))
    assert info.value.status == 400 and info.value.param == "x-verity-policy"
    assert "'nope'" in info.value.message and "open" in info.value.message
    assert "closed" not in info.value.message  # only selectable names are disclosed


def test_empty_header_value_counts_as_absent() -> None:
    ps = pset(policy("d", "default: true"))
    assert chosen(ps, req(requested_policy="  ")) == ("d", "default")


def test_header_selection_is_not_sampled() -> None:
    ps = pset(policy("h", "allow_header_selection: true\nsample_rate: 0"))
    assert chosen(ps, req(requested_policy="h"), rand=never) == ("h", "header")


@pytest.mark.parametrize("rate, draw, sampled", [
    (0.25, 0.1, True), (0.25, 0.25, False), (0.25, 0.9, False), (0.0, 0.0, False),
])
def test_sampling_uses_rand(rate: float, draw: float, sampled: bool) -> None:
    calls: list[float] = []

    def rand() -> float:
        calls.append(draw)
        return draw

    for body in (f"sample_rate: {rate}", f"default: true\nsample_rate: {rate}"):
        ps = pset(policy("p", body))
        sel = select_policy(ps, req(), rand=rand)
        assert (sel is not None) is sampled
    assert len(calls) == 2


def test_unsampled_match_does_not_fall_through_to_default() -> None:
    ps = pset(policy("d", "default: true"), policy("m", "sample_rate: 0.5"))
    assert select_policy(ps, req(), rand=lambda: 0.99) is None


def test_candidates_resolved_by_name_missing_skipped() -> None:
    ps = pset(policy("d", "default: true\ncandidates: [g, ghost, d]"), policy("g", "match: {models: [x]}"))
    sel = select_policy(ps, req())
    assert isinstance(sel, Selection)
    assert [c.name for c in sel.candidates] == ["g"]
    assert select_policy({"d": ps["d"], "g": ps["g"]}, req()) == sel


def test_policyset_is_a_mapping() -> None:
    ps = pset(policy("a"), policy("b"))
    assert dict(ps) == {"a": ps["a"], "b": ps["b"]} and len(ps) == 2 and "a" in ps
    assert ps.get("zz") is None


# ---- bindings: a client's choice never replaces an enforced assigned policy ----------------

BOUND = "mode: inline\nmatch: {tenants: [acme]}"
OPTIN = "allow_header_selection: true\nmatch: {metadata: {verity: g}}\npriority: 5"
PROFILE = "allow_header_selection: true\nmatch: {headers: {x-verity-profile: c}}\npriority: 20"


def escapes() -> list[RequestInfo]:
    return [req(tenant="acme", requested_policy="g"),
            req(tenant="acme", metadata={"verity": "g"}),
            req(tenant="acme", headers={"x-verity-profile": "c"})]


def refusal(policies: Mapping[str, Policy], info: RequestInfo) -> PermissionDenied:
    with pytest.raises(PermissionDenied) as err:
        select_policy(policies, info)
    return err.value


@pytest.mark.parametrize("n", range(3))
def test_a_tenant_binding_refuses_every_client_choice(n: int) -> None:
    ps = pset(policy("bound", BOUND), policy("g", OPTIN), policy("c", PROFILE),
              policy("d", "default: true"))
    info = escapes()[n]
    err = refusal(ps, info)
    assert (err.status, err.code) == (403, "policy_enforced")
    assert "'bound'" in err.message and "enforced by default: matched by tenants" in err.message
    assert err.param == ["x-verity-policy", "metadata", "x-verity-profile"][n]
    assert chosen(ps, req(tenant="acme")) == ("bound", "match")  # no choice: the binding
    assert chosen(ps, req(tenant="other", metadata={"verity": "g"})) == ("g", "match")


def test_the_binding_is_decided_before_sampling() -> None:
    ps = pset(policy("bound", BOUND + "\nsample_rate: 0.5"), policy("g", OPTIN))
    for draw in (0.1, 0.9):
        with pytest.raises(PermissionDenied):
            select_policy(ps, req(tenant="acme", requested_policy="g"), rand=lambda d=draw: d)


def test_enforce_false_lets_clients_replace_an_assigned_policy() -> None:
    ps = pset(policy("m", "match: {models: [gpt-*]}\nenforce: false\npriority: 99"),
              policy("g", OPTIN), policy("c", PROFILE))
    assert chosen(ps, req(requested_policy="g")) == ("g", "header")
    assert chosen(ps, req(metadata={"verity": "g"})) == ("g", "match")  # despite priority 99
    assert chosen(ps, req()) == ("m", "match")


def test_allow_upgrade_to_lists_the_only_choices_past_a_binding() -> None:
    ps = pset(policy("bound", BOUND + "\nallow_upgrade_to: [c]"), policy("g", OPTIN),
              policy("c", PROFILE))
    assert chosen(ps, req(tenant="acme", headers={"x-verity-profile": "c"})) == ("c", "match")
    assert chosen(ps, req(tenant="acme", requested_policy="c")) == ("c", "header")
    err = refusal(ps, req(tenant="acme", requested_policy="g"))
    assert err.code == "policy_enforced" and "allow_upgrade_to): c" in err.message


def test_catch_alls_are_offers_unless_enforced() -> None:
    for catch_all in ("default: true", "mode: inline"):  # the default, or an empty match
        ps = pset(policy("all", catch_all), policy("g", OPTIN))
        assert chosen(ps, req(requested_policy="g")) == ("g", "header")
        ps = pset(policy("all", catch_all + "\nenforce: true"), policy("g", OPTIN))
        err = refusal(ps, req(requested_policy="g"))
        assert err.code == "policy_enforced" and "enforce: true" in err.message


def test_choosing_the_assigned_policy_itself_is_allowed() -> None:
    ps = pset(policy("bound", BOUND + "\nallow_header_selection: true"))
    assert chosen(ps, req(tenant="acme", requested_policy="bound")) == ("bound", "header")


# ---- the per-key grant ----------------------------------------------------------------------


def test_a_caller_without_the_grant_is_refused_any_choice() -> None:
    ps = pset(policy("g", OPTIN), policy("c", PROFILE), policy("d", "default: true"))
    for info in (req(requested_policy="g"), req(requested_policy="no-such"),
                 req(metadata={"verity": "g"}), req(headers={"x-verity-profile": "c"})):
        err = refusal(ps, dataclasses.replace(info, key_name="app", policy_selection=False))
        assert err.code == "policy_selection_not_allowed" and "'app'" in err.message
    assert chosen(ps, req(key_name="app", policy_selection=False)) == ("d", "default")


# ---- offers: a selectable policy is offered only where its match allows ----------------------


def test_header_selection_of_another_tenants_policy_reads_as_unknown() -> None:
    ps = pset(policy("beta", "allow_header_selection: true\nmatch: {tenants: [beta]}"),
              policy("g", OPTIN))
    with pytest.raises(InvalidRequest) as info:
        select_policy(ps, req(tenant="gamma", requested_policy="beta"))
    assert info.value.code == "unknown_policy"
    assert info.value.message.endswith("policies that may be selected: g")
    assert chosen(ps, req(tenant="beta", requested_policy="beta")) == ("beta", "header")
    with pytest.raises(InvalidRequest):  # forward mode: no tenant, nothing tenant-scoped
        select_policy(ps, req(requested_policy="beta"))


def test_header_selection_outside_the_policys_models_is_403() -> None:
    ps = pset(policy("small", "allow_header_selection: true\nmatch: {models: [small]}"))
    err = refusal(ps, req("large", requested_policy="small"))
    assert (err.code, err.param) == ("policy_not_offered", "x-verity-policy")
    assert chosen(ps, req("small", requested_policy="small")) == ("small", "header")


def test_a_long_header_value_is_not_echoed_whole() -> None:
    with pytest.raises(InvalidRequest) as info:
        select_policy(pset(), req(requested_policy="x" * 10_000))
    assert len(info.value.message) < 300


# ---- metadata is bounded before it is matched ------------------------------------------------


def deep(levels: int) -> dict[str, Any]:
    value: Any = "g"
    for _ in range(levels - 1):
        value = {"v": value}
    return {"verity": value}


@pytest.mark.parametrize("metadata, code", [
    (deep(1020), "metadata_too_deep"),
    (deep(17), "metadata_too_deep"),
    ({"a": [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}, "metadata_too_deep"),
    ({f"k{i}": i for i in range(1025)}, "metadata_too_large"),
    ({"a": list(range(1024))}, "metadata_too_large"),
])
def test_hostile_metadata_is_a_400(metadata: dict[str, Any], code: str) -> None:
    ps = pset(policy("g", OPTIN))
    with pytest.raises(InvalidRequest) as info:
        select_policy(ps, req(metadata=metadata))
    assert (info.value.status, info.value.code, info.value.param) == (400, code, "metadata")


def test_metadata_at_the_bounds_is_matched() -> None:
    ps = pset(policy("m", "match: {metadata: {verity: '*'}}"))
    assert chosen(ps, req(metadata=deep(16))) == ("m", "match")
    assert chosen(ps, req(metadata={"verity": "x", **{f"k{i}": i for i in range(1023)}})) == (
        "m", "match")


def test_a_selection_is_one_value_per_policy_and_reason_within_a_policy_set() -> None:
    ps = pset(policy("d", "default: true\ncandidates: [c]"),
              policy("c", "match: {models: [none]}"), policy("m", "match: {models: [gpt-*]}"))
    first, again = select_policy(ps, req(), rand=never), select_policy(ps, req(), rand=never)
    assert first is again and first is not None and first.policy.name == "m"
    other = select_policy(ps, req(model="x"), rand=never)
    assert other is not None and (other.policy.name, other.reason) == ("d", "default")
    assert [c.name for c in other.candidates] == ["c"]
    reloaded = pset(policy("d", "default: true"), policy("c", "match: {models: [none]}"))
    sel = select_policy(reloaded, req(model="x"), rand=never)
    assert sel is not None and sel.candidates == () and sel is not other


def test_chosen_policies_are_skipped_only_when_none_of_their_signals_is_present() -> None:
    from gateway.types import LowerCaseHeaders

    ps = pset(policy("d", "default: true"),
              policy("h", "match: {headers: {x-verity-profile: audit}}"),
              policy("two", "priority: 5\nmatch: {headers: {X-Team: a, x-env: prod}}"),
              policy("md", "match: {metadata: {verity: strict}}"))
    assert ps.chosen_headers == {"x-verity-profile", "x-team", "x-env"}
    lower = LowerCaseHeaders
    assert chosen(ps, req(headers=lower({"user-agent": "sdk"})), rand=never) == ("d", "default")
    assert chosen(ps, req(headers=lower({"x-verity-profile": "audit"}))) == ("h", "match")
    assert chosen(ps, req(headers=lower({"x-team": "a", "x-env": "prod"}))) == ("two", "match")
    assert chosen(ps, req(headers=lower({"x-team": "a"}))) == ("d", "default")  # needs both
    assert chosen(ps, req(headers=lower({}), metadata={"verity": "strict"})) == ("md", "match")
    # a hand-built mapping with other spellings is still read through (no skip)
    assert chosen(ps, req(headers={"X-Verity-Profile": "audit"})) == ("h", "match")
