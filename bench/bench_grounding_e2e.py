"""Latency an inline ``grounding`` + ``claims`` + ``citations`` policy adds, end to end.

The same request as ``bench/bench_layers.py`` (a ~1,000-word answer against a
~10,000-word context; ``--text news`` for real prose), sent with the official
``openai`` SDK, one at a time, through a real gateway (uvicorn on loopback) to the
scripted upstream, which waits ``--upstream-ms`` before answering (a model's
generation time). Three runs, interleaved request by request so drift hits all alike:

- ``direct`` — SDK straight to the scripted upstream;
- ``gateway, no policy`` — through the gateway with no policy (pass-through: what
  relaying this large request costs without any verification);
- ``inline`` — through the gateway, policy ``mode: inline`` with the three layers:
  the context is indexed while the upstream answers (``Preparations.start``);
- ``inline, no prepare`` — the same with ``prepare`` switched off in this process,
  so the indexing happens after the answer arrives (what the gateway did before).

Gateway and upstream run in this process (server threads): the client thread
waits in a socket read while they work, but the three share one interpreter, so
treat small differences with care. Each run starts with a fresh gateway (no
cross-request index cache: ``index_cache_chars: 0``) so every request is cold.

    .venv/bin/python bench/bench_grounding_e2e.py [--requests 100] [--upstream-ms 50] [--text news]

Prints p50 / p99 end-to-end milliseconds and the added latency over ``direct``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_layers  # noqa: E402
import openai  # noqa: E402

from gateway.app import create_app  # noqa: E402
from gateway.testing.scripted import ScriptedUpstream  # noqa: E402
from gateway.testing.servers import ServerThread  # noqa: E402
from gateway.settings import load_settings  # noqa: E402
from gateway.verify.prepare import Preparations  # noqa: E402

POLICY = """
mode: inline
default: true
layers:
  - {name: grounding, config: {index_cache_chars: 0}}
  - {name: claims}
  - {name: citations}
actions: {marginal: {type: flag}, fail: {type: flag}}  # the answer is delivered unchanged
"""


def pct(samples: list[float], q: int) -> float:
    return statistics.quantiles(sorted(samples), n=100, method="inclusive")[q - 1]


@contextmanager
def gateway(upstream_url: str, workdir: Path, name: str, policy: bool = True) -> Iterator[str]:
    policies = workdir / f"policies-{name}"
    policies.mkdir()
    if policy:
        (policies / "bench.yaml").write_text(POLICY, encoding="utf-8")
    settings = load_settings(environ={}, overrides={
        "upstreams": [{"name": "scripted", "base_url": upstream_url + "/v1"}],
        "policies_dir": str(policies), "audit": {"path": str(workdir / f"{name}.jsonl")},
        "log_level": "warning", "reload_policies": False})
    with ServerThread(create_app(settings)) as gw:
        yield gw.url


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--upstream-ms", type=float, default=50.0)
    ap.add_argument("--text", choices=("synthetic", "news"), default="synthetic")
    ap.add_argument("--data", type=Path, default=bench_layers.DATA)
    ap.add_argument("--context-words", type=int, default=10_000)
    ap.add_argument("--answer-words", type=int, default=1_000)
    args = ap.parse_args(argv)
    if args.text == "news":
        context, [answer] = bench_layers.news_request(args.data, args.context_words,
                                                      args.answer_words)
    else:
        context, [answer] = bench_layers.make_request(args.context_words, args.answer_words)
    messages = [{"role": "system", "content": context},
                {"role": "user", "content": "Summarize the records above."}]
    upstream = ScriptedUpstream(default_reply=answer, latency_ms=args.upstream_ms, record=False)
    prepare = Preparations.start
    runs = ("direct", "gateway, no policy", "inline", "inline, no prepare")
    times: dict[str, list[float]] = {r: [] for r in runs}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        up = stack.enter_context(ServerThread(upstream))
        urls = {"direct": up.url,
                "gateway, no policy": stack.enter_context(gateway(up.url, Path(tmp), "pt",
                                                                  policy=False)),
                "inline": stack.enter_context(gateway(up.url, Path(tmp), "inline")),
                "inline, no prepare": stack.enter_context(gateway(up.url, Path(tmp), "np"))}
        clients = {r: stack.enter_context(openai.OpenAI(base_url=urls[r] + "/v1", api_key="x",
                                                        max_retries=0, timeout=60))
                   for r in runs}
        try:
            for i in range(args.requests + 5):  # 5 warm-up rounds, not recorded
                for r in runs:
                    Preparations.start = (  # type: ignore[method-assign]
                        prepare if r != "inline, no prepare"
                        else (lambda self, key, policy, messages, span: None))
                    t0 = time.perf_counter()
                    resp = clients[r].chat.completions.create(
                        model="scripted-small", messages=messages)  # type: ignore[arg-type]
                    elapsed = (time.perf_counter() - t0) * 1e3
                    if resp.choices[0].message.content != answer:
                        raise SystemExit(f"{r}: the answer came back changed")
                    if i >= 5:
                        times[r].append(elapsed)
        finally:
            Preparations.start = prepare  # type: ignore[method-assign]
    base50, base99 = pct(times["direct"], 50), pct(times["direct"], 99)
    print(f"{args.text} text, upstream {args.upstream_ms:.0f} ms, {args.requests} requests each")
    print(f"{'':20} {'p50 ms':>8} {'p99 ms':>8} {'added p50':>10} {'added p99':>10}")
    for r in runs:
        p50, p99 = pct(times[r], 50), pct(times[r], 99)
        print(f"{r:20} {p50:8.2f} {p99:8.2f} {p50 - base50:10.2f} {p99 - base99:10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
