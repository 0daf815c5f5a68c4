"""``gateway worker``: verify the jobs relays publish to Redis (fleet mode).

Reads the same configuration as ``gateway serve`` (``--config``, ``GATEWAY_*``): the
``redis`` section names the stream and group, ``policies_dir`` the policies (the
relays' own: a job names its policy's version), ``audit.path`` where records go,
``judge`` the model the model-based layers call, ``OTEL_*`` the telemetry. One worker
is one consumer and one process; run one per core (or per pod).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.settings import Settings

__all__ = ["add_parser", "run"]

log = logging.getLogger("gateway.fleet")


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "worker", help="verify jobs from the Redis stream (fleet mode)",
        description="Consume verification jobs that gateway relays publish to a Redis "
                    "Stream (shadow.runner: redis), verify them, write the audit records "
                    "and export telemetry. Configuration as for serve: --config FILE, "
                    "then GATEWAY_* environment variables, then these flags.")
    p.add_argument("--config", metavar="FILE", help="YAML config file (or GATEWAY_CONFIG)")
    p.add_argument("--policies", metavar="DIR",
                   help="policies directory (default: shipped; use the relays' own)")
    p.add_argument("--redis-url", metavar="URL", help="redis://host:6379/0 (or redis.url)")
    p.add_argument("--name", help="consumer name, unique in the group (default: "
                                  "HOSTNAME-PID; a stable one lets a restarted worker "
                                  "resume its own pending jobs at once)")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help="jobs verified at once (default: shadow.concurrency)")
    p.set_defaults(func=run)


def _settings(args: argparse.Namespace) -> Settings:
    from gateway.settings import load_settings

    overrides: dict[str, Any] = {"policies_dir": args.policies}
    if args.redis_url:
        overrides["redis"] = {"url": args.redis_url}
    return load_settings(args.config, overrides=overrides)


def run(args: argparse.Namespace) -> int:
    from gateway.settings import ConfigError

    try:
        settings = _settings(args)
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    if not settings.redis.url:
        print("gateway: worker: no Redis to read jobs from: set redis.url (or --redis-url)",
              file=sys.stderr)
        return 2
    if args.concurrency is not None and args.concurrency < 1:
        print("gateway: worker: --concurrency must be at least 1", file=sys.stderr)
        return 2
    if not settings.resolved_policies_dir().is_dir():
        print(f"gateway: worker: policies directory {settings.resolved_policies_dir()} is "
              f"not a directory", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)
    name = args.name or f"{socket.gethostname()}-{os.getpid()}"
    concurrency = args.concurrency or settings.shadow.concurrency
    try:
        return asyncio.run(_work(settings, name, concurrency))
    except KeyboardInterrupt:
        return 0


async def _work(settings: Settings, name: str, concurrency: int) -> int:
    from gateway.audit.sink import open_audit_sink
    from gateway.fleet.connect import FleetUnavailable, open_redis
    from gateway.fleet.consumer import BLOCK_MS, FleetWorker
    from gateway.runtime import open_runtime
    from gateway.telemetry import create_telemetry
    from gateway.verify.record import Recorder

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        client = open_redis(settings.redis,
                            read_timeout=settings.redis.timeout + BLOCK_MS / 1000)
    except FleetUnavailable as exc:
        print(f"gateway: worker: {exc}", file=sys.stderr)
        return 2
    telemetry = create_telemetry()
    log.info("%s", telemetry.describe())
    sink = open_audit_sink(settings.audit)
    try:
        async with open_runtime(settings, telemetry=telemetry) as runtime:
            watcher = (asyncio.create_task(runtime.policies.watch())
                       if settings.reload_policies else None)
            worker = FleetWorker(settings.redis, client, runtime, Recorder(telemetry, sink),
                                 name=name, concurrency=concurrency,
                                 audit_path=settings.audit.path,
                                 flush=getattr(sink, "flush", None),
                                 drain_seconds=settings.shadow.drain_seconds)
            log.info("worker %s ready: stream %r, group %r, %d at once", name,
                     settings.redis.stream, settings.redis.group, concurrency)
            try:
                await worker.run(stop)
            finally:
                if watcher is not None:
                    watcher.cancel()
                    await asyncio.gather(watcher, return_exceptions=True)
                log.info("worker %s stopped: %s", name, worker.status())
    finally:
        await client.aclose()
        await asyncio.to_thread(sink.close)
        telemetry.shutdown(settings.telemetry.flush_seconds)
    return 0
