"""A relay whose policies need no worker process starts none until one does
(``gateway.modes.dispatch.needs_pool``): a shadow policy, candidates, or an inline
policy whose large verifications go to the pool. A reload that adds one starts them.
No timing is asserted: what is running, before and after the reload."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from gateway.modes.dispatch import needs_pool
from gateway.policy.store import PolicyStore
from gateway.settings import PoolConfig
from gateway.testing.servers import ServerThread
from modes.support import FIXED_JSON, FixedUpstream
from serving import GatewayFactory

KEYWORD = "layers: [{name: keyword, config: {block: [zzz]}}]\n"
INLINE = "mode: inline\ndefault: true\n" + KEYWORD
SHADOW = "mode: shadow\nmatch: {models: [fixed-*]}\npriority: 10\n" + KEYWORD
CAND = "mode: shadow\nmatch: {models: [never-*]}\n" + KEYWORD


def _policies(tmp_path: Path, files: dict[str, str]) -> PolicyStore:
    directory = tmp_path / "p"
    directory.mkdir()
    for name, text in files.items():
        (directory / f"{name}.yaml").write_text(text, encoding="utf-8")
    store = PolicyStore(directory)
    store.load()
    assert not store.errors, store.errors
    return store


@pytest.mark.parametrize(("files", "inline_min_bytes", "needed"), [
    ({}, 65536, False),  # no policy at all
    ({"inline": INLINE}, None, False),  # inline, never in a worker
    ({"inline": INLINE}, 65536, True),  # its large verifications run in a worker
    ({"inline": INLINE + "candidates: [cand]\n", "cand": CAND}, None, True),
    ({"shadow": SHADOW}, None, True),
])
def test_what_needs_the_worker_processes(tmp_path: Path, files: dict[str, str],
                                         inline_min_bytes: int | None, needed: bool) -> None:
    store = _policies(tmp_path, files)
    assert needs_pool(store.policies, PoolConfig(inline_min_bytes=inline_min_bytes)) is needed


@pytest.fixture(scope="module")
def fixed_upstream() -> Iterator[ServerThread]:
    with ServerThread(FixedUpstream()) as server:
        yield server


@pytest.mark.usefixtures("quick_policy_watch")
def test_the_pool_starts_once_a_reload_loads_a_policy_that_needs_it(
        make_gateway: GatewayFactory, tmp_path: Path, fixed_upstream: ServerThread,
        make_client: Callable[..., openai.OpenAI], wait_until: Callable[..., Any]) -> None:
    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "inline.yaml").write_text(INLINE, encoding="utf-8")
    audit = tmp_path / "audit.jsonl"
    gw = make_gateway(policies_dir=str(directory), readyz_detail="public",
                      reload_policies=True, audit={"path": str(audit)},
                      pool={"workers": 1, "inline_min_bytes": None},
                      upstreams=[{"name": "fixed", "base_url": fixed_upstream.url + "/v1"}])

    def pool() -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(gw.url + "/readyz", timeout=30).json()
        return data["shadow"]["pool"]

    client = make_client(gw)
    raw = client.chat.completions.with_raw_response.create(
        model="fixed-model", messages=[{"role": "user", "content": "Tell me."}])
    assert raw.headers["x-verity-mode"] == "inline"  # verified on the loop: no pool needed
    assert pool()["started"] is False and pool()["pids"] == []

    (directory / "shadow.yaml").write_text(SHADOW, encoding="utf-8")
    pids = wait_until(lambda: pool()["pids"], timeout=60.0, message="the workers")
    assert pool()["started"] is True
    raw = client.chat.completions.with_raw_response.create(
        model="fixed-model", messages=[{"role": "user", "content": "Tell me."}])
    assert raw.http_response.content == FIXED_JSON
    assert raw.headers["x-verity-policy"] == "shadow"
    audit_id = raw.headers["x-verity-audit-id"]

    def record() -> dict[str, Any] | None:
        import json
        lines = audit.read_text().splitlines() if audit.exists() else []
        return next((r for r in map(json.loads, lines) if r["audit_id"] == audit_id), None)

    rec = wait_until(record, timeout=60.0, message="the record")
    assert rec["shadow"]["result"] == "verified"
    assert rec["shadow"]["worker"] in pids and rec["shadow"]["worker"] != os.getpid()
