"""gateway.http.request_info: what policy selection sees of a request."""

from __future__ import annotations

from gateway.http.request_info import HIDDEN_HEADERS, request_info


def test_credentials_are_hidden_and_the_rest_is_read() -> None:
    headers = {b"authorization": b"Bearer k", b"api-key": b"a", b"x-api-key": b"x",
               b"cookie": b"c", b"x-team": b"blue", b"x-verity-policy": b"strict"}
    info = request_info(model="m", route="/v1/chat/completions", headers=headers,
                        principal=None, payload={"metadata": {"app": "docs"}, "stream": True})
    assert set(info.headers) == {"x-team", "x-verity-policy"}
    assert not {h.decode() for h in HIDDEN_HEADERS} & set(info.headers)
    assert info.metadata == {"app": "docs"} and info.stream is True
    assert info.requested_policy == "strict" and info.policy_selection is True
    assert info.tenant is None and info.key_name is None


def test_a_metadata_that_is_not_an_object_and_a_truthy_stream_are_ignored() -> None:
    info = request_info(model="m", route="/v1/messages", headers={}, principal=None,
                        payload={"metadata": ["x"], "stream": "yes"})
    assert info.metadata == {} and info.stream is False and info.requested_policy is None


def test_header_names_are_marked_lower_case_and_select_a_policy_by_header() -> None:
    from gateway.policy.loader import load_policy_text
    from gateway.policy.select import PolicySet, select_policy
    from gateway.types import LowerCaseHeaders

    info = request_info(model="m", route="/v1/chat/completions",
                        headers={b"x-verity-profile": b"audit", b"accept": b"*/*"},
                        principal=None, payload={})
    assert type(info.headers) is LowerCaseHeaders
    policies = PolicySet([load_policy_text(
        "name: a\nmatch: {headers: {X-Verity-Profile: audit}}\nlayers: [{name: length}]\n")])
    sel = select_policy(policies, info)
    assert sel is not None and sel.policy.name == "a" and sel.reason == "match"
    other = request_info(model="m", route="/v1/chat/completions", headers={},
                         principal=None, payload={})
    assert select_policy(policies, other) is None
