"""``GET /v1/models``: the models of every upstream, each where it routes."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.errors import GatewayError, UpstreamError
from gateway.http.asgi import send_bytes, send_error
from gateway.http.auth import Authenticator, authorization
from gateway.upstream.base import UpstreamClient
from gateway.upstream.router import Upstreams
from gateway.wire.messages import maybe_json

__all__ = ["ModelsEndpoint"]


class ModelsEndpoint:
    """Every upstream's model list, merged: a model is listed by the upstream it routes
    to (the first whose ``models`` globs match it), once. One upstream failing leaves
    the others' models; all failing is the first error."""

    def __init__(self, upstreams: Upstreams, auth: Authenticator) -> None:
        self.upstreams = upstreams
        self.auth = auth

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        try:
            principal = self.auth.authenticate(authorization(scope["headers"]))
            self.auth.authorize(principal, "GET", "/v1/models")
            await send_bytes(send, 200, orjson.dumps(await self._list(scope)), [])
        except GatewayError as err:
            await send_error(send, err)

    async def _list(self, scope: Mapping[str, Any]) -> dict[str, Any]:
        upstreams = self.upstreams

        async def one(client: UpstreamClient) -> list[dict[str, Any]]:
            h = client.build_headers(scope["headers"], use_own_key=upstreams.use_own_key)
            resp = await client.send("GET", "/models", h)
            try:
                data = await resp.read()
            finally:
                resp.release()
            parsed = maybe_json(data)
            if resp.status >= 400 or not isinstance(parsed, dict):
                raise UpstreamError(f"upstream {client.config.name!r} answered {resp.status} "
                                    "to GET /models", status=resp.status if resp.status >= 400
                                    else 502)
            return [m for m in parsed.get("data") or () if isinstance(m, dict)
                    and isinstance(m.get("id"), str) and upstreams.routes_to(m["id"], client)]

        results = await asyncio.gather(*(one(c) for c in upstreams), return_exceptions=True)
        seen: dict[str, dict[str, Any]] = {}
        errors = [r for r in results if isinstance(r, BaseException)]
        for r in results:
            if not isinstance(r, BaseException):
                for m in r:
                    seen.setdefault(m["id"], m)
        if errors and not seen:
            err = errors[0]
            raise err if isinstance(err, GatewayError) else UpstreamError(str(err))
        return {"object": "list", "data": list(seen.values())}
