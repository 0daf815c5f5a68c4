"""The package's shape, checked: which layers may import which, and no import cycles.

Imports are read with ``ast`` from the source (``if TYPE_CHECKING:`` blocks are
annotations only and are skipped). ``docs/architecture.md`` explains the layers.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gateway"

HTTP_AND_PROVIDERS = ("gateway.http", "gateway.modes", "gateway.upstream", "gateway.app",
                      "gateway.runtime", "gateway.pool", "gateway.testing", "starlette",
                      "aiohttp", "httpx",
                      "httpx2", "uvicorn", "openai", "anthropic")
"""What verification never reaches: HTTP, the relay, the providers, the composition root."""
LIBRARIES = ("gateway.text", "gateway.sources", "gateway.layers", "gateway.policy",
             "gateway.scoring")
"""Below verification: they know neither verification, nor telemetry, nor the audit."""
RULES = [
    (LIBRARIES, HTTP_AND_PROVIDERS + ("gateway.verify", "gateway.telemetry", "gateway.audit")),
    (("gateway.verify",), HTTP_AND_PROVIDERS + ("gateway.fleet", "redis")),
    (("gateway.fleet",), HTTP_AND_PROVIDERS),
    (("gateway.wire",), HTTP_AND_PROVIDERS + ("gateway.verify", "gateway.telemetry",
                                              "gateway.audit", "gateway.layers")),
    (("gateway.http",), ("gateway.modes", "gateway.verify", "gateway.app", "gateway.runtime",
                         "gateway.dashboard")),
    (("gateway.pool",), ("gateway.http", "gateway.modes", "gateway.app", "gateway.testing",
                         "aiohttp", "uvicorn", "starlette")),
    (("gateway.telemetry", "gateway.audit"),
     ("gateway.dashboard", "starlette", "gateway.http", "gateway.modes", "gateway.upstream", "gateway.app", "gateway.runtime",
      "gateway.testing", "gateway.verify", "gateway.layers", "gateway.policy")),
    (("gateway.dashboard",), ("gateway.modes", "gateway.verify", "gateway.runtime",
                              "gateway.upstream", "gateway.app", "gateway.layers",
                              "gateway.policy", "gateway.commands")),
    (("gateway.settings", "gateway.errors", "gateway.types", "gateway.redact"),
     HTTP_AND_PROVIDERS + ("gateway.verify", "gateway.telemetry", "gateway.audit",
                           "gateway.layers", "gateway.policy", "gateway.text",
                           "gateway.sources", "gateway.wire", "gateway.scoring")),
]
"""(packages, what no module in them may import). ``gateway.http`` knows the engine
only as a protocol: the lifespan (``gateway.app``) wires ``gateway.modes`` into it.
(``gateway.telemetry``'s aiohttp and httpx span hooks are its own business.)"""
EXCEPTIONS = {("gateway.settings.load", "gateway.policy.locate")}
"""Known crossings: the config file reuses the policy loader's YAML-with-line-numbers
parser (imported where it is used)."""
MAX_ROOT_MODULES = 12


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> list[tuple[str, Path]]:
    return sorted((module_name(p), p) for p in PACKAGE.rglob("*.py"))


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(path: Path, *, top_level_only: bool) -> Iterator[str]:
    """Modules ``path`` imports (absolute names; ``from x import y`` gives ``x`` and
    ``x.y``), outside ``if TYPE_CHECKING:``; only those run at import time (not inside
    a function) if ``top_level_only``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = module_name(path)
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[str] = []

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if _type_checking(node):
                for child in node.orelse:
                    self.visit(child)
            else:
                self.generic_visit(node)

        def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
            if not top_level_only:
                self.generic_visit(node)

        def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
            if not top_level_only:
                self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.extend(alias.name for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                anchor = parts[:len(parts) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.append(base)
            found.extend(f"{base}.{alias.name}" for alias in node.names)

    Visitor().visit(tree)
    yield from found


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _checked() -> list[tuple[str, Path, tuple[str, ...]]]:
    out = []
    for name, path in modules():
        forbidden = tuple(f for packages, bad in RULES if _under(name, packages) for f in bad)
        if forbidden:
            out.append((name, path, forbidden))
    return out


@pytest.mark.parametrize(("name", "path", "forbidden"), _checked(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_each_layer_imports_only_what_is_below_it(name: str, path: Path,
                                                  forbidden: tuple[str, ...]) -> None:
    bad = sorted({i for i in imports(path, top_level_only=False) if _under(i, forbidden)
                  and not any(name == n and _under(i, (e,)) for n, e in EXCEPTIONS)})
    assert not bad, f"{name} imports {bad}"


def test_only_the_fleet_package_imports_redis() -> None:
    """``redis`` is an optional extra: nothing outside ``gateway.fleet`` may need it."""
    bad = sorted(name for name, path in modules() if not _under(name, ("gateway.fleet",))
                 and any(_under(i, ("redis",)) for i in imports(path, top_level_only=False)))
    assert not bad, bad


def test_the_package_root_stays_small() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def test_no_import_cycle_between_modules() -> None:
    known = {name for name, _ in modules()}
    graph: dict[str, set[str]] = {}
    for name, path in modules():
        graph[name] = {i for i in imports(path, top_level_only=True) if i in known and i != name}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_every_module_imports_on_its_own() -> None:
    """Each module imported first in a fresh interpreter: no order-dependent import."""
    names = [name for name, _ in modules() if name != "gateway.__main__"]
    code = ("import importlib, sys\n"
            "bad = []\n"
            "for name in sys.argv[1:]:\n"
            "    for m in [k for k in sys.modules if k == 'gateway' or k.startswith('gateway.')]:\n"
            "        del sys.modules[m]\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except Exception as exc:\n"
            "        bad.append(f'{name}: {type(exc).__name__}: {exc}')\n"
            "print('\\n'.join(bad))\n"
            "sys.exit(1 if bad else 0)\n")
    # Every module still starts from no gateway module; the list is only split between
    # two interpreters run side by side (CI has two cores; the suite uses one).
    procs = [subprocess.Popen([sys.executable, "-c", code, *names[i::2]], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(2)]
    try:
        outputs = [proc.communicate(timeout=300) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert [proc.returncode for proc in procs] == [0, 0], "".join(o + e for o, e in outputs)


def test_the_package_imports() -> None:
    assert importlib.import_module("gateway").__version__
