"""The ASGI application: a small dispatcher over the endpoints (``gateway.http``), and
the lifespan that owns every long-lived resource (upstream clients, telemetry, the
verification engine with its runtime, policy set and shadow workers).

The dispatcher is plain ASGI rather than a framework router: the hot path is
one dict lookup, and no middleware wraps ``send`` (see docs/benchmarks.md).
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from functools import partial
from typing import Any

from gateway.dashboard.mount import DashboardMount
from gateway.errors import GatewayError, NotFound, NotReady
from gateway.http.asgi import send_error, send_json
from gateway.http.auth import Authenticator, authorization
from gateway.http.chat import Engine
from gateway.http.endpoints import Endpoints
from gateway.layers.registry import BUILTIN, LayerRegistry
from gateway.modes.dispatch import open_engine
from gateway.settings import Settings
from gateway.telemetry import Telemetry, create_telemetry
from gateway.upstream import configured_secrets, open_client
from gateway.upstream.router import Upstreams

__all__ = ["GatewayApp", "create_app"]

log = logging.getLogger("gateway")

EngineFactory = Callable[[Settings, Telemetry], AbstractAsyncContextManager["Engine | None"]]
"""Opens the verification engine for the app's lifetime (default:
:func:`gateway.modes.dispatch.open_engine`); ``None`` means pure pass-through."""


class GatewayApp:
    """ASGI app. Resources exist only between lifespan startup and shutdown."""

    def __init__(self, settings: Settings, *, telemetry: Telemetry | None = None,
                 engine_factory: EngineFactory | None = None,
                 layers: LayerRegistry = BUILTIN) -> None:
        self.settings = settings
        self.layers = layers
        """The layer registry policies are resolved in (the shipped layers by default)."""
        self._telemetry = telemetry
        self._engine_factory = engine_factory
        self.proxy: Endpoints | None = None
        """The endpoints, while the lifespan runs (``None`` before and after)."""
        self.dashboard: DashboardMount | None = None
        """The audit pages (``audit.dashboard.path``), while the lifespan runs."""
        self.ready = False
        self.worker: tuple[int, int] | None = None
        """(index, count) when this is one of ``server.workers`` processes (``/readyz``)."""

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        auth = Authenticator(self.settings.auth)  # fails on a missing key env: before opening
        telemetry = self._telemetry or create_telemetry()
        log.info("%s", telemetry.describe())
        trace_configs = telemetry.aiohttp_trace_configs()  # [] when telemetry is off
        secrets = configured_secrets(self.settings)  # kept out of what upstreams send back
        clients = [open_client(u, trace_configs, secrets) for u in self.settings.upstreams]
        upstreams = Upstreams(clients, use_own_key=auth.enabled, routing=self.settings.routing)
        telemetry.gauge_upstreams(upstreams.health_gauges)
        proxy = Endpoints(self.settings, upstreams, auth, telemetry)
        if self.settings.audit.dashboard.path:
            self.dashboard = DashboardMount(self.settings.audit, auth)
        factory = self._engine_factory or partial(open_engine, layers=self.layers)
        try:
            async with factory(self.settings, telemetry) as engine:
                proxy.engine = engine
                self.proxy = proxy
                # Everything made at start-up (modules, compiled patterns, policies) lives
                # for the process: keep it out of the collector's full passes, which
                # otherwise cost ~8 ms each on the request path (docs/layers.md); and
                # collect the young generation only past what the requests in flight
                # hold (server.gc_gen0_threshold), not every ~10 requests.
                gc.freeze()
                default_thresholds = gc.get_threshold()
                gc.set_threshold(self.settings.server.gc_gen0_threshold,
                                 *default_thresholds[1:])
                self.ready = True
                log.info("gateway ready: %d upstream(s), verification %s",
                         len(clients), "on" if engine is not None else "off (pass-through)")
                try:
                    yield
                finally:
                    self.ready = False
                    gc.set_threshold(*default_thresholds)
        finally:
            await upstreams.aclose()
            if self.dashboard is not None:
                self.dashboard.close()
                self.dashboard = None
            # Last, after the shadow drain and the audit's flush (both in the engine's
            # exit): spans those produced are exported too, within flush_seconds.
            telemetry.shutdown(self.settings.telemetry.flush_seconds)
            self.proxy = None

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "http":
            proxy = self.proxy
            path = scope["path"]
            try:
                if proxy is not None:
                    if path == "/v1/chat/completions" or path == "/v1/chat/completions/":
                        return await proxy.chat_completions(scope, receive, send)
                    if path == "/v1/responses" or path == "/v1/responses/":
                        return await proxy.responses_api(scope, receive, send)
                    if path.startswith("/v1/messages") and path.rstrip("/") in (
                            "/v1/messages", "/v1/messages/count_tokens"):
                        return await proxy.messages(scope, receive, send)
                    if path == "/v1/models" and scope["method"] == "GET":
                        if any(k == b"anthropic-version" for k, _ in scope["headers"]):
                            return await proxy.anthropic_models(scope, receive, send)
                        return await proxy.models(scope, receive, send)
                    if path.startswith("/v1/"):
                        return await proxy.forward(scope, receive, send)
                if path == "/healthz":
                    return await send_json(send, 200, {"status": "ok"})
                if path == "/readyz":
                    return await self._readyz(scope, send)
                dashboard = self.dashboard
                if dashboard is not None and dashboard.matches(path):
                    return await dashboard(scope, receive, send)
                if proxy is None and path.startswith("/v1/"):
                    return await send_error(send, NotReady("The gateway is not ready yet."))
                return await send_error(send, NotFound(f"Unknown path {path!r}."))
            except Exception:
                # A bug. The client gets the documented 500 ``internal_error`` body, not
                # the server's plain-text page; the details go to the log only.
                log.exception("unhandled error serving %s %s", scope["method"], path)
                # If the response had already started, the server refuses a second start
                # and, as this returns with the response incomplete, closes the connection.
                with suppress(RuntimeError):
                    await send_error(send, GatewayError("The gateway failed to handle the "
                                                        "request (internal error)."))
                return
        if kind == "lifespan":
            return await self._lifespan(receive, send)

    async def _readyz(self, scope: Mapping[str, Any], send: Any) -> None:
        """200 ``{"status": "ready"}`` / 503 ``{"status": "not ready"}``; the detail
        (policy files and their errors, the shadow queue, each upstream's health and
        each pool's members) only to whom ``readyz_detail`` allows: it names paths and
        configuration problems. Upstream health never makes the gateway unready: every
        replica would go unready at once, and a failing upstream is not one of ours."""
        ready = self.ready
        engine = self.proxy.engine if self.proxy else None
        detail: dict[str, Any] = {}
        if engine is not None:
            engine_ready, detail = engine.status()
            ready = ready and engine_ready
        else:
            detail = {"policies": "none (pass-through)"}
        if self.worker is not None:
            detail = {**detail, "worker": {"index": self.worker[0], "of": self.worker[1],
                                           "pid": os.getpid()}}
        if self.proxy is not None:  # shown, never counted: a failing upstream is not ours
            detail["upstreams"] = self.proxy.upstreams.snapshot().as_dict()
        status = {"status": "ready" if ready else "not ready"}
        try:
            shown = self._readyz_detail_allowed(scope)
        except GatewayError as err:  # a wrong or malformed gateway key: 401, like /v1
            return await send_error(send, err)
        await send_json(send, 200 if ready else 503, {**status, **detail} if shown else status)

    def _readyz_detail_allowed(self, scope: Mapping[str, Any]) -> bool:
        if self.settings.readyz_detail == "public":
            return True
        auth = self.proxy.auth if self.proxy is not None else None
        if auth is None or not auth.enabled:  # forward mode (or not started): no key to check
            return False
        credential = authorization(scope["headers"])  # several: 401, as on /v1
        return credential is not None and auth.authenticate(credential) is not None

    async def _lifespan(self, receive: Any, send: Any) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        cm = self.lifespan()
        try:
            await cm.__aenter__()
        except Exception as exc:  # startup failure: report and let the server exit
            log.exception("startup failed")
            await send({"type": "lifespan.startup.failed", "message": str(exc)})
            return
        await send({"type": "lifespan.startup.complete"})
        message = await receive()
        try:
            await cm.__aexit__(None, None, None)
        except Exception as exc:
            log.exception("shutdown failed")
            await send({"type": "lifespan.shutdown.failed", "message": str(exc)})
            return
        await send({"type": "lifespan.shutdown.complete"})


def create_app(settings: Settings, **kwargs: Any) -> GatewayApp:
    return GatewayApp(settings, **kwargs)
