"""Telemetry overhead: pass-through with OTLP exporting vs telemetry disabled.

    .venv/bin/python bench/bench_telemetry.py                 # ~5 minutes
    .venv/bin/python bench/bench_telemetry.py --latencies 50 --concurrency 1 --duration 3

Runs the shared pass-through matrix (``bench/run_passthrough.py``: mock upstream,
gateway subprocess, load generator, CPU pinning) twice — gateway without any
``OTEL_*`` variable (telemetry off: the no-op façade, the SDK is never imported),
then with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at a loopback OTLP/HTTP sink
(every request sampled and exported: traces, metrics every 5 s, logs). The sink is
a separate process pinned with the mock, answers 200 with an empty protobuf
response and counts bytes, so the gateway really serializes and ships everything.
The "on" gateway runs with the defaults a deployment gets (no HTTP CLIENT span:
``VERITY_OTEL_HTTP_SPANS`` unset; exemplars off); pass ``--gateway-env``-style
variables through ``OTEL_*``/``VERITY_*`` in this process's environment to
measure another setting.

Prints a Markdown table of gateway p50 / p99 latency, requests/s and gateway CPU
per request, off vs on, and the p50 added by telemetry.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_passthrough as rp  # noqa: E402


# ---- the OTLP sink (its own process) ------------------------------------------------------


def serve_sink(port: int) -> None:
    received = {"requests": 0, "bytes": 0}

    class Sink(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            received["requests"] += 1
            received["bytes"] += len(body)
            self._reply(b"", "application/x-protobuf")  # empty Export*ServiceResponse

        def do_GET(self) -> None:  # noqa: N802
            self._reply(f"{received['requests']} {received['bytes']}".encode(), "text/plain")

        def _reply(self, data: bytes, content_type: str) -> None:
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Sink).serve_forever()


def sink_stats(port: int) -> tuple[int, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as resp:
        requests, size = resp.read().split()
    return int(requests), int(size)


# ---- comparison ----------------------------------------------------------------------------


def key(cell: rp.Cell) -> tuple[float, str, int]:
    return (cell.latency_ms, cell.mode, cell.concurrency)


def table(off: list[rp.Cell], on: list[rp.Cell]) -> str:
    def gw(cells: list[rp.Cell]) -> dict[tuple[float, str, int], dict[str, Any]]:
        return {key(c): c.row() for c in cells if c.target == "gateway"}

    a, b = gw(off), gw(on)
    lines = ["| upstream | mode | conc | p50 off → on (ms) | added p50 | p99 off → on (ms) "
             "| req/s off → on | gateway CPU/req off → on (ms) |",
             "|---:|---|---:|---|---:|---|---|---|"]
    for k in sorted(a):
        x, y = a[k], b.get(k)
        if y is None:
            continue
        added = (y["p50_ms"] - x["p50_ms"]) if x["p50_ms"] is not None and y["p50_ms"] else None
        lines.append(
            f"| {k[0]:g} ms | {k[1]} | {k[2]} | {x['p50_ms']} → {y['p50_ms']} | "
            f"{'' if added is None else f'{added:+.3f}'} | {x['p99_ms']} → {y['p99_ms']} | "
            f"{x['rps']:.0f} → {y['rps']:.0f} | "
            f"{x['gateway_cpu_ms_per_req']} → {y['gateway_cpu_ms_per_req']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--sink":
        serve_sink(int(sys.argv[2]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--latencies", default="0,50")
    p.add_argument("--concurrency", default="1,16")
    p.add_argument("--modes", default="json,stream")
    p.add_argument("--duration", default="5")
    p.add_argument("--no-pin", action="store_true")
    ours = p.parse_args(argv)
    shared = ["--latencies", ours.latencies, "--concurrency", ours.concurrency,
              "--modes", ours.modes, "--duration", ours.duration, "--label", "telemetry"]
    args = rp.parse_args(shared + (["--no-pin"] if ours.no_pin else []))
    pin = not args.no_pin and shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2
    if pin:
        os.sched_setaffinity(0, {int(c) for c in args.mock_cpus.split(",")})
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / f"telemetry-{time.strftime('%Y%m%d-%H%M%S')}.log"

    port = rp.free_port()
    sink = subprocess.Popen([*rp._pin(args.mock_cpus if pin else None), sys.executable,
                             __file__, "--sink", str(port)])
    try:
        for _ in range(100):
            try:
                sink_stats(port)
                break
            except OSError:
                time.sleep(0.05)
        with tempfile.TemporaryDirectory(prefix="verity-bench-otel-") as tmp:
            print("telemetry off", file=sys.stderr)
            args.gateway_env = []
            off = rp.run_matrix(args, pin, Path(tmp), log)
            print(f"telemetry on (OTLP/HTTP to 127.0.0.1:{port})", file=sys.stderr)
            args.gateway_env = [f"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:{port}",
                                "OTEL_SERVICE_NAME=verity-bench",
                                "OTEL_METRIC_EXPORT_INTERVAL=5000",
                                *(f"{k}={v}" for k, v in os.environ.items()
                                  if k.startswith(("OTEL_", "VERITY_OTEL_")))]
            on = rp.run_matrix(args, pin, Path(tmp), log)
        exports, size = sink_stats(port)
    finally:
        sink.terminate()
        sink.wait(timeout=5)
    print(table(off, on))
    print(f"\nsink received {exports} OTLP requests, {size / 1e6:.1f} MB; "
          f"pinning {'on' if pin else 'off'}; logs: {log}")
    return 0 if exports else 1


if __name__ == "__main__":
    raise SystemExit(main())
