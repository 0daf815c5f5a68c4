"""Policy reload through the running server: a broken file keeps the last good version."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest
from serving import wait_until

from modes.conftest import PolicyGateway, StartGateway
from modes.support import verity_headers, write_policy

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import GatewayFactory


def _guard(word: str) -> str:
    return f"""
mode: inline
default: true
layers: [{{name: keyword, config: {{block: [{word}]}}}}]
actions: {{fail: {{type: block, message: "blocked"}}}}
"""


def _ask(client: openai.OpenAI, text: str) -> tuple[str | None, dict[str, str]]:
    raw = client.chat.completions.with_raw_response.create(
        model="scripted-small", messages=[{"role": "user", "content": text}])
    return raw.parse().choices[0].message.content, verity_headers(raw.headers)


def _version_of(gw: PolicyGateway, headers: dict[str, str]) -> str:
    """The policy version recorded for the request that got ``headers``."""
    audit_id = headers["x-verity-audit-id"]
    rec = wait_until(lambda: next((r for r in gw.audit() if r["audit_id"] == audit_id), None),
                     message="audit record")
    return str(rec["policy_version"])


def test_broken_reload_keeps_last_good_version(start_gateway: StartGateway, upstream: Any,
                                               make_client: Callable[..., openai.OpenAI]) -> None:
    gw = start_gateway({"guard": _guard("alpha")}, readyz_detail="public")  # forward mode
    client = make_client(gw.base_url)
    content, headers = _ask(client, "alpha")
    assert content == "blocked"
    good = _version_of(gw, headers)

    path = write_policy(gw.policies_dir, "guard", "mode: inline\nlayers: [\n")
    assert gw.engine.store.reload()
    content, headers = _ask(client, "alpha")
    assert content == "blocked" and headers["x-verity-policy"] == "guard"
    assert _version_of(gw, headers) == good  # still the old version
    ready = httpx.get(gw.url + "/readyz")
    assert ready.status_code == 200
    broken = ready.json()["broken"]
    assert list(broken) == [str(path)]
    assert broken[str(path)]["serving"] == good and broken[str(path)]["serving_last_good"]
    assert "invalid YAML" in broken[str(path)]["error"]

    write_policy(gw.policies_dir, "guard", _guard("beta"))
    assert gw.engine.store.reload()
    assert _ask(client, "alpha")[0] == "You said: alpha"
    content, headers = _ask(client, "beta")
    assert content == "blocked"
    assert _version_of(gw, headers) != good
    assert httpx.get(gw.url + "/readyz").json()["broken"] == {}


@pytest.mark.usefixtures("quick_policy_watch")
def test_watcher_picks_up_edits(start_gateway: StartGateway, upstream: Any,
                               make_client: Callable[..., openai.OpenAI],
                               wait_until: Callable[..., Any]) -> None:
    gw = start_gateway({"guard": _guard("alpha")}, reload_policies=True,
                       readyz_detail="public")
    client = make_client(gw.base_url)
    write_policy(gw.policies_dir, "guard", "layers: [{name: nope}]\n")
    detail = wait_until(lambda: httpx.get(gw.url + "/readyz").json()["broken"],
                        message="broken file reported")
    assert "unknown layer 'nope'" in next(iter(detail.values()))["error"]
    assert _ask(client, "alpha")[0] == "blocked"
    write_policy(gw.policies_dir, "guard", _guard("beta"))
    wait_until(lambda: _ask(client, "alpha")[0] == "You said: alpha", message="reloaded")


@pytest.mark.parametrize("exists", [False, True])
def test_missing_or_empty_policies_dir_is_ready_pass_through(
        make_gateway: GatewayFactory, tmp_path: Path, upstream: Any, exists: bool,
        make_client: Callable[..., openai.OpenAI]) -> None:
    directory = tmp_path / "policies"
    if exists:
        directory.mkdir()
    gw = make_gateway(policies_dir=str(directory), reload_policies=False)
    ready = httpx.get(gw.url + "/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=[{"role": "user", "content": "hi"}])
    assert raw.parse().choices[0].message.content == "You said: hi"
    assert verity_headers(raw.headers) == {}
    gw.stop()
