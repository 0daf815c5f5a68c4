"""Fixtures for policy tests."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "policies"
    directory.mkdir()
    return directory


@pytest.fixture
def write(policy_dir: Path) -> Callable[[str, str], Path]:
    """``write("a.yaml", text)``: write dedented ``text`` into ``policy_dir``; return the path."""

    def _write(name: str, text: str) -> Path:
        path = policy_dir / name
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return _write
