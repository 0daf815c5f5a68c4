"""``gateway audit tail | show | report | serve | replay | compact``: read the audit.

Every verb takes ``--audit PATH`` — a JSONL file, a directory layout or a glob
(default: the configured ``audit.path``) — and the readers take filters (time range,
policy, model, tenant, verdict, mode, action: :mod:`gateway.audit.filters`). Reading
goes through DuckDB (:mod:`gateway.audit.store`, the ``audit`` extra) and never writes
to the audit; ``compact`` is the one verb that changes files.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from gateway.audit.filters import AuditFilter
    from gateway.audit.store import AuditStore

__all__ = ["AuditCommandError", "add_audit_argument", "add_filter_arguments", "add_parser",
           "audit_spec", "build_filter", "open_store"]

MIN_PREFIX = 8
"""Characters an audit id prefix given to ``show`` has at least."""
_SETTING_HINT = ("audit.path: set it in the config file (--config) or GATEWAY_AUDIT__PATH, "
                 "or pass --audit PATH")


class AuditCommandError(Exception):
    """A message for stderr and an exit status."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def add_filter_arguments(p: argparse.ArgumentParser, *,
                         policy_option: str = "--policy") -> None:
    """The filter options every reader takes (``replay`` names the policy filter
    ``--recorded-policy``: its ``--policy`` is the policy to replay under)."""
    g = p.add_argument_group("filters (repeat an option or give a comma list to OR values)")
    g.add_argument("--since", metavar="TIME",
                   help="records started at or after TIME: ISO date/time, or a duration "
                        "before now (30m, 24h, 7d)")
    g.add_argument("--until", metavar="TIME", help="records started at or before TIME")
    g.add_argument(policy_option, dest="filter_policy", action="append", metavar="VALUE",
                   help="policy name (as recorded)")
    for name, what in (("model", "model as requested"),
                       ("tenant", "tenant ('-': none)"),
                       ("verdict", "pass, marginal, fail ('none': never verified)"),
                       ("mode", "inline or shadow"),
                       ("action", "action taken ('none': never verified)")):
        g.add_argument(f"--{name}", action="append", metavar="VALUE", help=what)


def add_audit_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--audit", dest="verb_audit", metavar="PATH",
                   help="audit file, directory or glob (default: audit.path from the config)")


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "audit", help="read the audit (tail, show, report, serve, replay, compact)",
        description="Read the audit the gateway writes (settings audit.path; default "
                    "./verity-audit.jsonl): one JSONL file, a directory of rotated files "
                    "(and their Parquet compactions), or a glob. Reading never changes it.")
    p.add_argument("--audit", "--file", dest="audit", metavar="PATH",
                   help="audit file, directory or glob (default: audit.path from the config)")
    p.add_argument("--config", metavar="FILE", help="gateway config file to read audit.path from")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    tail = verbs.add_parser("tail", help="one line per recent outcome")
    add_audit_argument(tail)
    tail.add_argument("-n", type=_non_negative, default=20, help="how many (default 20)")
    tail.add_argument("--follow", "-f", action="store_true",
                      help="keep printing new records (Ctrl-C stops)")
    add_filter_arguments(tail)
    tail.set_defaults(func=_tail)

    show = verbs.add_parser("show", help="the whole record of one audit id")
    add_audit_argument(show)
    show.add_argument("audit_id", help=f"the audit id, or its first {MIN_PREFIX}+ characters")
    show.set_defaults(func=_show)

    report = verbs.add_parser("report", help="verdicts, layers and candidates summarised")
    add_audit_argument(report)
    report.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_filter_arguments(report)
    report.set_defaults(func=_report)

    serve = verbs.add_parser(
        "serve", help="the audit dashboard on a port of its own",
        description="Serve the audit dashboard (charts, live vs candidate, layers, the "
                    "record list and pages) over the audit. It has no authentication: "
                    "bind it to loopback or put it behind a proxy that has (or mount it "
                    "on the gateway: audit.dashboard.path, behind a gateway key).")
    add_audit_argument(serve)
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8090, help="port (default 8090)")
    serve.add_argument("--jaeger-url", metavar="URL",
                       help="Jaeger UI base URL (http://localhost:16686): record pages "
                            "link to their trace")
    serve.set_defaults(func=_serve)

    from gateway.commands.replay import add_verb

    add_verb(verbs)

    compact = verbs.add_parser(
        "compact", help="compact closed files of a directory layout to Parquet",
        description="Compact every closed JSONL file of a directory layout to Parquet "
                    "(what makes reports fast), then apply audit.retention_days / "
                    "retention_mb. Files a writer may still append to are left alone.")
    add_audit_argument(compact)
    compact.set_defaults(func=_compact)


# -- resolving the audit ---------------------------------------------------------------


def _settings(args: argparse.Namespace) -> Any:
    from gateway.settings import ConfigError, load_settings

    try:
        return load_settings(args.config)
    except ConfigError as exc:
        raise AuditCommandError(str(exc)) from None


def audit_spec(args: argparse.Namespace) -> tuple[str, bool]:
    """The audit path to read and whether it came from the configuration."""
    given = getattr(args, "verb_audit", None) or getattr(args, "audit", None)
    if given:
        return str(given), False
    settings = _settings(args)
    if not settings.audit.path:
        raise AuditCommandError("the audit sink is disabled (audit.path is null): "
                                "pass --audit PATH to read another audit")
    return str(settings.audit.path), True


def build_filter(args: argparse.Namespace) -> AuditFilter:
    from gateway.audit.filters import AuditFilter, FilterError

    try:
        return AuditFilter.build(
            since=getattr(args, "since", None), until=getattr(args, "until", None),
            policy=getattr(args, "filter_policy", None),
            **{k: getattr(args, k, None) for k in ("model", "tenant", "verdict", "mode",
                                                   "action")})
    except FilterError as exc:
        raise AuditCommandError(str(exc)) from None


def open_store(args: argparse.Namespace, where: AuditFilter | None = None, **kw: Any
               ) -> AuditStore:
    """The store over the audit the arguments name (``where`` prunes date folders)."""
    try:
        import duckdb  # noqa: F401
    except ModuleNotFoundError:
        raise AuditCommandError("reading the audit needs DuckDB: pip install "
                                "'verity-gateway[audit]'") from None
    from gateway.audit.layout import AuditPathError
    from gateway.audit.store import AuditStore

    spec, configured = audit_spec(args)
    try:
        store = AuditStore(spec, since=where.since if where else None,
                           until=where.until if where else None, **kw)
    except AuditPathError as exc:
        raise AuditCommandError(f"{exc}" + (f" ({_SETTING_HINT})" if configured else ""),
                                ) from None
    if not store.files and any(c in spec for c in "*?["):
        store.close()
        raise AuditCommandError(f"no audit file matches {spec}")
    return store


def _run(func: Any, args: argparse.Namespace) -> int:
    try:
        status: int = func(args)
        return status
    except AuditCommandError as exc:
        print(f"gateway audit: {exc}", file=sys.stderr)
        return exc.status


# -- the verbs -------------------------------------------------------------------------


def _tail(args: argparse.Namespace) -> int:
    return _run(_tail_run, args)


def _tail_run(args: argparse.Namespace) -> int:
    from gateway.audit.report import format_record_lines

    where = build_filter(args)
    store = open_store(args, where)
    try:
        recent = _recent(store, where, args.n)
        files = [*store.files.jsonl] if args.follow else []
    finally:
        store.close()
    lines, widths = format_record_lines(recent)
    for line in lines:
        print(line)
    if not args.follow:
        return 0
    spec, _ = audit_spec(args)
    with contextlib.suppress(KeyboardInterrupt):
        _follow(spec, files, where, widths)
    return 0


def _recent(store: AuditStore, where: AuditFilter, n: int) -> list[dict[str, Any]]:
    if n == 0:
        return []
    cond, params = where.sql()
    ids = [r[0] for r in store.query(
        f"SELECT audit_id FROM records WHERE {cond} ORDER BY started_at DESC NULLS LAST "
        f"LIMIT $n", {**params, "n": n})]
    full = store.full_records(ids)
    return [full[i] for i in reversed(ids) if i in full]


def _follow(spec: str, known: list[Path], where: AuditFilter,
            widths: tuple[int, int]) -> None:
    """Print records appended from now on: to the files read so far, and to files that
    appear (rotation, new processes)."""
    from gateway.audit.layout import AuditPathError, find_files
    from gateway.audit.report import format_record_lines

    offsets: dict[Path, int] = {}
    for path in known:
        try:
            offsets[path] = path.stat().st_size
        except OSError:
            continue
    first = True
    while True:
        if not first:
            time.sleep(0.5)
        try:
            current = find_files(spec).jsonl
        except AuditPathError:
            current = []
        for path in current:
            if path not in offsets:
                offsets[path] = path.stat().st_size if first and not known else 0
        first = False
        for path in sorted(offsets):
            try:
                with path.open("rb") as fh:
                    fh.seek(offsets[path])
                    chunk = fh.read()
            except OSError:
                del offsets[path]
                continue
            end = chunk.rfind(b"\n") + 1  # a line still being written waits
            offsets[path] += end
            for raw in chunk[:end].splitlines():
                try:
                    rec = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and where.matches(rec):
                    print(format_record_lines([rec], widths=widths)[0][0], flush=True)


def _show(args: argparse.Namespace) -> int:
    return _run(_show_run, args)


def _show_run(args: argparse.Namespace) -> int:
    prefix = str(args.audit_id).strip().lower()
    if len(prefix) < MIN_PREFIX:
        raise AuditCommandError(f"give the audit id or at least its first {MIN_PREFIX} "
                                f"characters (got {len(prefix)})")
    store = open_store(args)
    try:
        ids = store.ids_with_prefix(prefix)
        record = store.full_records(ids).get(ids[0]) if len(ids) == 1 else None
    finally:
        store.close()
    if len(ids) > 1:
        shown = "\n  ".join(ids)
        raise AuditCommandError(f"{len(ids)}{'+' if len(ids) >= 20 else ''} records start "
                                f"with {prefix!r}; give more characters:\n  {shown}", 1)
    if record is None:
        raise AuditCommandError(f"no record with an audit id starting {prefix!r} in "
                                f"{audit_spec(args)[0]}", 1)
    print(orjson.dumps(record, option=orjson.OPT_INDENT_2).decode())
    return 0


def _report(args: argparse.Namespace) -> int:
    return _run(_report_run, args)


def _report_run(args: argparse.Namespace) -> int:
    from gateway.audit.report import render_report, summarize

    where = build_filter(args)
    store = open_store(args, where)
    try:
        summary = summarize(store, where)
    finally:
        store.close()
    if args.json:
        print(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    else:
        print(render_report(summary))
    return 0


def _serve(args: argparse.Namespace) -> int:
    return _run(_serve_run, args)


def _serve_run(args: argparse.Namespace) -> int:
    jaeger = args.jaeger_url
    if jaeger and not jaeger.startswith(("http://", "https://")):
        raise AuditCommandError("--jaeger-url must start with http:// or https://")
    open_store(args).close()  # fail now, clearly, rather than on the first page
    import uvicorn

    from gateway.dashboard.app import create_dashboard

    spec, _ = audit_spec(args)
    app = create_dashboard(spec, jaeger_url=jaeger.rstrip("/") if jaeger else None,
                           threads=None, memory_limit=None)
    app.state.store.get()  # opened now, so the first page does not wait for it
    print(f"audit dashboard over {spec} at http://{args.host}:{args.port}/", flush=True)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        app.state.store.close()
    return 0


def _compact(args: argparse.Namespace) -> int:
    return _run(_compact_run, args)


def _compact_run(args: argparse.Namespace) -> int:
    from gateway.audit.layout import closed_segments
    from gateway.audit.maintain import Retention, apply_retention

    spec, _ = audit_spec(args)
    root = Path(spec)
    if not root.is_dir():
        raise AuditCommandError(f"{root.resolve()} is not an audit directory: only a "
                                f"directory layout (audit.path not ending in .jsonl) is "
                                f"compacted")
    try:
        import duckdb  # noqa: F401

        from gateway.audit.compact import compact_files
    except ModuleNotFoundError:
        raise AuditCommandError("compaction needs DuckDB: pip install "
                                "'verity-gateway[audit]'") from None
    settings = _settings(args)  # rotation age (what is closed) and retention
    max_age = settings.audit.rotate_seconds
    closed = closed_segments(root, now=time.time(), max_age=max_age)
    done = compact_files(closed, threads=os.cpu_count() or 1, memory_limit="1GB")
    print(f"compacted {len(done)} of {len(closed)} closed file(s) in {root}")
    from gateway.audit.compact import write_missing_rollups
    from gateway.audit.layout import find_files

    rolled = write_missing_rollups(find_files(str(root)).all(), threads=os.cpu_count() or 1,
                                   memory_limit="1GB")
    if rolled:
        print(f"wrote {len(rolled)} rollup(s) for files compacted without one")
    cfg = settings.audit
    retention = Retention(cfg.retention_days, None if cfg.retention_mb is None
                          else int(cfg.retention_mb * 1024 * 1024))
    if retention:
        deleted = apply_retention(root, retention, max_age=max_age)
        print(f"retention: deleted {len(deleted)} file(s)")
    return 0
