"""Prototype: ``gateway audit report`` answered by DuckDB from compacted Parquet + open JSONL.

    /usr/bin/time -f '%e s %M KB' .venv/bin/python bench/proto_audit_report.py \
        --flat /tmp/pa/compacted/flat --open '/tmp/pa/dir/date=2026-11-25/*.jsonl' \
        --before 2026-11-25

The whole command, end to end, is what the ≤ 2 s target of issue 15 is about: Python
start, imports, DuckDB, the three report queries, the table. It prints the same
summary as today's ``gateway audit report`` (``render_report``), from:

- ``--flat DIR``: closed days compacted by ``bench/bench_audit_duckdb.py`` into flat
  Parquet tables ``records/``, ``layers/``, ``candidates/`` (``date=…/part-0.parquet``),
  read for days before ``--before``;
- ``--open GLOB``: the still-open JSONL files (read with an explicit schema; their
  layers and candidates unnested on the fly).

Bench-only prototype for docs/design/audit-store.md; nothing in ``gateway/`` uses it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_audit_duckdb import jsonl_source  # noqa: E402


def views(con: Any, flat: Path, open_glob: str | None, before: str) -> None:
    def parquet(table: str) -> str:
        return (f"SELECT * EXCLUDE (date) FROM read_parquet('{flat}/{table}/*/*.parquet', "
                f"hive_partitioning = true) WHERE date < '{before}'")

    if not open_glob:
        con.execute(f"CREATE VIEW audit AS {parquet('records')}")
        con.execute(f"CREATE VIEW audit_layers AS {parquet('layers')}")
        con.execute(f"CREATE VIEW audit_candidates AS {parquet('candidates')}")
        return
    # The open files are parsed once into temp tables (a few MB), then unioned.
    con.execute(f"CREATE TEMP TABLE open_records AS SELECT * EXCLUDE (date) "
                f"FROM {jsonl_source(repr(open_glob))}")
    con.execute(f"CREATE VIEW audit AS {parquet('records')} "
                f"UNION ALL BY NAME SELECT * EXCLUDE (layers, candidates) FROM open_records")
    con.execute(f"""CREATE VIEW audit_layers AS {parquet('layers')} UNION ALL BY NAME
        SELECT audit_id, started_at, policy, mode, model, tenant,
               unnest(layers, recursive := true) FROM open_records""")
    con.execute(f"""CREATE VIEW audit_candidates AS {parquet('candidates')} UNION ALL BY NAME
        SELECT audit_id, started_at, policy, model, tenant, verdict AS live_verdict,
               action AS live_action, c.name AS candidate, c.verdict, c.action, c.error
        FROM (SELECT *, unnest(candidates) AS c FROM open_records)""")


def summary(con: Any) -> dict[str, Any]:
    total = con.execute("SELECT count(*) FROM audit").fetchone()[0]
    outcomes = [{"policy": p, "mode": m, "verdict": v, "action": a, "count": n}
                for p, m, v, a, n in con.execute(
                    "SELECT policy, mode, verdict, action, count(*) FROM audit "
                    "GROUP BY ALL ORDER BY policy, mode, verdict NULLS LAST, "
                    "action NULLS LAST").fetchall()]
    layers = {f"{p}/{k}": {"n": n, "mean_score": mean, "failed": failed, "errors": errors,
                           "latency_ms_p50": p50, "latency_ms_p99": p99}
              for p, k, n, mean, failed, errors, p50, p99 in con.execute("""
        SELECT policy, key,
               count(*) FILTER (WHERE error IS NULL AND NOT skipped AND score IS NOT NULL),
               avg(score) FILTER (WHERE error IS NULL AND NOT skipped),
               count(*) FILTER (WHERE error IS NULL AND NOT skipped AND passed = false),
               count(*) FILTER (WHERE error IS NOT NULL),
               quantile_disc(latency_ms, 0.5), quantile_disc(latency_ms, 0.99)
        FROM audit_layers GROUP BY ALL ORDER BY ALL""").fetchall()}
    candidates: dict[tuple[str, str], dict[str, Any]] = {}
    for p, c, v, n, differs in con.execute("""
        SELECT policy, candidate, coalesce(verdict, error, 'none'), count(*),
               count(*) FILTER (WHERE verdict IS DISTINCT FROM live_verdict)
        FROM audit_candidates GROUP BY ALL ORDER BY ALL""").fetchall():
        row = candidates.setdefault((p, c), {"policy": p, "candidate": c, "evaluated": 0,
                                             "verdict_differs": 0, "verdicts": {}})
        row["evaluated"] += n
        row["verdict_differs"] += differs
        row["verdicts"][v] = n
    return {"records": total, "outcomes": outcomes, "layers": layers,
            "candidates": list(candidates.values())}


def main() -> int:
    t0 = time.perf_counter()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flat", type=Path, required=True)
    ap.add_argument("--open", help="glob of the open JSONL files")
    ap.add_argument("--before", default="9999-12-31",
                    help="read Parquet days before this date (the open files hold the rest)")
    ap.add_argument("--threads", type=int, default=0, help="0: DuckDB's default (cores)")
    args = ap.parse_args()
    import duckdb

    from gateway.audit.report import render_report

    t_import = time.perf_counter() - t0
    con = duckdb.connect()
    if args.threads:
        con.execute(f"SET threads = {args.threads}")
    views(con, args.flat, args.open, args.before)
    t1 = time.perf_counter()
    text = render_report(summary(con))
    print(text)
    print(f"\n[imports {t_import:.2f} s, queries {time.perf_counter() - t1:.2f} s, "
          f"in-process total {time.perf_counter() - t0:.2f} s]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
