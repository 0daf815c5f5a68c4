"""Closed-loop load generator for chat completions (asyncio + aiohttp), loopback only.

    python bench/loadgen.py http://127.0.0.1:8080/v1/chat/completions \
        --concurrency 16 --requests 20000 --duration 5 [--stream]

``concurrency`` workers each send one request, read the whole response, and send
the next, until ``requests`` have been started or ``duration`` seconds have
passed, whichever comes first (both bounds are mandatory). Reported: completed
requests, errors, requests/s, latency p50/p99 (request sent → body fully read),
for streams time to first chunk (TTFC: request sent → first body bytes) p50/p99,
and the client's own CPU time per request so its cost can be checked against the
system under test.

``--client raw`` (``client="raw"``) uses the lean client of ``bench/rawload.py``
instead of aiohttp (same bounds, same checks, same result; several times less CPU
per request, which matters when the load generator shares a 2-core box with the
system under test).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawload import body_complete, request_bytes, run_load_raw  # noqa: E402

__all__ = ["LoadResult", "assert_loopback", "chat_body", "percentile", "run_load"]

MAX_REQUESTS = 1_000_000
MAX_DURATION = 600.0


def chat_body(stream: bool, model: str = "bench") -> bytes:
    payload: dict[str, Any] = {"model": model,
                               "messages": [{"role": "user", "content": "Say hello."}]}
    if stream:
        payload["stream"] = True
    return orjson.dumps(payload)


def assert_loopback(url: str) -> None:
    """Refuse any target that does not resolve only to loopback addresses."""
    host = urlsplit(url).hostname
    if not host:
        raise ValueError(f"no host in {url!r}")
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    addrs = {info[4][0] for info in infos}
    if not addrs or not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs):
        raise ValueError(f"load generation is loopback only; {host!r} resolves to {sorted(addrs)}")


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an ascending list (``q`` in 0..100)."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * q // 100))
    return sorted_values[int(min(rank, len(sorted_values))) - 1]


@dataclass
class LoadResult:
    url: str
    concurrency: int
    stream: bool
    completed: int = 0
    errors: int = 0
    elapsed_s: float = 0.0
    client_cpu_s: float = 0.0
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    ttfc_ms: list[float] = field(default_factory=list, repr=False)
    statuses: dict[int, int] = field(default_factory=dict)
    first_error: str | None = None

    @property
    def rps(self) -> float:
        return self.completed / self.elapsed_s if self.elapsed_s else 0.0

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies_ms)
        ttfc = sorted(self.ttfc_ms)
        out = {k: v for k, v in asdict(self).items() if k not in ("latencies_ms", "ttfc_ms")}
        out.update(
            rps=round(self.rps, 1),
            p50_ms=_round(percentile(lat, 50)), p99_ms=_round(percentile(lat, 99)),
            ttfc_p50_ms=_round(percentile(ttfc, 50)), ttfc_p99_ms=_round(percentile(ttfc, 99)),
            client_cpu_ms_per_req=_round(1000 * self.client_cpu_s / self.completed
                                         if self.completed else None),
        )
        return out


def _round(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(v, nd)


async def run_load(url: str, *, concurrency: int, requests: int, duration: float,
                   stream: bool = False, body: bytes | None = None,
                   headers: dict[str, str] | None = None, warmup: float = 0.0,
                   ramp: float = 0.0,
                   on_measure: Callable[[], None] | None = None,
                   bodies: Sequence[bytes] | None = None,
                   client: str = "aiohttp") -> LoadResult:
    """Run one closed-loop load; bounded by ``requests`` started (warm-up included) AND
    ``warmup + duration`` seconds.

    Only requests started after the first ``warmup`` seconds are measured;
    ``on_measure()`` is called once when that window opens (the runner snapshots
    process CPU there). ``ramp`` spreads the workers' first requests evenly over
    that many seconds, so a fixed-latency upstream does not see all ``concurrency``
    requests arrive in one synchronised burst every round trip. ``bodies`` (instead of
    ``body``): request bodies sent in turn. ``client``: ``aiohttp`` or ``raw``
    (``bench/rawload.py``); both count a request as completed only on status 200 with
    its whole body read.
    """
    if not 1 <= concurrency <= 1024:
        raise ValueError("concurrency must be in 1..1024")
    if not 1 <= requests <= MAX_REQUESTS:
        raise ValueError(f"requests must be in 1..{MAX_REQUESTS}")
    if not 0 < duration <= MAX_DURATION or not 0 <= warmup <= MAX_DURATION:
        raise ValueError(f"duration and warmup must be in (0, {MAX_DURATION}] seconds")
    if not 0 <= ramp <= duration + warmup:
        raise ValueError("ramp must be in [0, warmup + duration]")
    assert_loopback(url)
    data = body if body is not None else chat_body(stream)
    hdrs = {"content-type": "application/json", "authorization": "Bearer bench"}
    hdrs.update(headers or {})
    result = LoadResult(url=url, concurrency=concurrency, stream=stream)
    if client == "raw":
        payloads = [request_bytes(url, b, hdrs) for b in (bodies or [data])]
        if bodies:  # aiohttp's order: the first request sends bodies[1]
            payloads = payloads[1:] + payloads[:1]
        result.elapsed_s, result.client_cpu_s = await run_load_raw(
            url, result, concurrency=concurrency, requests=requests, duration=duration,
            stream=stream, payloads=payloads, warmup=warmup, ramp=ramp,
            on_measure=on_measure)
        return result
    if client != "aiohttp":
        raise ValueError(f"unknown client {client!r} (aiohttp | raw)")
    lat, ttfcs, statuses = result.latencies_ms, result.ttfc_ms, result.statuses
    started = 0
    clock = time.perf_counter
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency,
                                     force_close=False, enable_cleanup_closed=False)
    timeout = aiohttp.ClientTimeout(total=max(30.0, duration))
    async with aiohttp.ClientSession(connector=connector, timeout=timeout,
                                     auto_decompress=False, trust_env=False,
                                     skip_auto_headers=("User-Agent", "Accept-Encoding")
                                     ) as session:
        t_begin = clock()
        t_start = t_begin + warmup
        deadline = t_start + duration
        measuring = warmup == 0
        if measuring and on_measure is not None:
            on_measure()

        async def worker(index: int) -> None:
            nonlocal started, measuring
            if ramp:
                await asyncio.sleep(ramp * index / concurrency)
            while started < requests:
                t0 = clock()
                if t0 >= deadline:
                    return
                started += 1
                payload = bodies[started % len(bodies)] if bodies else data
                if not measuring and t0 >= t_start:
                    measuring = True
                    if on_measure is not None:
                        on_measure()
                    cpu[0] = time.process_time()
                try:
                    async with session.post(url, data=payload, headers=hdrs) as resp:
                        if stream:
                            first = await resp.content.readany()
                            t_first = clock()
                            tail = b""
                            while first:
                                tail = tail[-4096:] + first
                                first = await resp.content.readany()
                        else:
                            tail = await resp.read()
                            t_first = 0.0
                        status = resp.status
                except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                    if t0 >= t_start:
                        result.errors += 1
                        if result.first_error is None:
                            result.first_error = f"{type(exc).__name__}: {exc}"
                    continue
                t1 = clock()
                if t0 < t_start:
                    continue  # warm-up
                statuses[status] = statuses.get(status, 0) + 1
                if status != 200:
                    result.errors += 1
                    if result.first_error is None:
                        result.first_error = f"status {status}"
                    continue
                if not body_complete(tail, stream):
                    result.errors += 1
                    if result.first_error is None:
                        result.first_error = f"incomplete body: {tail[-80:]!r}"
                    continue
                result.completed += 1
                lat.append((t1 - t0) * 1000)
                if stream:
                    ttfcs.append((t_first - t0) * 1000)

        cpu = [time.process_time()]
        await asyncio.gather(*(worker(i) for i in range(concurrency)))
        t_end = clock()
        result.elapsed_s = max(0.0, t_end - t_start) if measuring else 0.0
        result.client_cpu_s = time.process_time() - cpu[0]
    return result


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvicorn[standard] brings it
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("url", help="loopback URL, e.g. http://127.0.0.1:8080/v1/chat/completions")
    p.add_argument("-c", "--concurrency", type=int, default=16)
    p.add_argument("-n", "--requests", type=int, default=10_000,
                   help="upper bound on requests started")
    p.add_argument("-d", "--duration", type=float, default=10.0,
                   help="upper bound on wall time, seconds")
    p.add_argument("-w", "--warmup", type=float, default=1.0,
                   help="seconds of unmeasured warm-up before the measured window")
    p.add_argument("--ramp", type=float, default=0.0,
                   help="spread the workers' first requests over this many seconds")
    p.add_argument("--stream", action="store_true", help="request an SSE stream")
    p.add_argument("--client", choices=("aiohttp", "raw"), default="aiohttp",
                   help="aiohttp, or the lean raw-asyncio client (bench/rawload.py)")
    args = p.parse_args(argv)
    loop = new_event_loop()
    try:
        result = loop.run_until_complete(run_load(
            args.url, concurrency=args.concurrency, requests=args.requests,
            duration=args.duration, stream=args.stream, warmup=args.warmup, ramp=args.ramp,
            client=args.client))
    finally:
        loop.close()
    sys.stdout.write(orjson.dumps(result.summary(), option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n")
    return 0 if result.completed else 1


if __name__ == "__main__":
    raise SystemExit(main())
