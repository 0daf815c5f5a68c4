"""``gateway policy check`` as a user runs it: a subprocess, its output and exit code."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[2] / "policies"
Write = Callable[[str, str], Path]


def check(*paths: Path | str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", "policy", "check", *map(str, paths)],
                          capture_output=True, text=True, timeout=60, check=False)


def test_shipped_policies_pass() -> None:
    out = check(SHIPPED)
    assert out.returncode == 0, out.stderr
    assert f"OK {SHIPPED / 'default.yaml'} (default: shadow, default, layers:" in out.stdout
    assert out.stdout.count("OK ") == len(list(SHIPPED.glob("*.yaml")))


def test_a_single_file_is_checked_with_its_siblings() -> None:
    out = check(SHIPPED / "default.yaml")  # candidates: [grounding] lives beside it
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines() == [
        line for line in out.stdout.strip().splitlines() if "default.yaml" in line]


def test_errors_exit_1_with_file_line_and_key(write: Write) -> None:
    good = write("good.yaml", "layers: [{name: length}]\n")
    bad = write("bad.yaml", "layers:\n  - name: length\n    config: {min_chars: -1}\n")
    out = check(good.parent)
    assert out.returncode == 1
    assert f"OK {good} (good: shadow, layers: length)" in out.stdout
    assert f"{bad}:3: layers.0.config.min_chars:" in out.stderr
    out = check(good)
    assert out.returncode == 0 and "bad.yaml" not in out.stdout + out.stderr


def test_missing_path_and_empty_directory(tmp_path: Path) -> None:
    assert check(tmp_path / "nope.yaml").returncode == 1
    out = check(tmp_path)
    assert out.returncode == 0 and "no policy files" in out.stdout


def test_usage_error_without_paths() -> None:
    out = check()
    assert out.returncode == 2 and "PATH" in out.stderr


def test_check_shows_which_policies_are_enforced(tmp_path: Path) -> None:
    (tmp_path / "bound.yaml").write_text(
        "match: {tenants: [acme]}\nmode: inline\nlayers: [{name: length}]\n")
    out = check(tmp_path / "bound.yaml")
    assert f"OK {tmp_path / 'bound.yaml'} (bound: inline, enforced, layers: length)" in out.stdout
