"""Every shipped policy loads — alone and as the directory the gateway serves.

"Fix the policy, not the gate": a new file in ``policies/`` is picked up here
without touching this test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.policy.loader import load_policy_file, policy_files
from gateway.policy.select import select_policy
from gateway.policy.store import PolicyStore
from gateway.settings import default_policies_dir
from gateway.types import RequestInfo

SHIPPED = Path(__file__).resolve().parents[2] / "policies"
FILES = policy_files(SHIPPED)


def req(**kw: object) -> RequestInfo:
    return RequestInfo(model="gpt-4o", route="/v1/chat/completions",
                       **{"headers": {}, **kw})  # type: ignore[arg-type]


def test_shipped_directory_is_the_default_and_not_empty() -> None:
    assert default_policies_dir().resolve() == SHIPPED
    assert {p.name for p in FILES} >= {"default.yaml", "grounding.yaml", "strict-rag.yaml",
                                        "compliance.yaml"}


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_each_shipped_file_loads_alone(path: Path) -> None:
    policy = load_policy_file(path)
    assert policy.name == path.stem
    assert policy.spec.description, "shipped policies describe themselves"
    assert path.read_text().count("\n#") >= 3, "shipped policies are commented as documentation"


def test_shipped_directory_loads_as_one_set() -> None:
    store = PolicyStore(SHIPPED)
    store.load()
    assert dict(store.errors) == {}
    assert store.status()[0] is True
    assert sorted(store.policies) == sorted(p.stem for p in FILES)


def test_shipped_selection_behaviour() -> None:
    store = PolicyStore(SHIPPED)
    store.load()
    ps = store.policies
    # a fresh install audits everything in shadow and changes nothing
    defaults = [p for p in ps.values() if p.spec.default]
    assert [p.name for p in defaults] == ["default"]
    default = ps["default"]
    assert default.spec.mode == "shadow"
    assert {rl.name for rl in default.layers} <= {"grounding", "claims", "citations"}
    sel = select_policy(ps, req())
    assert sel is not None and (sel.policy.name, sel.reason) == ("default", "default")
    assert [c.name for c in sel.candidates] == ["grounding"]
    # only the default is a catch-all
    assert all(p.spec.match != default.spec.match for p in ps.values() if p is not default)
    # grounding: inline, model-free, header-selectable
    g = ps["grounding"]
    assert g.spec.mode == "inline" and g.spec.allow_header_selection
    assert {rl.name for rl in g.layers} == {"grounding", "claims", "citations"}
    assert (g.spec.actions.marginal.type, g.spec.actions.fail.type) == ("disclaimer", "block")
    assert select_policy(ps, req(requested_policy="grounding")).policy is g  # type: ignore[union-attr]
    # strict-rag: metadata verity=strict, regenerate (2) then block, buffered
    sel = select_policy(ps, req(metadata={"verity": "strict"}))
    assert sel is not None and sel.policy.name == "strict-rag"
    fail = sel.policy.spec.actions.fail
    assert fail.type == "regenerate" and fail.max_attempts == 2 and fail.fallback.type == "block"
    assert sel.policy.spec.streaming == "buffer"
    # compliance: by header, assessed risk, fail closed; outranks strict-rag
    sel = select_policy(ps, req(headers={"x-verity-profile": "compliance"},
                                metadata={"verity": "strict"}))
    assert sel is not None and sel.policy.name == "compliance"
    assert sel.policy.spec.risk.level == "assess" and sel.policy.spec.risk.profiles
    assert sel.policy.spec.on_error == "fail_closed"
