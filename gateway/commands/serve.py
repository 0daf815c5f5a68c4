"""``gateway serve``: run the gateway under uvicorn."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Mapping
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.settings import Settings

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
                   help="with --upstream, in gateway-keys mode (auth.keys): environment "
                        "variable holding the upstream's API key (refused in forward mode, "
                        "where each client's own key is sent)")
    p.add_argument("--policies", metavar="DIR", help="policies directory (default: shipped)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="relay processes sharing the port (default 1, or server.workers); "
                        "see docs/deploy.md for sizing")
    p.set_defaults(func=run)


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"host": args.host, "port": args.port, "policies_dir": args.policies}
    if getattr(args, "workers", None) is not None:
        out["server"] = {"workers": args.workers}
    if args.upstream:
        up: dict[str, Any] = {"name": "default", "base_url": args.upstream}
        if getattr(args, "upstream_key_env", None):
            up["api_key_env"] = args.upstream_key_env
        out["upstreams"] = [up]
    return out


def upstream_key_env_problem(args: argparse.Namespace, settings: Settings,
                             environ: Mapping[str, str] | None = None) -> str | None:
    """Why ``--upstream-key-env`` cannot be used as given, or None.

    The flag would otherwise be ignored silently, or worse: in forward mode (no
    gateway keys) each client's own key goes upstream; a gateway that sent its own
    key instead would let anyone who can reach it spend that key unauthenticated.
    """
    var = getattr(args, "upstream_key_env", None)
    if not var:
        return None
    if not args.upstream:
        return ("needs --upstream URL (for upstreams from --config or GATEWAY_UPSTREAMS, "
                "set each one's api_key_env)")
    if not settings.auth.keys:
        return ("refused in forward mode (no gateway keys configured): each client's own "
                "key is sent upstream, and a gateway sending its own key would let anyone "
                "who can reach it spend that key. Configure gateway keys (auth.keys) to "
                "have the gateway authenticate clients and use its upstream key, or drop "
                "the flag")
    env = os.environ if environ is None else environ
    if not env.get(var):
        return f"environment variable {var} is not set or empty"
    return None


def _listen(host: str, port: int) -> socket.socket:
    """Bind the listening socket before anything else starts (raises OSError)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(2048)
        sock.set_inheritable(True)
    except BaseException:
        sock.close()
        raise
    return sock


def _set_by(origin: str, flag: str) -> str:
    """``load_settings``'s origin of a key, for a message: which source set it."""
    if not origin:
        return "default"
    if origin == "from the command line":
        return f"set by {flag}"
    return f"set by {origin.removeprefix('from ')}" if origin.startswith("from ") \
        else f"set {origin}"


def run(args: argparse.Namespace) -> int:
    from gateway.settings import ConfigError, load_settings

    origins: dict[str, str] = {}
    try:
        settings = load_settings(args.config, overrides=overrides_from(args), check_secrets=True,
                                 origins=origins)
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    if not settings.upstreams:
        print("gateway: no upstream configured: pass --upstream URL, set GATEWAY_UPSTREAM, "
              "or list upstreams in --config (try `gateway demo` for a self-contained run)",
              file=sys.stderr)
        return 2
    key_env_problem = upstream_key_env_problem(args, settings)
    if key_env_problem:
        print(f"gateway: --upstream-key-env: {key_env_problem}", file=sys.stderr)
        return 2
    # Bound first: a port in use is a clear error before the gateway starts (and logs
    # "ready"), not uvicorn's traceback after it.
    workers = settings.server.workers
    try:
        if workers > 1:
            from gateway.commands.supervise import bind_group
            socks = bind_group(settings.host, settings.port, workers)
        else:
            socks = [_listen(settings.host, settings.port)]
    except OSError as exc:
        reason = exc.strerror or str(exc)
        print(f"gateway: cannot listen on {settings.host}:{settings.port}: {reason} "
              f"(port: {_set_by(origins.get('port', ''), '--port')}; "
              f"host: {_set_by(origins.get('host', ''), '--host')})", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Judge calls (httpx, and the SDKs' httpx2) are not logged per request, as upstream
    # calls (aiohttp) are not: both are spans. httpx would log each one at INFO.
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)
    host, port = socks[0].getsockname()[:2]
    logging.getLogger("gateway").info("listening on %s:%d", host, port)
    if workers > 1:  # N processes on N sockets of one port (gateway.commands.supervise)
        from gateway.commands.supervise import supervise
        return supervise(settings, socks, serve_socket)
    return serve_socket(settings, socks[0], None)


def serve_socket(settings: Settings, sock: socket.socket, worker: int | None) -> int:
    """Run one gateway on ``sock`` until it is told to stop: 0, or 3 when it never
    started. ``worker``: its index among ``server.workers`` processes (``/readyz``)."""
    import uvicorn

    from gateway.app import create_app
    from gateway.http.server_limits import limited_protocol

    app = create_app(settings)
    if worker is not None:
        app.worker = (worker, settings.server.workers)
    # server.*: connection count, header time and header size (gateway.http.server_limits).
    config = uvicorn.Config(app, log_level=settings.log_level, access_log=False,
                            timeout_graceful_shutdown=30, server_header=False,
                            http=limited_protocol(settings.server))
    server = uvicorn.Server(config)
    # uvicorn re-raises the SIGTERM it handled once it has shut down, under the handler
    # that was there before it: the default one would kill the process (status -15) after
    # a clean drain. A no-op handler there lets a graceful stop end with status 0. (A
    # worker of ``server.workers`` has its own handler outside this window: supervise.)
    previous = signal.signal(signal.SIGTERM, _drained)
    try:
        with sock, contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0 if server.started else 3


def _drained(signum: int, frame: FrameType | None) -> None:
    """SIGTERM outside uvicorn's own handler: the server has drained (or not started)."""
