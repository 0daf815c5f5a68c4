"""How fast can DuckDB answer the audit report / dashboard / show over 1M records?

    .venv/bin/pip install duckdb
    .venv/bin/python bench/gen_audit.py --records 1000000 --out /tmp/pa/one.jsonl --weeks 6
    .venv/bin/python bench/gen_audit.py --records 1000000 --out /tmp/pa/dir --weeks 6 --writers 4
    .venv/bin/python bench/bench_audit_duckdb.py --file /tmp/pa/one.jsonl --dir /tmp/pa/dir \
        --work /tmp/pa/work                       # ~15 minutes on 2 cores

Research for docs/design/audit-store.md (issue 15), not product code. Every case runs
in a fresh subprocess (``--case NAME``) that imports duckdb, opens an in-memory
database, runs the case's queries once to warm the OS page cache and then ``--repeat``
times, and prints one JSON line: the best and median wall time of each query, the
whole case's wall time, peak RSS. The store layouts compared:

- ``jsonl-auto`` — ``read_ndjson_auto`` over the one big file (schema sniffed);
- ``jsonl-schema`` / ``jsonl-schema-glob`` — ``read_ndjson`` with an explicit,
  narrow ``columns`` schema, over the one file / the glob of rotated files;
- ``jsonl-temp`` — the glob read once into a temp table, then the queries;
- ``parquet`` — closed files compacted to one Parquet file per day (zstd), typed
  columns plus the verbatim record (``record`` JSON text, for ``show``);
- ``parquet+open`` — as ``parquet`` for all days but the last, whose rotated files
  are still JSONL (the open files of a live deployment);
- ``duckdb-table`` — a persistent DuckDB database file holding the table.

Queries: ``report`` (outcomes by policy/mode/verdict/action; per layer n, mean
score, fail and error counts, p50/p99 latency, cost; candidates vs live verdict and
action transitions), ``dashboard`` (hourly verdict/action counts per policy for the
last 7 days, top models and tenants, the latest 50 records with a filter), ``show``
(one record by an 8-character id prefix).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

LAYER = ("STRUCT(key VARCHAR, name VARCHAR, score DOUBLE, passed BOOLEAN, latency_ms DOUBLE, "
         "error VARCHAR, skipped BOOLEAN, judge_calls INTEGER, cost DOUBLE, weight DOUBLE)")
COLUMNS: dict[str, str] = {
    "audit_id": "VARCHAR", "policy": "VARCHAR", "policy_version": "VARCHAR",
    "mode": "VARCHAR", "model": "VARCHAR", "tenant": "VARCHAR", "stream": "BOOLEAN",
    "started_at": "TIMESTAMPTZ", "duration_ms": "DOUBLE", "verdict": "VARCHAR",
    "score": "DOUBLE", "action": "VARCHAR", "applied": "BOOLEAN", "attempts": "INTEGER",
    "upstream_status": "INTEGER", "note": "VARCHAR",
    "layers": f"{LAYER}[]",
    "candidates": f"STRUCT(name VARCHAR, verdict VARCHAR, action VARCHAR, error VARCHAR, "
                  f"layers {LAYER}[])[]",
}


_LAYER_SHAPE = {"key": "VARCHAR", "name": "VARCHAR", "score": "DOUBLE", "passed": "BOOLEAN",
                "latency_ms": "DOUBLE", "error": "VARCHAR", "skipped": "BOOLEAN",
                "judge_calls": "INTEGER", "cost": "DOUBLE", "weight": "DOUBLE"}
SHAPE = json.dumps({  # json_transform's structure: the same columns as COLUMNS
    **{k: v for k, v in COLUMNS.items() if k not in ("layers", "candidates")},
    "layers": [_LAYER_SHAPE],
    "candidates": [{"name": "VARCHAR", "verdict": "VARCHAR", "action": "VARCHAR",
                    "error": "VARCHAR", "layers": [_LAYER_SHAPE]}]})


def _columns_sql(columns: dict[str, str]) -> str:
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in columns.items()) + "}"


def jsonl_source(paths: str, *, auto: bool = False) -> str:
    if auto:
        return f"read_ndjson_auto({paths})"
    return (f"read_ndjson({paths}, columns={_columns_sql(COLUMNS)}, "
            f"ignore_errors=true, maximum_object_size=16777216)")


REPORT = {
    "outcomes": """
        SELECT policy, mode, verdict, action, count(*) AS n
        FROM audit GROUP BY ALL ORDER BY ALL""",
    "layers": """
        SELECT policy, l.key,
               count(*) FILTER (WHERE l.error IS NULL AND NOT l.skipped) AS n,
               avg(l.score) FILTER (WHERE l.error IS NULL AND NOT l.skipped) AS mean_score,
               count(*) FILTER (WHERE l.error IS NULL AND NOT l.skipped AND NOT l.passed)
                   AS failed,
               count(*) FILTER (WHERE l.error IS NOT NULL) AS errors,
               quantile_disc(l.latency_ms, 0.5) AS p50, quantile_disc(l.latency_ms, 0.99) AS p99,
               sum(l.cost) AS cost
        FROM (SELECT policy, unnest(layers) AS l FROM audit) GROUP BY ALL ORDER BY ALL""",
    "candidates": """
        SELECT policy, c.name AS candidate, action AS live_action,
               coalesce(c.action, c.error) AS candidate_action, count(*) AS n,
               count(*) FILTER (WHERE c.verdict IS DISTINCT FROM verdict) AS verdict_differs
        FROM (SELECT policy, verdict, action, unnest(candidates) AS c FROM audit)
        GROUP BY ALL ORDER BY ALL""",
}
# The same report over flat tables (one row per layer run / per candidate evaluation).
REPORT_FLAT = {
    "outcomes": REPORT["outcomes"],
    "layers": """
        SELECT policy, key,
               count(*) FILTER (WHERE error IS NULL AND NOT skipped) AS n,
               avg(score) FILTER (WHERE error IS NULL AND NOT skipped) AS mean_score,
               count(*) FILTER (WHERE error IS NULL AND NOT skipped AND NOT passed) AS failed,
               count(*) FILTER (WHERE error IS NOT NULL) AS errors,
               quantile_disc(latency_ms, 0.5) AS p50, quantile_disc(latency_ms, 0.99) AS p99,
               sum(cost) AS cost
        FROM audit_layers GROUP BY ALL ORDER BY ALL""",
    "candidates": """
        SELECT policy, candidate, live_action, coalesce(action, error) AS candidate_action,
               count(*) AS n, count(*) FILTER (WHERE verdict IS DISTINCT FROM live_verdict)
                   AS verdict_differs
        FROM audit_candidates GROUP BY ALL ORDER BY ALL""",
}
DASHBOARD = {
    "timeseries": """
        SELECT date_trunc('hour', started_at) AS hour, policy, mode, verdict, action,
               count(*) AS n
        FROM audit WHERE started_at >= (SELECT max(started_at) FROM audit) - INTERVAL 7 DAY
        GROUP BY ALL ORDER BY ALL""",
    "top": """
        SELECT 'model' AS dim, model AS value, count(*) AS n,
               count(*) FILTER (WHERE action = 'block') AS blocked
        FROM audit GROUP BY ALL
        UNION ALL
        SELECT 'tenant', coalesce(tenant, '-'), count(*),
               count(*) FILTER (WHERE action = 'block') FROM audit GROUP BY ALL
        ORDER BY dim, n DESC""",
    "latest": """
        SELECT audit_id, started_at, policy, mode, model, tenant, verdict, score, action
        FROM audit WHERE verdict = 'fail' ORDER BY started_at DESC LIMIT 50""",
}


def show_query(source_kind: str) -> str:
    if source_kind == "parquet":
        return "SELECT record FROM audit WHERE audit_id LIKE $prefix || '%' LIMIT 2"
    return "SELECT * FROM audit WHERE audit_id LIKE $prefix || '%' LIMIT 2"


# ------------------------------------------------------------------------------- cases


def _glob(root: Path, pattern: str) -> str:
    return f"'{root}/{pattern}'"


def make_view(con: Any, case: str, args: argparse.Namespace) -> str:
    """Create view/table ``audit`` for ``case``; returns the show query's kind."""
    work, root = Path(args.work), Path(args.dir)
    if case == "jsonl-auto":
        con.execute(f"CREATE VIEW audit AS SELECT * FROM {jsonl_source(repr(args.file), auto=True)}")
    elif case == "jsonl-schema":
        con.execute(f"CREATE VIEW audit AS SELECT * FROM {jsonl_source(repr(args.file))}")
    elif case == "jsonl-schema-glob":
        con.execute(f"CREATE VIEW audit AS SELECT * FROM "
                    f"{jsonl_source(_glob(root, '*/*.jsonl'))}")
    elif case == "jsonl-temp":
        con.execute(f"CREATE TEMP TABLE audit AS SELECT * FROM "
                    f"{jsonl_source(_glob(root, '*/*.jsonl'))}")
    elif case == "parquet":
        con.execute(f"CREATE VIEW audit AS SELECT * FROM "
                    f"read_parquet({_glob(work / 'parquet', '*/*.parquet')})")
        return "parquet"
    elif case == "parquet+open":
        last = sorted(p.name for p in root.iterdir())[-1]
        cols = ", ".join(f'"{c}"' for c in COLUMNS)
        con.execute(f"""CREATE VIEW audit AS
            SELECT {cols}, record FROM read_parquet({_glob(work / 'parquet', '*/*.parquet')})
            WHERE date < '{last.split('=')[1]}'
            UNION ALL BY NAME
            SELECT {cols}, NULL AS record FROM {jsonl_source(_glob(root / last, '*.jsonl'))}""")
        return "parquet"
    elif case == "parquet-flat":
        for table in ("records", "layers", "candidates"):
            view = "audit" if table == "records" else f"audit_{table}"
            con.execute(f"CREATE VIEW {view} AS SELECT * FROM "
                        f"read_parquet({_glob(work / 'flat' / table, '*/*.parquet')})")
        return "parquet"
    elif case == "duckdb-table":
        con.execute(f"ATTACH '{work / 'audit.duckdb'}' AS store (READ_ONLY)")
        con.execute("CREATE VIEW audit AS SELECT * FROM store.audit")
        return "parquet"
    else:
        raise SystemExit(f"unknown case {case}")
    return "json"


def run_case(args: argparse.Namespace) -> dict[str, Any]:
    t_start = time.perf_counter()
    import duckdb

    t_import = time.perf_counter() - t_start
    con = duckdb.connect()
    con.execute(f"SET threads = {args.threads}")
    if args.memory_limit:
        con.execute(f"SET memory_limit = '{args.memory_limit}'")
    t0 = time.perf_counter()
    kind = make_view(con, args.case, args)
    setup = time.perf_counter() - t0
    prefix = con.execute("SELECT substr(audit_id, 1, 8) FROM audit LIMIT 1").fetchone()
    assert prefix is not None
    report = REPORT_FLAT if args.case == "parquet-flat" else REPORT
    queries = {**{f"report.{k}": v for k, v in report.items()},
               **{f"dashboard.{k}": v for k, v in DASHBOARD.items()},
               "show": show_query(kind)}
    times: dict[str, list[float]] = {k: [] for k in queries}
    rows: dict[str, int] = {}
    for rep in range(args.repeat + 1):  # the first pass warms the page cache
        for name, sql in queries.items():
            t0 = time.perf_counter()
            params = {"prefix": prefix[0]} if "$prefix" in sql else None
            out = con.execute(sql, params).fetchall()
            if rep:
                times[name].append(time.perf_counter() - t0)
            rows[name] = len(out)
    total = time.perf_counter() - t_start
    group = {g: sum(min(v) for k, v in times.items() if k.startswith(g))
             for g in ("report", "dashboard")}
    return {"case": args.case, "threads": args.threads, "memory_limit": args.memory_limit,
            "import_s": round(t_import, 3), "setup_s": round(setup, 3),
            "best_s": {k: round(min(v), 3) for k, v in times.items()},
            "median_s": {k: round(statistics.median(v), 3) for k, v in times.items()},
            "report_s": round(group["report"], 3), "dashboard_s": round(group["dashboard"], 3),
            "rows": rows, "wall_s": round(total, 1),
            "peak_rss_mb": _peak_rss_mb()}


def _peak_rss_mb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


# --------------------------------------------------------------------------- compaction


def compact(args: argparse.Namespace) -> dict[str, Any]:
    """Closed JSONL files -> one Parquet file per day; and a DuckDB table file."""
    import duckdb

    work, root = Path(args.work), Path(args.dir)
    out = work / "parquet"
    out.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute(f"SET threads = {args.threads}")
    t0 = time.perf_counter()
    days = sorted(p for p in root.iterdir() if p.is_dir())
    per_day = []
    for day in days:
        target = out / day.name
        target.mkdir(exist_ok=True)
        t1 = time.perf_counter()
        # One parse: typed columns for the queries, the verbatim line for `show`/replay.
        con.execute(f"""
            COPY (SELECT * FROM (
                    SELECT unnest(json_transform(json, '{SHAPE}')), json AS record
                    FROM read_ndjson_objects({_glob(day, '*.jsonl')}, ignore_errors=true))
                  ORDER BY started_at)
            TO '{target / 'part-0.parquet'}' (FORMAT parquet, COMPRESSION zstd,
                                              ROW_GROUP_SIZE 122880)""")
        per_day.append(time.perf_counter() - t1)
    parquet_s = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in out.rglob("*.parquet"))
    t0 = time.perf_counter()
    flat = work / "flat"
    scalars = ", ".join(f'"{c}"' for c in COLUMNS if c not in ("layers", "candidates"))
    for day in days:
        src = out / day.name / "part-0.parquet"
        tables = {
            "records": f"SELECT {scalars}, record FROM '{src}'",
            "layers": f"""SELECT audit_id, started_at, policy, mode, model, tenant,
                                 unnest(layers, recursive := true) FROM '{src}'""",
            "candidates": f"""SELECT audit_id, started_at, policy, model, tenant,
                                     verdict AS live_verdict, action AS live_action,
                                     c.name AS candidate, c.verdict, c.action, c.error
                              FROM (SELECT *, unnest(candidates) AS c FROM '{src}')""",
        }
        for table, sql in tables.items():
            (flat / table / day.name).mkdir(parents=True, exist_ok=True)
            con.execute(f"COPY ({sql}) TO '{flat / table / day.name / 'part-0.parquet'}' "
                        f"(FORMAT parquet, COMPRESSION zstd)")
    flat_s = time.perf_counter() - t0
    flat_size = sum(p.stat().st_size for p in flat.rglob("*.parquet"))
    db = work / "audit.duckdb"
    db.unlink(missing_ok=True)
    t0 = time.perf_counter()
    con.execute(f"ATTACH '{db}' AS store")
    con.execute(f"CREATE TABLE store.audit AS SELECT * FROM "
                f"read_parquet('{out}/*/*.parquet')")
    con.execute("DETACH store")
    table_s = time.perf_counter() - t0
    return {"compact_days": len(days), "parquet_s": round(parquet_s, 1),
            "per_day_median_s": round(statistics.median(per_day), 2),
            "parquet_mb": round(size / 1e6, 1), "flat_from_parquet_s": round(flat_s, 1),
            "flat_mb": round(flat_size / 1e6, 1), "table_from_parquet_s": round(table_s, 1),
            "duckdb_file_mb": round(db.stat().st_size / 1e6, 1),
            "jsonl_mb": round(sum(p.stat().st_size for p in root.rglob("*.jsonl")) / 1e6, 1)}


CASES = ("jsonl-auto", "jsonl-schema", "jsonl-schema-glob", "jsonl-temp", "parquet",
         "parquet+open", "parquet-flat", "duckdb-table")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", default="/tmp/pa/one.jsonl")
    ap.add_argument("--dir", default="/tmp/pa/dir")
    ap.add_argument("--work", default="/tmp/pa/work")
    ap.add_argument("--case", help="run one case in this process (else: all, in subprocesses)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--memory-limit", default="")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-compact", action="store_true")
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(args)), flush=True)
        return 0
    if not args.skip_compact:
        print(json.dumps(compact(args)), flush=True)
    for case in args.cases.split(","):
        cmd = [sys.executable, __file__, "--case", case, "--file", args.file, "--dir", args.dir,
               "--work", args.work, "--threads", str(args.threads), "--repeat",
               str(1 if case.startswith("jsonl") else args.repeat)]
        if args.memory_limit:
            cmd += ["--memory-limit", args.memory_limit]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False,
                             env={**os.environ, "PYTHONHASHSEED": "0"})
        print(out.stdout.strip() or f'{{"case": "{case}", "error": {json.dumps(out.stderr[-800:])}}}',
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
