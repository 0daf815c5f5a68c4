"""A policy file being written is not served half-written (issue 10, item 8).

A slow, in-place write of a policy went live for 1,711 requests while only its
first half was on disk: the half parsed, and it lacked the rule that protected the
tenant. While serving, the watcher now applies a changed file only once a later
poll sees it unchanged, and holds back a changed file that does not end with a
newline (it looks cut short), keeping the last good version live. Atomic renames
are the documented way to deploy (docs/policies.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from serving import wait_until

from gateway.policy.store import PolicyStore

OLD = """\
mode: inline
default: true
layers:
  - name: keyword
    id: alpha
    config: {block: [alpha]}
actions: {fail: {type: block, message: "blocked"}}
"""
# The new version blocks beta as well. Its first part, cut inside the second layer's
# `id`, still parses: a keyword layer with no entries, which blocks nothing.
NEW = """\
mode: inline
default: true
layers:
  - name: keyword
    id: beta
    config: {block: [beta]}
  - name: keyword
    id: alpha
    config: {block: [alpha]}
actions: {fail: {type: block, message: "blocked"}, marginal: {type: block, message: "blocked"}}
"""
CUT = NEW.index("id: alpha") + len("id: al")
PROBE = """\
mode: inline
match: {models: ["probe-*"]}
layers: [{name: length}]
"""


def ask(client: openai.OpenAI, text: str, model: str = "scripted-small") -> Any:
    return client.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": text}])


@pytest.mark.usefixtures("quick_policy_watch")
def test_a_file_cut_mid_write_is_not_served(make_gateway: Callable[..., Any], upstream: Any,
                                           tmp_path: Path,
                                           make_client: Callable[..., openai.OpenAI]) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    guard = policies / "guard.yaml"
    guard.write_text(OLD)
    gw = make_gateway(policies_dir=str(policies), reload_policies=True)
    client = make_client(gw)
    assert ask(client, "alpha").parse().choices[0].message.content == "blocked"

    # A slow writer has written the first part, in place, and pauses.
    with guard.open("w") as f:
        f.write(NEW[:CUT])
    # Then another file appears. Once the watcher serves it, it has read the cut file
    # too, on the same pass or an earlier one (the cut file was complete first).
    (policies / "probe.yaml").write_text(PROBE)
    wait_until(lambda: ask(client, "hi", model="probe-1").headers.get("x-verity-policy")
               == "probe", timeout=20, message="probe policy served")

    raw = ask(client, "alpha")
    assert raw.parse().choices[0].message.content == "blocked"  # the last good version
    assert raw.headers["x-verity-layers"] == "alpha=0.0000:fail"
    engine = gw.app.proxy.engine  # type: ignore[union-attr]
    assert "does not end with a newline" in engine.store.errors[str(guard)]

    with guard.open("a") as f:  # the writer finishes
        f.write(NEW[CUT:])
    wait_until(lambda: ask(client, "beta").parse().choices[0].message.content == "blocked",
               timeout=20, message="the finished file served")
    assert ask(client, "alpha").parse().choices[0].message.content == "blocked"
    assert str(guard) not in engine.store.errors
    gw.stop()


def test_a_change_goes_live_only_once_a_poll_sees_it_unchanged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The watcher's passes, one by one (``poll`` is what ``watch`` calls each second)."""
    guard = tmp_path / "guard.yaml"
    guard.write_text(OLD)
    store = PolicyStore(tmp_path)
    store.load()
    v1 = store.policies["guard"].version

    caplog.set_level(logging.INFO, logger="gateway.policy")
    guard.write_text("")  # open(…, "w") truncates first: an empty file, for a moment
    assert not store.poll() and store.policies["guard"].version == v1
    assert store.status()[1]["pending"] == [str(guard)]
    guard.write_text(NEW[:NEW.index("actions")])  # a first part that ends a line, parses
    assert not store.poll() and store.policies["guard"].version == v1  # changed again
    guard.write_text(NEW)
    assert not store.poll() and store.policies["guard"].version == v1
    assert store.poll()  # unchanged since the last pass: now it is applied
    v2 = store.policies["guard"]
    assert v2.version != v1 and [rl.key for rl in v2.layers] == ["beta", "alpha"]
    assert store.status()[1]["pending"] == [] and dict(store.errors) == {}
    # The half-written states were never reported as errors, nor served.
    assert "problem" not in caplog.text and caplog.text.count("reloaded") == 1

    guard.unlink()  # a delete-and-copy deploy: gone for a moment
    assert not store.poll() and store.policies["guard"] is v2
    guard.write_text(NEW)
    assert not store.poll() and store.policies["guard"] is v2
    guard.unlink()
    assert not store.poll() and store.policies["guard"] is v2
    assert store.poll() and "guard" not in store.policies  # gone on two passes: removed


def test_a_manual_reload_applies_at_once(tmp_path: Path) -> None:
    guard = tmp_path / "guard.yaml"
    guard.write_text(OLD)
    store = PolicyStore(tmp_path)
    store.load()
    guard.write_text(NEW)
    assert store.reload() and [rl.key for rl in store.policies["guard"].layers] == [
        "beta", "alpha"]
