"""``gateway audit tail | show | report``: read the JSONL audit file."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import orjson

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "audit", help="read the audit file (tail, show, report)",
        description="Read the append-only JSONL audit file the gateway writes "
                    "(settings audit.path; default ./verity-audit.jsonl).")
    p.add_argument("--file", type=Path, help="audit file (default: from --config / GATEWAY_*)")
    p.add_argument("--config", metavar="FILE", help="gateway config file to read audit.path from")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    tail = verbs.add_parser("tail", help="one line per recent outcome")
    tail.add_argument("-n", type=int, default=20, help="how many (default 20)")
    tail.add_argument("--follow", "-f", action="store_true", help="keep printing new records")
    tail.add_argument("--policy", help="only this policy")
    tail.add_argument("--verdict", choices=["pass", "marginal", "fail"], help="only this verdict")
    tail.set_defaults(func=_tail)
    show = verbs.add_parser("show", help="the whole record of one audit id")
    show.add_argument("audit_id")
    show.set_defaults(func=_show)
    report = verbs.add_parser("report", help="verdicts, layers and candidates summarised")
    report.add_argument("--json", action="store_true", help="print the summary as JSON")
    report.set_defaults(func=_report)


def _path(args: argparse.Namespace) -> Path | None:
    if args.file:
        return Path(args.file)
    from gateway.settings import ConfigError, load_settings

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"gateway audit: {exc}", file=sys.stderr)
        return None
    if not settings.audit.path:
        print("gateway audit: the audit file sink is disabled (audit.path is null)",
              file=sys.stderr)
        return None
    return Path(settings.audit.path)


def _open(args: argparse.Namespace) -> Path | None:
    path = _path(args)
    if path is not None and not path.exists():
        print(f"gateway audit: no audit file at {path}", file=sys.stderr)
        return None
    return path


def _keep(rec: dict[str, Any], args: argparse.Namespace) -> bool:
    return ((args.policy is None or rec.get("policy") == args.policy)
            and (args.verdict is None or rec.get("verdict") == args.verdict))


def _tail(args: argparse.Namespace) -> int:
    from gateway.audit.report import format_record_line, iter_records

    path = _open(args)
    if path is None:
        return 2
    recent = [r for r in iter_records(path) if _keep(r, args)][-args.n:] if args.n else []
    for rec in recent:
        print(format_record_line(rec))
    if not args.follow:
        return 0
    with path.open("rb") as fh:
        fh.seek(0, 2)
        try:
            while True:
                line = fh.readline()
                if not line:
                    time.sleep(0.5)
                    continue
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and _keep(rec, args):
                    print(format_record_line(rec), flush=True)
        except KeyboardInterrupt:
            return 0


def _show(args: argparse.Namespace) -> int:
    from gateway.audit.report import iter_records

    path = _open(args)
    if path is None:
        return 2
    for rec in iter_records(path):
        if rec.get("audit_id") == args.audit_id:
            print(orjson.dumps(rec, option=orjson.OPT_INDENT_2).decode())
            return 0
    print(f"gateway audit: no record with audit id {args.audit_id!r} in {path}", file=sys.stderr)
    return 1


def _report(args: argparse.Namespace) -> int:
    from gateway.audit.report import iter_records, render_report, summarize_records

    path = _open(args)
    if path is None:
        return 2
    summary = summarize_records(iter_records(path))
    if args.json:
        print(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    else:
        print(render_report(summary))
    return 0
