"""Policy selection: header, match (priority, criteria), default, sampling."""

from __future__ import annotations

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
