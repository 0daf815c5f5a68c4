"""``gateway audit replay --policy P``: recorded requests re-verified under policy P.

Selects records like the other readers (``--audit``, filters), keeps those that hold
content (their policy recorded it), rebuilds each request and answer, verifies them
with P (:mod:`gateway.eval.replay`) and prints what would change. No upstream is
called and the audit is not written.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

import orjson

from gateway.commands.audit import (
    AuditCommandError,
    add_audit_argument,
    add_filter_arguments,
    build_filter,
    open_store,
)

__all__ = ["add_verb"]

DEFAULT_LIMIT = 10_000
MAX_JOBS = 16
"""Replay processes at most."""
PER_JOB = 50
"""Records per process at least (fewer records use fewer processes)."""


def add_verb(verbs: Any) -> None:
    p: argparse.ArgumentParser = verbs.add_parser(
        "replay", help="re-verify recorded requests under another policy",
        description="Re-verify the recorded requests that hold content (their policy "
                    "has telemetry.record_content: true) under --policy, without calling "
                    "the upstream, and print the verdict and action transitions, what "
                    "it would block more or fewer, and each layer's fire rate.")
    add_audit_argument(p)
    p.add_argument("--policy", required=True, metavar="FILE|NAME",
                   help="a policy file, or the name of a policy in the configured "
                        "policies directory")
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT,
                   help=f"replay the newest N records with content (default {DEFAULT_LIMIT})")
    p.add_argument("--concurrency", type=int, default=4,
                   help="records verified at once by each process (default 4)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="processes verifying records side by side, each every N-th "
                        "record (default 1: this process; 0: one per CPU, at most "
                        f"{MAX_JOBS}); worth it for CPU-heavy policies on idle cores")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_filter_arguments(p, policy_option="--recorded-policy")
    p.set_defaults(func=_replay)


def _replay(args: argparse.Namespace) -> int:
    from gateway.commands.audit import _run

    return _run(_replay_run, args)


def _select(args: argparse.Namespace) -> tuple[int, list[dict[str, Any]]]:
    """(records the filters select, the newest ``--limit`` of them with content)."""
    if args.limit < 1:
        raise AuditCommandError("--limit must be 1 or more")
    where = build_filter(args)
    store = open_store(args, where)
    try:
        cond, params = where.sql()
        selected = store.query(f"SELECT count(*) FROM records WHERE {cond}", params)[0][0]
        rows = store.query(
            f"SELECT audit_id, started_at FROM records WHERE {cond} AND has_content "
            f"ORDER BY started_at DESC NULLS LAST LIMIT $n", {**params, "n": args.limit})
        ids = [r[0] for r in rows]
        starts = [r[1] for r in rows]
        records = store.full_records(
            ids, since=None if None in starts or not starts else min(starts))
    finally:
        store.close()
    return selected, [records[i] for i in ids if i in records]


def _policy_source(args: argparse.Namespace, settings: Any) -> tuple[Path, str]:
    """The policies directory to load and the policy's name in it."""
    from gateway.policy.loader import load_policy_file

    path = Path(args.policy)
    if path.is_file():
        try:
            policy = load_policy_file(path)
        except Exception as exc:  # the loader's errors name the file and the key
            raise AuditCommandError(f"policy {path}: {exc}") from None
        return path.resolve().parent, policy.name
    if "/" in args.policy or args.policy.endswith((".yaml", ".yml")):
        raise AuditCommandError(f"no policy file at {path.resolve()}")
    return settings.resolved_policies_dir(), args.policy


def _replay_run(args: argparse.Namespace) -> int:
    from gateway.commands.audit import _settings

    settings = _settings(args)
    directory, name = _policy_source(args, settings)
    selected, records = _select(args)
    if not records:
        raise AuditCommandError(
            f"none of the {selected} record(s) selected holds content, so there is nothing "
            f"to replay: only records of a policy with telemetry.record_content: true keep "
            f"the request and answer (docs/policies.md)", 1)
    result = _verify_all(settings.model_copy(update={"policies_dir": str(directory)}),
                         name, records, args.concurrency, _jobs(args.jobs, len(records)))
    result.selected = selected
    if args.json:
        print(orjson.dumps(result.as_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        from gateway.eval.replay import render_replay

        print(render_replay(result))
    return 0


def _jobs(asked: int, records: int) -> int:
    if asked < 0:
        raise AuditCommandError("--jobs must be 0 (one per CPU) or more")
    wanted = asked or min(os.cpu_count() or 1, MAX_JOBS)
    return max(1, min(wanted, MAX_JOBS, records // PER_JOB or 1))


def _verify_all(settings: Any, name: str, records: list[dict[str, Any]], concurrency: int,
                jobs: int) -> Any:
    """Every record verified: here (one job) or by ``jobs`` spawned processes, each
    replaying every ``jobs``-th record; their results merged (the same as one process)."""
    if jobs <= 1:
        return asyncio.run(_verify(settings, name, records, concurrency))
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from gateway.eval.replay import merge_results

    shares = [(settings, name, records[i::jobs], concurrency, list(range(i, len(records), jobs)))
              for i in range(jobs)]
    with ProcessPoolExecutor(max_workers=jobs,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        parts = list(pool.map(_verify_share, *zip(*shares, strict=True)))
    return merge_results(parts)


def _verify_share(settings: Any, name: str, records: list[dict[str, Any]], concurrency: int,
                  positions: list[int]) -> Any:
    """One process's share (run in a spawned process)."""
    return asyncio.run(_verify(settings, name, records, concurrency, positions))


async def _verify(settings: Any, name: str, records: list[dict[str, Any]],
                  concurrency: int, positions: list[int] | None = None) -> Any:
    from gateway.eval.replay import replay
    from gateway.runtime import open_runtime
    from gateway.verify.verifier import Verifier

    async with open_runtime(settings) as runtime:
        policy = runtime.policies.get(name)
        if policy is None:
            errors = "; ".join(f"{f}: {e}" for f, e in runtime.policies.errors.items())
            raise AuditCommandError(f"no policy {name!r} in {settings.policies_dir}"
                                    + (f" ({errors})" if errors else ""))
        return await replay(records, Verifier(runtime), policy, concurrency=concurrency,
                            positions=positions)
