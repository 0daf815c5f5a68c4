"""Static checks of the Dockerfile and .dockerignore (no Docker engine needed).

The image cannot be built on the development machines, so these tests read the
Dockerfile and check what matters in production: a multi-stage build onto
``python:3.11-slim``, a non-root numeric ``USER`` in force before the entrypoint,
a Python ``HEALTHCHECK`` on ``/healthz`` at the port the ``CMD`` serves and the
image ``EXPOSE``s, exec-form ``ENTRYPOINT``/``CMD`` (so SIGTERM reaches the gateway
and it can drain), the shipped policies copied to ``GATEWAY_POLICIES_DIR``, and a
build context that lets in what ``COPY`` needs and keeps ``.git``/``.venv``/secrets out.

Each check returns problems as text; the mutation tests below feed broken variants
of the real Dockerfile through the same checks to prove they can fail.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"

RUNTIME_BASE = "python:3.11-slim"


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case, e.g. "COPY"
    args: str  # everything after the keyword, continuation lines joined
    line: int


@dataclass
class Stage:
    base: str  # FROM image with global ARG defaults substituted
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def find(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def parse(text: str) -> list[Stage]:
    """Split a Dockerfile into stages of instructions (comments and continuations handled)."""
    logical: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not buf):
            continue  # comment lines are dropped, even inside a continuation
        if not buf:
            start = number
        if stripped.endswith("\\"):
            buf.append(stripped[:-1].strip())
            continue
        buf.append(stripped)
        logical.append((start, " ".join(p for p in buf if p)))
        buf = []
    if buf:
        logical.append((start, " ".join(buf)))

    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for number, line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        args = args.strip()
        if keyword == "ARG" and not stages:
            name, _, default = args.partition("=")
            global_args[name.strip()] = default.strip().strip('"')
            continue
        if keyword == "FROM":
            words = [w for w in args.split() if not w.startswith("--")]
            base = re.sub(r"\$\{(\w+)\}|\$(\w+)",
                          lambda m: global_args.get(m.group(1) or m.group(2), ""), words[0])
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=base, name=name))
            continue
        if not stages:
            continue
        stages[-1].instructions.append(Instruction(keyword, args, number))
    return stages


def exec_form(args: str) -> list[str] | None:
    """The JSON array of an exec-form instruction, or None for shell form."""
    if not args.startswith("["):
        return None
    try:
        value = json.loads(args)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def split_flags(args: str) -> tuple[list[tuple[str, str]], str]:
    """``--from=build --chown=a src dst`` → ([("from", "build"), ("chown", "a")], "src dst")."""
    flags: list[tuple[str, str]] = []
    rest = args
    while rest.startswith("--"):
        token, _, rest = rest.partition(" ")
        name, _, value = token[2:].partition("=")
        flags.append((name, value))
        rest = rest.lstrip()
    return flags, rest


def flag(flags: list[tuple[str, str]], name: str) -> str | None:
    return next((value for key, value in flags if key == name), None)


def env_of(stage: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for ins in stage.find("ENV"):
        tokens = shlex.split(ins.args)
        if tokens and "=" not in tokens[0]:  # legacy form: ENV KEY value with spaces
            env[tokens[0]] = " ".join(tokens[1:])
            continue
        for token in tokens:
            key, _, value = token.partition("=")
            env[key] = value
    return env


def option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


# ---------------------------------------------------------------------------- checks


def problems(text: str) -> list[str]:
    """Everything wrong with a Dockerfile for the gateway; empty when it is fine."""
    found: list[str] = []
    stages = parse(text)
    if len(stages) < 2:
        return ["not a multi-stage build: expected a build stage and a runtime stage"]
    final = stages[-1]
    earlier = {s.name for s in stages[:-1] if s.name} | {str(i) for i in range(len(stages) - 1)}

    if not (final.base == RUNTIME_BASE or final.base.startswith(RUNTIME_BASE + "@")):
        found.append(f"runtime stage must be FROM {RUNTIME_BASE}, got {final.base!r}")
    if not any("pip wheel" in i.args or "-m build" in i.args
               for s in stages[:-1] for i in s.find("RUN")):
        found.append("no earlier stage builds a wheel (pip wheel / python -m build)")
    copies_from_build = any(flag(split_flags(i.args)[0], "from") in earlier
                            for i in final.find("COPY"))
    mount_sources = {
        dict(kv.partition("=")[::2] for kv in value.split(",")).get("from")
        for i in final.find("RUN") for key, value in split_flags(i.args)[0] if key == "mount"
    }
    mounts_from_build = bool(mount_sources & earlier)
    installs = any("pip install" in i.args for i in final.find("RUN"))
    if not (installs and (copies_from_build or mounts_from_build)):
        found.append("runtime stage does not pip install the wheels from the build stage")
    # `gateway audit …` (report, serve, replay) needs DuckDB: the [audit] extra.
    if not any("pip install" in i.args and re.search(r"\[[^]]*\baudit\b", i.args)
               for i in final.find("RUN")):
        found.append("runtime stage does not install the [audit] extra (gateway audit needs it)")

    order = {i.keyword: n for n, i in enumerate(final.instructions)}  # last occurrence
    users = final.find("USER")
    if not users:
        found.append("runtime stage has no USER: the gateway would run as root")
    else:
        user = users[-1].args.split(":")[0]
        if user in ("root", "0"):
            found.append(f"USER {users[-1].args} is root")
        elif not user.isdigit():
            found.append(f"USER {user!r} is not numeric: Kubernetes runAsNonRoot cannot verify it")
        for keyword in ("ENTRYPOINT", "CMD"):
            if keyword in order and order["USER"] > order[keyword]:
                found.append(f"USER must come before {keyword}")

    entrypoint = exec_form(final.find("ENTRYPOINT")[-1].args) if final.find("ENTRYPOINT") else None
    cmd = exec_form(final.find("CMD")[-1].args) if final.find("CMD") else None
    if entrypoint != ["gateway"]:
        found.append('ENTRYPOINT must be the exec form ["gateway"] (PID 1 receives SIGTERM)')
    if cmd is None or not cmd or cmd[0] != "serve":
        found.append('CMD must be an exec form starting with "serve"')
        cmd = []
    cmd_port = option(cmd, "--port")
    if option(cmd, "--host") != "0.0.0.0":
        found.append("CMD must serve on --host 0.0.0.0 to be reachable from outside")

    exposed = {p.split("/")[0] for i in final.find("EXPOSE") for p in i.args.split()}
    if cmd_port is None:
        found.append("CMD gives no --port")
    elif cmd_port not in exposed:
        found.append(f"CMD serves port {cmd_port} but EXPOSE lists {sorted(exposed)}")

    checks = final.find("HEALTHCHECK")
    if not checks:
        found.append("no HEALTHCHECK in the runtime stage")
    else:
        _, rest = split_flags(checks[-1].args)
        probe = rest.removeprefix("CMD").strip()
        argv = exec_form(probe) or shlex.split(probe)
        if rest.upper().startswith("NONE") or not argv:
            found.append("HEALTHCHECK is disabled")
        else:
            if "python" not in Path(argv[0]).name:
                found.append(f"HEALTHCHECK must use python (slim has no curl), uses {argv[0]!r}")
            url = re.search(r"https?://[^/'\"\s]+?(?::(\d+))?(/[^'\"\s]*)", " ".join(argv))
            if not url or url.group(2) != "/healthz":
                found.append("HEALTHCHECK does not request /healthz")
            elif url.group(1) != cmd_port:
                found.append(f"HEALTHCHECK probes port {url.group(1)}, CMD serves {cmd_port}")

    env = env_of(final)
    for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"):
        if env.get(name) != "1":
            found.append(f"runtime stage must set {name}=1")
    policies_dir = env.get("GATEWAY_POLICIES_DIR")
    if not policies_dir:
        found.append("runtime stage must set GATEWAY_POLICIES_DIR")
    copied_to = [
        rest.split()[-1].rstrip("/")
        for i in final.find("COPY")
        for flags, rest in [split_flags(i.args)]
        if flag(flags, "from") is None
        and any(s.rstrip("/") == "policies" for s in rest.split()[:-1])
    ]
    if not copied_to:
        found.append("runtime stage does not COPY the shipped policies/")
    elif policies_dir and policies_dir.rstrip("/") not in copied_to:
        found.append(f"policies copied to {copied_to} but GATEWAY_POLICIES_DIR={policies_dir}")
    return found


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def ignored(path: str, dockerignore: str) -> bool:
    """Whether Docker leaves ``path`` (relative, '/'-separated) out of the build context.

    Docker's rule: patterns apply in order, the last one that matches the path or one
    of its parent folders wins, and a ``!`` pattern lets the path back in.
    """
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    result = False
    for raw in dockerignore.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        regex = _glob_regex(line.lstrip("!").strip("/").removeprefix("./"))
        if any(regex.match(c) for c in candidates):
            result = not negate
    return result


def context_problems(dockerfile: str, dockerignore: str, root: Path) -> list[str]:
    """COPY sources exist and reach the build context; private files stay out of it."""
    found: list[str] = []
    for stage in parse(dockerfile):
        for ins in stage.find("COPY") + stage.find("ADD"):
            flags, rest = split_flags(ins.args)
            if flag(flags, "from") is not None:
                continue
            for source in rest.split()[:-1]:
                if source in (".", "./"):
                    continue
                if not (root / source).exists():
                    found.append(f"line {ins.line}: COPY source {source} does not exist")
                elif ignored(source, dockerignore):
                    found.append(f"line {ins.line}: COPY source {source} is in .dockerignore")
    for needed in ("pyproject.toml", "gateway/__init__.py", "policies/example.yaml"):
        if ignored(needed, dockerignore):
            found.append(f".dockerignore leaves out {needed}, which the build needs")
    for private in (".git/config", ".venv/bin/python", ".env", "tests/conftest.py",
                    "gateway/__pycache__/cli.cpython-311.pyc", "verity-audit.jsonl"):
        if not ignored(private, dockerignore):
            found.append(f".dockerignore lets {private} into the build context")
    return found


# ----------------------------------------------------------------------------- tests


def test_dockerfile_has_the_essentials() -> None:
    assert problems(DOCKERFILE.read_text(encoding="utf-8")) == []


def test_build_context_is_what_the_build_needs() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert context_problems(text, DOCKERIGNORE.read_text(encoding="utf-8"), ROOT) == []


def _replace(old: str, new: str) -> Callable[[str], str]:
    def mutate(text: str) -> str:
        assert old in text, f"mutation target {old!r} not in Dockerfile; update the test"
        return text.replace(old, new)
    return mutate


def _drop_lines(prefix: str) -> Callable[[str], str]:
    def mutate(text: str) -> str:
        lines = text.splitlines()
        kept = [line for line in lines if not line.startswith(prefix)]
        assert len(kept) < len(lines), f"no line starts with {prefix!r}; update the test"
        return "\n".join(kept)
    return mutate


def _move_user_to_end(text: str) -> str:
    user = next(line for line in text.splitlines() if line.startswith("USER "))
    return _drop_lines("USER ")(text) + "\n" + user + "\n"


def _single_stage(text: str) -> str:
    runtime = text.index("FROM ${PYTHON_IMAGE} AS runtime")
    return text[:text.index("FROM ")] + text[runtime:]


MUTATIONS: list[tuple[str, Callable[[str], str], str]] = [
    ("no USER", _drop_lines("USER "), "no USER"),
    ("USER after ENTRYPOINT", _move_user_to_end, "before ENTRYPOINT"),
    ("root USER", _replace("USER 10001:10001", "USER root"), "is root"),
    ("named USER", _replace("USER 10001:10001", "USER verity"), "not numeric"),
    ("no HEALTHCHECK", _drop_lines("HEALTHCHECK"), "no HEALTHCHECK"),
    ("wrong health path", _replace("/healthz'", "/health'"), "/healthz"),
    ("curl healthcheck", _replace('CMD ["python", "-c",', 'CMD ["curl", "-fs",'), "python"),
    ("probe other port", _replace("127.0.0.1:8080", "127.0.0.1:9000"), "probes port"),
    ("exposes other port", _replace("EXPOSE 8080", "EXPOSE 9000"), "EXPOSE"),
    ("serves other port", _replace('"--port", "8080"', '"--port", "9000"'), "EXPOSE"),
    ("loopback host", _replace('"--host", "0.0.0.0"', '"--host", "127.0.0.1"'), "0.0.0.0"),
    ("shell-form entrypoint", _replace('ENTRYPOINT ["gateway"]', "ENTRYPOINT gateway"),
     "exec form"),
    ("no policies copy", _drop_lines("COPY policies/"), "policies/"),
    ("policies elsewhere", _replace("/etc/verity/policies/\n", "/srv/policies/\n"),
     "GATEWAY_POLICIES_DIR"),
    ("buffered output", _replace("PYTHONUNBUFFERED=1", "PYTHONUNBUFFERED=0"),
     "PYTHONUNBUFFERED"),
    ("single stage", _single_stage, "multi-stage"),
    ("wrong base", _replace("ARG PYTHON_IMAGE=python:3.11-slim", "ARG PYTHON_IMAGE=python:3.11"),
     RUNTIME_BASE),
    ("no wheel install", _replace("pip install --no-index", "echo"), "pip install"),
    ("no audit extra", _replace("'verity-gateway[redis,audit]'", "'verity-gateway[redis]'"),
     "[audit] extra"),
]


@pytest.mark.parametrize(("mutate", "expected"), [(m, e) for _, m, e in MUTATIONS],
                         ids=[name for name, _, _ in MUTATIONS])
def test_checks_catch_a_broken_dockerfile(mutate: Callable[[str], str], expected: str) -> None:
    broken = mutate(DOCKERFILE.read_text(encoding="utf-8"))
    found = problems(broken)
    assert any(expected in p for p in found), found


@pytest.mark.parametrize(("dockerignore", "expected"), [
    ("*\n!pyproject.toml\n!gateway/\n", "policies/"),  # COPY policies/ would fail
    ("*\n!pyproject.toml\n!gateway/\n!policies/\n!.git/\n", ".git/config"),
    ("*\n!pyproject.toml\n!gateway/\n!policies/\n!.env\n", ".env"),
    (".git\n", ".venv/bin/python"),  # a deny-list that forgets the venv
])
def test_checks_catch_a_broken_dockerignore(dockerignore: str, expected: str) -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    found = context_problems(text, dockerignore, ROOT)
    assert any(expected in p for p in found), found


def test_parser_reads_continuations_comments_and_args() -> None:
    stages = parse(
        "ARG BASE=python:3.11-slim\n"
        "FROM ${BASE} AS a\n"
        "RUN one \\\n"
        "    # a comment inside a continuation\n"
        "    two\n"
        "FROM $BASE\n"
        'ENV A=1 B="x y"\n'
        "ENV C legacy value\n"
    )
    assert [(s.base, s.name) for s in stages] == [("python:3.11-slim", "a"),
                                                 ("python:3.11-slim", None)]
    assert stages[0].instructions[0].args == "one two"
    assert env_of(stages[1]) == {"A": "1", "B": "x y", "C": "legacy value"}


@pytest.mark.parametrize(("path", "expected"), [
    ("gateway/cli.py", False),
    ("gateway/__pycache__/cli.cpython-311.pyc", True),
    ("tests/test_x.py", True),
    ("pyproject.toml", False),
])
def test_dockerignore_matcher_follows_docker_rules(path: str, expected: bool) -> None:
    rules = "*\n!pyproject.toml\n!gateway/\n**/__pycache__\n"
    assert ignored(path, rules) is expected
