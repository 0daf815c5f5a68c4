"""Python function calls per request in the gateway process: a measure that noise
does not move, for comparing two trees of the gateway on a busy box.

    .venv/bin/python bench/calls_per_request.py --tree main=/path/to/main --tree sweep=.

For each tree, mode (JSON, stream) and configuration (pass-through, an inline and a
shadow policy with the ``keyword`` and ``length`` layers, as in
``run_policy_overhead.py``), it starts ``bench/mock_upstream.py`` and ``gateway serve``
under ``cProfile`` (the event loop's thread), sends ``--few`` then ``--many``
sequential requests in two runs, and prints the difference in profiled calls
divided by the difference in requests: start-up and shutdown cancel out. Each tree
runs with its own code (``PYTHONPATH``) and its own ``bench/mock_upstream.py``.
Calls are not time, but a change in the request path's Python work shows in them
exactly, where requests/s and CPU per request on a shared 2-core box move by 20 %.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

LAYERS = ("layers:\n  - name: keyword\n    config: {block: [password, ssn]}\n"
          "  - name: length\n    config: {max_chars: 20000}\n"
          "risk: {level: medium}\ndecision: {min_confidence: 0.5}\n"
          "actions: {fail: {type: block}}\n")
CONFIGS = {"passthrough": None,
           "inline": "mode: inline\ndefault: true\nstreaming: buffer\n" + LAYERS,
           "shadow": "mode: shadow\ndefault: true\n" + LAYERS}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait(url: str) -> None:
    for _ in range(400):
        try:
            with urllib.request.urlopen(url, timeout=1):  # noqa: S310 - loopback
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"not ready: {url}")


def calls(tree: Path, config: str, requests: int, stream: bool) -> int:
    """Profiled calls of one gateway run that served ``requests`` requests."""
    with tempfile.TemporaryDirectory(prefix="calls-") as tmp:
        work = Path(tmp)
        policies = work / "policies"
        policies.mkdir()
        if CONFIGS[config]:
            (policies / "p.yaml").write_text(CONFIGS[config], encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GATEWAY_"))}
        env["PYTHONPATH"] = str(tree)
        mport, gport = _port(), _port()
        profile = work / "gateway.prof"
        code = ("import cProfile, sys\n"
                f"sys.argv = ['gateway', 'serve', '--host', '127.0.0.1', '--port', '{gport}', "
                f"'--upstream', 'http://127.0.0.1:{mport}/v1', '--policies', {str(policies)!r}]\n"
                "from gateway.cli import main\n"
                f"cProfile.run('main()', {str(profile)!r})\n")
        mock = subprocess.Popen([sys.executable, str(tree / "bench" / "mock_upstream.py"),
                                 "--port", str(mport), "--impl", "lean"], env=env, cwd=work,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        gateway = subprocess.Popen([sys.executable, "-c", code], cwd=work,
                                   env={**env, "GATEWAY_LOG_LEVEL": "warning",
                                        "GATEWAY_AUDIT__PATH": str(work / "audit.jsonl")},
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait(f"http://127.0.0.1:{mport}/v1/models")
            _wait(f"http://127.0.0.1:{gport}/readyz")
            body = json.dumps({"model": "m", "stream": stream,
                               "messages": [{"role": "user", "content": "hello"}]}).encode()
            for _ in range(requests):
                request = urllib.request.Request(
                    f"http://127.0.0.1:{gport}/v1/chat/completions", data=body,
                    headers={"content-type": "application/json"})
                with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310
                    resp.read()
            time.sleep(0.3)  # the last shadow job and audit write
        finally:
            gateway.send_signal(signal.SIGINT)
            gateway.wait(30)
            mock.send_signal(signal.SIGINT)
            mock.wait(10)
        total: int = pstats.Stats(str(profile)).total_calls  # type: ignore[attr-defined]
        return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", action="append", required=True, metavar="NAME=DIR",
                   help="a gateway checkout to measure (give two to compare)")
    p.add_argument("--few", type=int, default=100)
    p.add_argument("--many", type=int, default=600)
    args = p.parse_args(argv)
    trees = {name: Path(path).resolve() for name, _, path in
             (t.partition("=") for t in args.tree)}
    print("| mode | config | " + " | ".join(f"{n} calls/request" for n in trees) + " |")
    print("|---|---|" + "---:|" * len(trees))
    for stream in (False, True):
        for config in CONFIGS:
            per = [(calls(t, config, args.many, stream) - calls(t, config, args.few, stream))
                   / (args.many - args.few) for t in trees.values()]
            print(f"| {'stream' if stream else 'json'} | {config} | "
                  + " | ".join(f"{x:.1f}" for x in per) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
