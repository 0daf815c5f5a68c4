"""The translators and the retry/balancing modules are pure: they import the standard
library, orjson and a few pure gateway modules, never an HTTP stack (checked from their
source, so a new import fails here before it drags aiohttp or starlette in)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE = [
    "gateway/upstream/retry.py", "gateway/upstream/balancer.py",
    "gateway/upstream/failover.py", "gateway/wire/anthropic_errors.py",
    "gateway/wire/anthropic_messages.py", "gateway/wire/anthropic_response.py",
    "gateway/wire/anthropic_stream.py",
]
ALLOWED = {"orjson", "gateway.errors", "gateway.wire.sse", "gateway.wire.anthropic_tables",
           "gateway.upstream.retry", "gateway.upstream.balancer",
           "gateway.wire.anthropic_errors", "gateway.wire.anthropic_response"}


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("module", PURE)
def test_only_pure_imports(module: str) -> None:
    bad = {name for name in imports(ROOT / module)
           if name.split(".")[0] not in sys.stdlib_module_names and name not in ALLOWED}
    assert not bad, f"{module} imports {sorted(bad)}"


def test_the_check_can_fail() -> None:
    assert "aiohttp" in imports(ROOT / "gateway/upstream/openai.py")
