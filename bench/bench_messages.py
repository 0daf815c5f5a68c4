"""The Messages front door's cost: ``POST /v1/messages`` against ``POST
/v1/chat/completions`` through one pass-through gateway to the scripted OpenAI-compatible
upstream (the Messages request translated to chat and the answer back), interleaved.

    .venv/bin/python bench/bench_messages.py [--requests 1000]

Prints p50/p99 in ms, non-streaming and streaming (the whole stream read), per path.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

import httpx

from gateway.app import create_app
from gateway.settings import load_settings
from gateway.testing.scripted import ScriptedUpstream
from gateway.testing.servers import ServerThread

TEXT = "hello there, how are you today"
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": TEXT}]}
MESSAGES = {"model": "gpt-4o", "max_tokens": 256, "messages": [{"role": "user", "content": TEXT}]}


async def run(url: str, n: int) -> dict[str, list[float]]:
    cases = {"chat": ("/v1/chat/completions", CHAT), "messages": ("/v1/messages", MESSAGES),
             "chat stream": ("/v1/chat/completions", {**CHAT, "stream": True}),
             "messages stream": ("/v1/messages", {**MESSAGES, "stream": True})}
    out: dict[str, list[float]] = {k: [] for k in cases}
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        for i in range(n + 50):
            for name, (path, body) in cases.items():
                start = time.perf_counter()
                r = await client.post(path, json=body)
                elapsed = (time.perf_counter() - start) * 1000
                if r.status_code != 200:
                    raise SystemExit(f"{name}: {r.status_code} {r.text[:200]}")
                if i >= 50:  # warm-up
                    out[name].append(elapsed)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1000)
    args = ap.parse_args()
    upstream = ServerThread(ScriptedUpstream(record=False)).start()
    with tempfile.TemporaryDirectory() as empty:
        settings = load_settings(environ={}, overrides={
            "upstreams": [{"name": "s", "base_url": upstream.url + "/v1"}],
            "policies_dir": empty, "audit": {"path": None}, "log_level": "warning"})
        gw = ServerThread(create_app(settings)).start()
        try:
            results = asyncio.run(run(gw.url, args.requests))
        finally:
            gw.stop()
            upstream.stop()
    print(f"{args.requests} requests each, interleaved, ms:")
    for name, values in results.items():
        values.sort()
        print(f"  {name:16s} p50 {statistics.median(values):6.2f}  "
              f"p99 {values[int(len(values) * 0.99)]:6.2f}")


if __name__ == "__main__":
    main()
