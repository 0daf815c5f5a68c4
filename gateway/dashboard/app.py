"""The dashboard as a starlette app: ``gateway audit serve``, or mounted on the gateway.

Routes (relative to where it is served; links use the ASGI ``root_path``):

- ``/`` — the overview: verdicts and actions over time, breakdowns by policy, model
  and tenant, live vs candidate, per-layer fire rate, latency and judge cost;
- ``/records`` — the filtered list, newest first, paged;
- ``/records/{id}`` — one record (a unique prefix of 8+ characters redirects to it),
  with a link to its trace when a Jaeger URL is configured;
- ``/static/style.css``.

Every page takes the filters of :class:`~gateway.audit.filters.AuditFilter` as its
query string. Queries run in a worker thread with a timeout, on one
:class:`~gateway.audit.store.AuditStore` opened at the first request (DuckDB is
imported then, never at the gateway's start) and refreshed when files change. Pages
carry a strict Content-Security-Policy: no script at all, styles from the app only.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from gateway.audit.filters import AuditFilter, FilterError
from gateway.audit.layout import AuditPathError
from gateway.dashboard import data, pages

if TYPE_CHECKING:
    from gateway.audit.store import AuditStore

__all__ = ["SECURITY_HEADERS", "create_dashboard"]

log = logging.getLogger("gateway.audit")
T = TypeVar("T")
QUERY_SECONDS = 30.0
"""A page's queries take at most this long (then 503)."""
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class _Store:
    """The store, opened on first use (and again after a failure)."""

    def __init__(self, spec: str, options: dict[str, Any]) -> None:
        self.spec = spec
        self.options = options
        self._store: AuditStore | None = None
        self._lock = threading.Lock()

    def get(self) -> AuditStore:
        with self._lock:
            if self._store is None:
                from gateway.audit.store import AuditStore

                self._store = AuditStore(self.spec, **self.options)
            return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def create_dashboard(spec: str, *, jaeger_url: str | None = None, threads: int | None = 1,
                     memory_limit: str | None = "256MB",
                     refresh_seconds: float = 5.0) -> Starlette:
    """The dashboard over the audit at ``spec`` (a file, a directory or a glob)."""
    store = _Store(spec, {"threads": threads, "memory_limit": memory_limit,
                          "refresh_seconds": refresh_seconds})

    def base(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")

    def html(body: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)

    async def run(request: Request, work: Callable[[AuditStore, AuditFilter], T]
                  ) -> T | HTMLResponse:
        try:
            where = AuditFilter.from_query(request.query_params)
        except FilterError as exc:
            return html(pages.error_page(str(exc), base=base(request)), 400)
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(lambda: work(store.get(), where)), QUERY_SECONDS)
        except AuditPathError as exc:
            return html(pages.error_page(f"No audit records yet: {exc}.", base=base(request)),
                        404)
        except TimeoutError:
            return html(pages.error_page("The audit took too long to read: narrow the "
                                         "filters (a shorter time range).",
                                         base=base(request)), 503)
        except Exception:  # DuckDB out of memory, a file removed mid-read, ...
            log.exception("audit dashboard query failed")
            return html(pages.error_page("The audit could not be read (see the server "
                                         "log); narrow the filters or try again.",
                                         base=base(request)), 503)

    async def overview(request: Request) -> Response:
        got = await run(request, data.overview)
        if isinstance(got, Response):
            return got
        return html(pages.overview_page(got, AuditFilter.from_query(request.query_params),
                                        base=base(request)))

    async def records(request: Request) -> Response:
        try:
            offset = max(0, int(request.query_params.get("offset", "0")))
        except ValueError:
            offset = 0
        got = await run(request, lambda s, w: data.list_records(s, w, offset=offset))
        if isinstance(got, Response):
            return got
        rows, more = got
        return html(pages.records_page(rows, more, offset,
                                       AuditFilter.from_query(request.query_params),
                                       base=base(request), limit=data.LIST_LIMIT))

    async def record(request: Request) -> Response:
        prefix = str(request.path_params["audit_id"]).lower()
        if len(prefix) < 8 or not prefix.isalnum():
            return html(pages.error_page("An audit id (or its first 8+ characters) is "
                                         "needed.", base=base(request)), 404)

        def find(s: AuditStore, _: AuditFilter) -> tuple[list[str], dict[str, Any] | None]:
            ids = s.ids_with_prefix(prefix, limit=2)
            full = s.full_records(ids[:1]) if len(ids) == 1 else {}
            return ids, full.get(ids[0]) if ids else None

        got = await run(request, find)
        if isinstance(got, Response):
            return got
        ids, rec = got
        if len(ids) > 1:
            return html(pages.error_page(f"Several records start with {prefix}: give more "
                                         f"characters.", base=base(request)), 404)
        if rec is None:
            return html(pages.error_page(f"No record {prefix}.", base=base(request)), 404)
        if ids[0] != prefix:
            return RedirectResponse(f"{base(request)}/records/{ids[0]}", 303,
                                    headers=SECURITY_HEADERS)
        return html(pages.record_page(rec, base=base(request), jaeger_url=jaeger_url))

    async def style(request: Request) -> Response:
        return Response(pages.CSS, media_type="text/css",
                        headers={**SECURITY_HEADERS, "cache-control": "max-age=3600"})

    async def not_found(request: Request, exc: Exception) -> Response:
        return html(pages.error_page("No such page.", base=base(request)), 404)

    app = Starlette(routes=[
        Route("/", overview, methods=["GET"]),
        Route("/records", records, methods=["GET"]),
        Route("/records/{audit_id}", record, methods=["GET"]),
        Route("/static/style.css", style, methods=["GET"]),
    ], exception_handlers={404: not_found})
    app.state.store = store
    return app
