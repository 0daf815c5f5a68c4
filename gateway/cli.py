"""Command line: ``gateway serve | worker | demo | policy check | eval | audit``.

Each sub-command lives in its own module and registers itself here through
``add_parser``; this file only wires them together.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# sub-command -> module with `add_parser(subparsers)` that sets `func=...`
COMMANDS: dict[str, str] = {
    "serve": "gateway.commands.serve",
    "demo": "gateway.commands.demo",
    "policy": "gateway.commands.policy",
    "eval": "gateway.commands.eval",
    "audit": "gateway.commands.audit",
    "worker": "gateway.commands.worker",
}


def build_parser() -> argparse.ArgumentParser:
    from gateway import __version__

    parser = argparse.ArgumentParser(
        prog="gateway", description="Verity Gateway: an OpenAI-compatible verifying proxy.")
    parser.add_argument("--version", action="version", version=f"verity-gateway {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue  # not built yet
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # `gateway audit show ID | head`: the reader left; no traceback, and no second
        # error when Python flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as shell tools exit
    return result


if __name__ == "__main__":
    sys.exit(main())
