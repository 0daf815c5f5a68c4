"""OTLP attribute values and the attribute-set caches (private).

Owns what may go into an attribute (:func:`clean_attrs` drops ``None`` and
stringifies what OTLP cannot carry; :func:`error_kind` keeps ``error.type`` low
cardinality) and :class:`AttributeCache`, the attribute dicts built once per
call shape and reused on every request: span-start attributes of an upstream
call, GenAI client metric attributes, SERVER span attributes, and ports parsed
from upstream base URLs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gateway.telemetry import semconv as sc

__all__ = ["CACHE_LIMIT", "AttributeCache", "UpstreamKey", "as_count", "as_number",
           "clean_attrs", "error_kind"]

UpstreamKey = tuple[str, str, str, str, "int | None", bool]
"""(operation, provider, request model, server address, server port, stream)."""
CACHE_LIMIT = 4096
"""Entries per attribute cache; a cache is emptied when full (response models and
error types come from the upstream, so their number is not under our control)."""


def clean_attrs(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Keep only values OTLP can carry; drop None."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if value is None:
            continue
        if isinstance(value, (bool, int, float, str)):
            out[key] = value
        elif isinstance(value, (list, tuple)):
            out[key] = [str(v) for v in value]
        else:
            out[key] = str(value)
    return out


def as_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def as_count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def error_kind(error: Any) -> str:
    """A low-cardinality ``error.type`` from a layer's error value."""
    text = str(error)
    if text and len(text) <= 64 and text.replace("_", "").replace(".", "").isalnum():
        return text
    return sc.ERROR_TYPE_OTHER


class AttributeCache:
    """Attribute sets built once and reused (never mutated after caching; the SDK
    copies what it keeps): span-start attributes per upstream call shape, metric
    attributes per (call shape, response model, error, token type), SERVER span
    attributes per request shape."""

    __slots__ = ("_metric", "_ports", "_server", "_upstream")

    def __init__(self) -> None:
        self._upstream: dict[UpstreamKey, tuple[str, dict[str, Any]]] = {}
        self._metric: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._server: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._ports: dict[str, int | None] = {}

    def port_of(self, url: str) -> int | None:
        try:
            return self._ports[url]
        except KeyError:
            pass
        from urllib.parse import urlsplit
        try:
            parts = urlsplit(url)
            port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        except ValueError:
            port = None
        if len(self._ports) >= CACHE_LIMIT:
            self._ports.clear()
        self._ports[url] = port
        return port

    def upstream_span(self, key: UpstreamKey) -> tuple[str, dict[str, Any]]:
        """The CLIENT span's name and start attributes for one upstream call shape."""
        found = self._upstream.get(key)
        if found is None:
            operation, provider, model, address, port, stream = key
            attrs: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: operation,
                                     sc.GEN_AI_PROVIDER_NAME: provider,
                                     sc.GEN_AI_REQUEST_MODEL: model,
                                     sc.SERVER_ADDRESS: address,
                                     sc.GEN_AI_REQUEST_STREAM: stream}
            if port is not None:
                attrs[sc.SERVER_PORT] = port
            if len(self._upstream) >= CACHE_LIMIT:
                self._upstream.clear()
            # The operation alone: the model is the client's string (an upstream whose
            # ``models`` is a glob routes any), kept in ``gen_ai.request.model``.
            found = self._upstream[key] = (operation, attrs)
        return found

    def metric(self, key: UpstreamKey, response_model: str | None,
               error_type: str | None, token_type: str | None) -> dict[str, Any]:
        """GenAI client metric attributes (no port, no stream flag: as before)."""
        full = (key, response_model, error_type, token_type)
        attrs = self._metric.get(full)
        if attrs is None:
            operation, provider, model, address, _port, _stream = key
            attrs = {sc.GEN_AI_OPERATION_NAME: operation, sc.GEN_AI_PROVIDER_NAME: provider,
                     sc.GEN_AI_REQUEST_MODEL: model, sc.SERVER_ADDRESS: address}
            if response_model is not None:
                attrs[sc.GEN_AI_RESPONSE_MODEL] = response_model
            if error_type is not None:
                attrs[sc.ERROR_TYPE] = error_type
            if token_type is not None:
                attrs[sc.GEN_AI_TOKEN_TYPE] = token_type
            if len(self._metric) >= CACHE_LIMIT:
                self._metric.clear()
            self._metric[full] = attrs
        return attrs

    def server(self, key: tuple[Any, ...]) -> dict[str, Any]:
        """SERVER span attributes for ``(method, route, path, scheme, http_version,
        server host, server port)``; the caller copies before adding to them."""
        static = self._server.get(key)
        if static is None:
            static = clean_attrs([(sc.HTTP_REQUEST_METHOD, key[0]), (sc.HTTP_ROUTE, key[1]),
                                  (sc.URL_PATH, key[2]), (sc.URL_SCHEME, key[3]),
                                  (sc.NETWORK_PROTOCOL_VERSION, key[4]),
                                  (sc.SERVER_ADDRESS, key[5]), (sc.SERVER_PORT, key[6])])
            if len(self._server) >= CACHE_LIMIT:
                self._server.clear()
            self._server[key] = static
        return static
