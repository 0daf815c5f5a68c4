"""``gateway policy check PATH...``: validate policy files without serving.

A directory is checked as the gateway would load it (one set: unique names, one
default, known ``candidates``). A file is checked together with the policy files
beside it, so its ``candidates`` and name clashes are judged against the set it
will be served in; only the named file is reported. With ``--config FILE`` (the
gateway's config, read as ``gateway serve --config`` reads it, environment
included) a regenerate ``fallback_model`` that no configured upstream serves is
an error too. Exit status 1 if anything is wrong, 2 if the config cannot be
loaded, else 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.policy.store import Route

__all__ = ["add_parser", "check", "run_check"]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "policy", help="work with policy files",
        description="Policy file tools. See docs/policies.md.")
    psub = p.add_subparsers(dest="policy_command", required=True, metavar="SUBCOMMAND")
    c: argparse.ArgumentParser = psub.add_parser(
        "check", help="validate policy files or directories without serving",
        description="Load each policy file strictly (schema, layer names, each layer's "
                    "config) and the set it belongs to (unique names, one default, known "
                    "candidates). Prints OK or every error as file:line: key: message. "
                    "With --config, also that each regenerate fallback_model is routed "
                    "to a configured upstream.")
    c.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                   help="policy file (*.yaml, *.yml) or directory of them")
    c.add_argument("--config", metavar="FILE",
                   help="the gateway's config file: also check that every regenerate "
                        "fallback_model is routed to a configured upstream")
    c.set_defaults(func=run_check)


def check(paths: list[Path], route: Route | None = None) -> tuple[list[str], list[str]]:
    """(OK lines, error lines) for ``paths``; ``route`` as for :func:`assemble`."""
    from gateway.policy.loader import PolicyError, load_policy_text, policy_files
    from gateway.policy.store import FileState, assemble

    ok: list[str] = []
    bad: list[str] = []
    for path in paths:
        if path.is_dir():
            directory, report = path, None
        elif path.exists():
            directory, report = path.parent, str(path)
        else:
            bad.append(f"{path}: no such file or directory")
            continue
        try:
            files = policy_files(directory)
        except OSError as exc:
            bad.append(f"{directory}: cannot list: {exc.strerror or exc}")
            continue
        if report is not None:
            same = [f for f in files if f.resolve() == path.resolve()]
            if same:
                report = str(same[0])
            else:
                files.append(path)  # a file checked by name, whatever its name
        states: dict[str, FileState] = {}
        for file in files:
            st = FileState()
            try:
                st.text = file.read_text(encoding="utf-8")
                st.parsed = load_policy_text(st.text, str(file), name=file.stem, path=file)
            except (OSError, UnicodeDecodeError) as exc:
                st.error = PolicyError(str(file), "", None, f"cannot read: {exc}")
            except PolicyError as exc:
                st.error = exc
            states[str(file)] = st
        live, errors = assemble(states, route=route)
        if report is None and not states:
            ok.append(f"OK {directory} (no policy files: the gateway would pass everything "
                      f"through)")
        for name in sorted(states) if report is None else [report]:
            if name in errors:
                bad.append(errors[name])
            else:
                p = live[name]
                layers = ", ".join(layer.key for layer in p.layers)
                extra = (", default" if p.spec.default else "") + (
                    ", enforced" if p.spec.enforced else "")
                ok.append(f"OK {name} ({p.name}: {p.spec.mode}{extra}, layers: {layers})")
    return ok, bad


def run_check(args: argparse.Namespace) -> int:
    route: Route | None = None
    if args.config:
        from gateway.settings import ConfigError, load_settings
        try:
            settings = load_settings(args.config)
        except ConfigError as exc:
            print(f"gateway policy check: {exc}", file=sys.stderr)
            return 2
        route = settings.route if settings.upstreams else None
    ok, bad = check(list(args.paths), route)
    for line in ok:
        print(line)
    for line in bad:
        print(line, file=sys.stderr)
    if bad:
        print(f"gateway policy check: {len(bad)} file(s) with errors", file=sys.stderr)
        return 1
    return 0
