"""PolicyStore: initial load, reload on edit, last good version on breakage, removal."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.policy.store import PolicyStore

Write = Callable[[str, str], Path]

GOOD = "layers:\n  - name: length\n    config: {min_chars: %d}\n"


def test_load_skips_non_policy_files_hidden_files_and_configmap_dirs(
        policy_dir: Path, write: Write) -> None:
    write("a.yaml", GOOD % 1)
    write("b.yml", GOOD % 2)
    write("notes.txt", "not a policy")
    write(".hidden.yaml", "broken: [")
    (policy_dir / "..2024_01_01_00_00_00.1").mkdir()
    (policy_dir / "..2024_01_01_00_00_00.1" / "c.yaml").write_text("broken: [")
    (policy_dir / "sub.yaml").mkdir()
    store = PolicyStore(policy_dir)
    store.load()
    assert sorted(store.policies) == ["a", "b"]
    assert dict(store.errors) == {}
    assert store.status()[0] is True


def test_broken_file_at_start_is_an_error_and_not_ready(policy_dir: Path, write: Write) -> None:
    write("a.yaml", GOOD % 1)
    bad = write("b.yaml", "layers:\n  - name: nope\n")
    store = PolicyStore(policy_dir)
    assert store.status()[0] is False  # not loaded yet
    store.load()
    assert list(store.policies) == ["a"]
    assert set(store.errors) == {str(bad)}
    assert f"{bad}:2: layers.0.name: unknown layer 'nope'" in store.errors[str(bad)]
    ready, detail = store.status()
    assert ready is False
    assert detail["broken"][str(bad)]["serving"] is None
    assert detail["broken"][str(bad)]["serving_last_good"] is False
    assert sorted(detail["policies"]) == ["a"]


def test_edit_break_fix_remove_cycle(policy_dir: Path, write: Write,
                                     caplog: pytest.LogCaptureFixture) -> None:
    path = write("a.yaml", GOOD % 1)
    store = PolicyStore(policy_dir)
    store.load()
    v1 = store.policies["a"]
    assert v1.layer("length").config.min_chars == 1  # type: ignore[attr-defined]
    assert store.reload() is False  # nothing changed

    write("a.yaml", GOOD % 2)  # same size: content hashing, not mtime/size, sees it
    assert store.reload() is True
    v2 = store.policies["a"]
    assert v2.version != v1.version
    assert v2.layer("length").config.min_chars == 2  # type: ignore[attr-defined]

    caplog.set_level(logging.ERROR, logger="gateway.policy")
    write("a.yaml", "layers:\n  - name: length\n    config: {min_chars: -1}\n")
    assert store.reload() is True
    assert store.policies["a"] is v2  # last good version stays live
    assert f"{path}:3: layers.0.config.min_chars" in store.errors[str(path)]
    ready, detail = store.status()
    assert ready is True  # everything that ever loaded is still served
    assert detail["broken"][str(path)] == {
        "error": store.errors[str(path)], "serving": v2.version, "serving_last_good": True}
    assert "last good version" in caplog.text and str(path) in caplog.text
    assert "layers.0.config.min_chars" in caplog.text

    caplog.clear()
    assert store.reload() is False  # still broken, unchanged: no new log line either
    assert caplog.text == ""

    write("a.yaml", GOOD % 3)
    assert store.reload() is True
    assert dict(store.errors) == {}
    assert store.policies["a"].layer("length").config.min_chars == 3  # type: ignore[attr-defined]
    assert store.status() == (True, store.status()[1])
    assert store.status()[1]["broken"] == {}

    path.unlink()
    assert store.reload() is True
    assert store.get("a") is None and len(store.policies) == 0


def test_added_file_is_picked_up(policy_dir: Path, write: Write) -> None:
    store = PolicyStore(policy_dir)
    store.load()
    assert store.status() == (True, store.status()[1]) and len(store.policies) == 0
    write("late.yaml", GOOD % 1)
    assert store.reload() is True
    assert store.get("late") is not None


def test_duplicate_names_error_for_the_later_file(policy_dir: Path, write: Write) -> None:
    write("a.yaml", "name: same\n" + GOOD % 1)
    later = write("b.yaml", "name: same\n" + GOOD % 2)
    store = PolicyStore(policy_dir)
    store.load()
    assert store.policies["same"].source == policy_dir / "a.yaml"
    assert "policy name 'same' is already used by" in store.errors[str(later)]
    assert store.errors[str(later)].startswith(f"{later}:1: name:")


def test_live_file_keeps_its_name_against_a_newcomer(policy_dir: Path, write: Write) -> None:
    write("z.yaml", "name: same\n" + GOOD % 1)
    store = PolicyStore(policy_dir)
    store.load()
    newcomer = write("a.yaml", "name: same\n" + GOOD % 2)  # sorts first, but arrives later
    store.reload()
    assert store.policies["same"].source == policy_dir / "z.yaml"
    assert str(newcomer) in store.errors


def test_two_defaults_error_for_the_later_file(policy_dir: Path, write: Write) -> None:
    write("a.yaml", "default: true\n" + GOOD % 1)
    later = write("b.yaml", "default: true\n" + GOOD % 2)
    store = PolicyStore(policy_dir)
    store.load()
    assert list(store.policies) == ["a"]
    assert store.errors[str(later)].startswith(f"{later}:1: default: more than one")


def test_unknown_candidates_are_an_error_but_the_policy_serves(
        policy_dir: Path, write: Write) -> None:
    path = write("a.yaml", "candidates: [b, ghost]\n" + GOOD % 1)
    write("b.yaml", GOOD % 2)
    store = PolicyStore(policy_dir)
    store.load()
    assert sorted(store.policies) == ["a", "b"]
    assert store.errors[str(path)].startswith(f"{path}:1: candidates.1: unknown policy 'ghost'")
    ready, detail = store.status()
    assert ready is True
    assert detail["broken"][str(path)]["serving_last_good"] is False
    assert [c.name for c in store.policies.candidates(store.policies["a"])] == ["b"]


def test_configmap_symlink_swap(policy_dir: Path) -> None:
    """Kubernetes mounts a ConfigMap as name -> ..data/name, ..data -> ..<timestamp>/."""
    def version(tag: str, min_chars: int) -> None:
        target = policy_dir / f"..{tag}"
        target.mkdir()
        (target / "a.yaml").write_text(GOOD % min_chars)
        tmp = policy_dir / "..data_tmp"
        tmp.symlink_to(target.name)
        os.replace(tmp, policy_dir / "..data")  # the atomic swap kubelet does

    version("v1", 1)
    (policy_dir / "a.yaml").symlink_to("..data/a.yaml")
    store = PolicyStore(policy_dir)
    store.load()
    assert list(store.policies) == ["a"]
    first = store.policies["a"].version
    version("v2", 2)
    assert store.reload() is True
    assert store.policies["a"].version != first
    assert dict(store.errors) == {}


def test_dangling_symlink_keeps_last_good(policy_dir: Path, write: Write) -> None:
    real = write("real.txt", GOOD % 1)
    link = policy_dir / "a.yaml"
    link.symlink_to(real.name)
    store = PolicyStore(policy_dir)
    store.load()
    good = store.policies["a"]
    real.unlink()
    assert store.reload() is True
    assert store.policies["a"] is good
    assert "cannot read" in store.errors[str(link)]


def test_missing_directory_is_not_ready(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "nowhere")
    store.load()
    ready, detail = store.status()
    assert ready is False
    assert str(tmp_path / "nowhere") in detail["broken"]


@pytest.mark.anyio
async def test_watch_picks_up_an_edit(policy_dir: Path, write: Write) -> None:
    write("a.yaml", GOOD % 1)
    store = PolicyStore(policy_dir)
    store.load()
    first = store.policies["a"].version
    task = asyncio.create_task(store.watch(interval=0.01))
    try:
        write("a.yaml", GOOD % 7)

        async def changed() -> None:
            while store.policies["a"].version == first:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(changed(), timeout=10)  # bounded wait for the event
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert store.policies["a"].layer("length").config.min_chars == 7  # type: ignore[attr-defined]


def test_unknown_upgrades_are_an_error_but_the_policy_serves(
        policy_dir: Path, write: Write) -> None:
    path = write("a.yaml", "match: {tenants: [acme]}\nallow_upgrade_to: [b, ghost]\n" + GOOD % 1)
    write("b.yaml", "allow_header_selection: true\n" + GOOD % 2)
    store = PolicyStore(policy_dir)
    store.load()
    assert sorted(store.policies) == ["a", "b"]
    assert store.errors[str(path)].startswith(
        f"{path}:2: allow_upgrade_to.1: unknown policy 'ghost'")
