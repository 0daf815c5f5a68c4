"""``gateway serve``: run the gateway under uvicorn."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "serve", help="run the gateway",
        description="Serve the OpenAI-compatible gateway. Configuration: --config FILE, "
                    "then GATEWAY_* environment variables, then these flags.")
    p.add_argument("--config", metavar="FILE", help="YAML config file (or GATEWAY_CONFIG)")
    p.add_argument("--host", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8080)")
    p.add_argument("--upstream", metavar="URL",
                   help="send every model to this OpenAI-compatible base URL (…/v1)")
    p.add_argument("--upstream-key-env", metavar="VAR",
                   help="with --upstream: environment variable holding its API key")
    p.add_argument("--policies", metavar="DIR", help="policies directory (default: shipped)")
    p.set_defaults(func=run)


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"host": args.host, "port": args.port, "policies_dir": args.policies}
    if args.upstream:
        up: dict[str, Any] = {"name": "default", "base_url": args.upstream}
        if getattr(args, "upstream_key_env", None):
            up["api_key_env"] = args.upstream_key_env
        out["upstreams"] = [up]
    return out


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from gateway.app import create_app
    from gateway.settings import ConfigError, load_settings

    try:
        settings = load_settings(args.config, overrides=overrides_from(args))
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    if not settings.upstreams:
        print("gateway: no upstream configured: pass --upstream URL, set GATEWAY_UPSTREAM, "
              "or list upstreams in --config (try `gateway demo` for a self-contained run)",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level,
                access_log=False, timeout_graceful_shutdown=30, server_header=False)
    return 0
