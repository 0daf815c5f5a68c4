"""The configuration schema: strict models, unknown keys are errors.

Where verification jobs run (``shadow``, ``pool``, ``redis``) is
:mod:`gateway.settings.jobs`, upstream failover :mod:`gateway.settings.routing`.
Loading a file and the ``GATEWAY_*`` environment into them is
:mod:`gateway.settings.load`; the names are re-exported by :mod:`gateway.settings`.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from gateway.settings.jobs import PoolConfig, RedisConfig, ShadowConfig
from gateway.settings.routes import DEFAULT_KEY_ROUTES, parse_rule
from gateway.settings.routing import RoutingConfig

__all__ = [
    "DEFAULT_FLUSH_SECONDS", "DEFAULT_MAX_RESPONSE_BYTES", "AuditConfig",
    "AuditDashboardConfig", "AuthConfig", "ConfigError", "GatewayKey",
    "JudgeConfig", "ServerConfig", "Settings",
    "TelemetryConfig",
    "TenantConfig", "Timeouts", "UpstreamConfig", "default_policies_dir",
]

ENV_PREFIX = "GATEWAY_"


class ConfigError(Exception):
    """Configuration is invalid; the message names the source and dotted key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _expect_list(what: str, example: str) -> Callable[[Any], Any]:
    """A before-validator: a list is required (not pydantic's "a valid tuple")."""

    def check(value: Any) -> Any:
        if not isinstance(value, (list, tuple)):
            raise PydanticCustomError("list_expected", f"expected a list of {what}, e.g. {example}")
        return value

    return check


DEFAULT_FLUSH_SECONDS = 5.0
"""How long shutdown waits, at most and in all, for the telemetry flush."""

DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
"""32 MiB: far above any real chat completion, far below what hurts the process."""


class Timeouts(_Strict):
    connect: float = Field(10.0, gt=0, description="seconds to open a connection")
    read: float = Field(600.0, gt=0, description="seconds between bytes from upstream")
    total: float | None = Field(None, gt=0, description="whole-request cap (None = none)")


class UpstreamConfig(_Strict):
    name: str
    base_url: str = Field(description="OpenAI-compatible base URL including /v1")
    kind: Literal["openai", "anthropic"] = "openai"
    """``anthropic``: Anthropic's Messages API, translated (``gateway.upstream.anthropic``)."""
    api_key_env: str | None = Field(
        None, description="environment variable holding this upstream's API key")
    models: tuple[str, ...] = ("*",)
    """Model-name glob patterns routed here; first matching upstream wins."""
    timeouts: Timeouts = Timeouts()
    max_connections: int = Field(1000, ge=1)
    max_response_bytes: int = Field(DEFAULT_MAX_RESPONSE_BYTES, ge=1024)
    """Largest upstream body the gateway holds (decompressed): a JSON answer, or a stream
    buffered or accumulated for verification. Over it: 502 ``upstream_response_too_large``
    (an error event once a stream has started). A stream relayed without verification is
    passed through, not held, and not counted."""
    responses_api: bool | None = None
    """Whether the upstream serves ``POST /responses`` (OpenAI's Responses API) itself.
    ``false``: the gateway translates ``/v1/responses`` requests to chat completions and
    the answers back (``gateway.upstream.responses_bridge``; a 400 naming any field that
    has no exact translation). Default: ``true`` for ``kind: openai``, ``false`` for
    ``kind: anthropic`` (where ``true`` is an error)."""

    _models_list = field_validator("models", mode="before")(
        _expect_list("globs", '["gpt-*"]'))

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v.rstrip("/")

    @model_validator(mode="after")
    def _responses_api(self) -> UpstreamConfig:
        if self.kind == "anthropic" and self.responses_api:
            raise ValueError("responses_api: true is not possible with kind: anthropic "
                             "(Anthropic has no Responses API; the gateway translates)")
        return self

    @property
    def speaks_responses(self) -> bool:
        """``responses_api``, or its default for the ``kind``."""
        return self.kind == "openai" if self.responses_api is None else self.responses_api

    def matches(self, model: str) -> bool:
        return any(fnmatch.fnmatchcase(model, p) for p in self.models)

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None


def _routes_list(value: Any) -> Any:
    """A before-validator: ``None`` or a list of route rules."""
    if value is None:
        return value
    return _expect_list("routes", '["POST /v1/chat/completions", "GET /v1/files/*"]')(value)


def _check_rule(rule: str) -> str:
    parse_rule(rule)  # ValueError naming the rule and what is wrong with it
    return rule


RouteRule = Annotated[str, AfterValidator(_check_rule)]
"""``"METHOD /v1/path-glob"`` (see :mod:`gateway.settings.routes`)."""


class GatewayKey(_Strict):
    name: str
    tenant: str
    key: str | None = Field(None, repr=False)
    key_env: str | None = None
    routes: tuple[RouteRule, ...] | None = None
    """Routes this key may call; None: its tenant's, else ``auth.routes``."""

    _routes_in = field_validator("routes", mode="before")(_routes_list)
    policy_selection: bool = Field(False, description=(
        "the key may choose its verification policy (x-verity-policy, or the headers/"
        "metadata a policy matches on); never past an enforced policy"))

    @model_validator(mode="after")
    def _one_source(self) -> GatewayKey:
        if (self.key is None) == (self.key_env is None):
            raise ValueError("give exactly one of 'key' or 'key_env'")
        return self

    def secret(self) -> str | None:
        return self.key if self.key is not None else os.environ.get(self.key_env or "")


class TenantConfig(_Strict):
    routes: tuple[RouteRule, ...] | None = None
    """Routes the tenant's keys may call (a key's own ``routes`` wins)."""

    _routes_in = field_validator("routes", mode="before")(_routes_list)


class AuthConfig(_Strict):
    keys: tuple[GatewayKey, ...] = ()
    """Gateway keys. Empty: the client's Authorization header is forwarded as is."""
    routes: tuple[RouteRule, ...] | None = None
    """Routes every caller may call unless its key or tenant has its own list. None:
    ``gateway.settings.routes.DEFAULT_KEY_ROUTES`` with gateway keys, every route without."""
    tenants: dict[str, TenantConfig] = Field(default_factory=dict)
    """Per-tenant settings (``routes``), by the tenant names of ``keys``."""

    _keys_list = field_validator("keys", mode="before")(
        _expect_list("keys", "[{name: k, tenant: t, key_env: MY_KEY}]"))
    _routes_in = field_validator("routes", mode="before")(_routes_list)

    def effective_routes(self, key: GatewayKey | None) -> tuple[str, ...] | None:
        """The rules that apply to ``key`` (None: forward mode, no key); None: all routes.

        The most specific list wins: the key's, its tenant's, ``auth.routes``, then the
        default (:data:`~gateway.settings.routes.DEFAULT_KEY_ROUTES` with gateway keys)."""
        if key is not None:
            if key.routes is not None:
                return key.routes
            tenant = self.tenants.get(key.tenant)
            if tenant is not None and tenant.routes is not None:
                return tenant.routes
        if self.routes is not None:
            return self.routes
        return DEFAULT_KEY_ROUTES if self.keys else None


class TelemetryConfig(_Strict):
    flush_seconds: float = Field(DEFAULT_FLUSH_SECONDS, ge=0)
    """On shutdown, how long the final telemetry flush may take in all (every signal
    flushed at once); 0: do not wait. Exporters themselves are ``OTEL_*``-configured."""


class AuditDashboardConfig(_Strict):
    """The audit dashboard (``gateway.dashboard``) mounted on the gateway itself."""

    path: str | None = None
    """Where the pages are served (e.g. ``/audit``); None: not mounted (the default).
    ``gateway audit serve`` serves the same pages on a port of their own."""
    keys: tuple[str, ...] = ()
    """Names of the gateway keys (``auth.keys[].name``) that may open the pages; required
    with ``path``: the pages show every tenant's records."""
    jaeger_url: str | None = None
    """Jaeger UI base URL (``http://jaeger:16686``): a record page links to its trace."""

    _keys_list = field_validator("keys", mode="before")(_expect_list("key names", "[ops]"))

    @field_validator("path")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        if v is None:
            return v
        v = v.rstrip("/")
        if not v.startswith("/") or v in ("", "/healthz", "/readyz") or v == "/v1" \
                or v.startswith("/v1/") or any(c in v for c in "?#*% "):
            raise ValueError("must be a path of its own such as /audit (not /, /v1/..., "
                             "/healthz or /readyz)")
        return v

    @field_validator("jaeger_url")
    @classmethod
    def _jaeger(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v.rstrip("/") if v else v


class AuditConfig(_Strict):
    """The audit store (``gateway.audit``): where records go, how files rotate, what is
    kept. ``path`` ending in ``.jsonl`` is one file that every process appends to (never
    rotated); any other path is a directory of ``date=YYYY-MM-DD/`` folders in which each
    process writes files of its own, rotated by size and age, optionally compacted to
    Parquet and pruned by age and size."""

    path: str | None = "verity-audit.jsonl"
    """Append-only JSONL audit file, or a directory (see above); None disables the sink."""
    rotate_mb: float = Field(64.0, gt=0)
    """Directory layout: a file is closed and a new one begun past this size (MiB)."""
    rotate_seconds: float = Field(3600.0, gt=0)
    """Directory layout: ... or once it is this old (and at every UTC day change)."""
    compact: bool = False
    """Directory layout: compact each closed file to Parquet (what `gateway audit report`
    reads fast), in a low-priority thread of the writing process."""
    retention_days: float | None = Field(None, gt=0)
    """Directory layout: delete closed files of days older than this; None: keep all."""
    retention_mb: float | None = Field(None, gt=0)
    """Directory layout: delete the oldest closed files while the directory is larger."""
    dashboard: AuditDashboardConfig = AuditDashboardConfig()

    def is_directory(self) -> bool:
        """Whether ``path`` names a directory layout (anything not ending in ``.jsonl``)."""
        return bool(self.path) and not str(self.path).endswith(".jsonl")


class JudgeConfig(_Strict):
    """The model that model-based layers call (see ``gateway.upstream.judge``).

    By default the judge is the first upstream, called with the request's own
    model. Name another upstream, or give a separate endpoint with ``base_url``
    (and ``kind: anthropic`` for Anthropic's Messages API).
    """

    kind: Literal["openai", "anthropic"] | None = None
    """API of the judge endpoint; None: the judge upstream's own kind (``openai``
    with ``base_url``)."""
    upstream: str | None = None
    """Upstream name used for judge calls (default: the first upstream)."""
    base_url: str | None = None
    """A separate judge endpoint (overrides ``upstream``)."""
    api_key_env: str | None = None
    """Environment variable with the judge endpoint's key (with ``base_url``)."""
    model: str | None = None
    """Judge model; None: the request's model."""
    timeout: float = Field(30.0, gt=0)
    max_concurrency: int = Field(16, ge=1)
    cache_size: int = Field(1024, ge=0)
    """Replies cached for identical temperature-0 prompts (0 disables)."""
    price_per_1k_input: float = Field(0.0, ge=0)
    price_per_1k_output: float = Field(0.0, ge=0)
    max_response_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    """Largest judge reply read (decompressed); over it the judge call fails."""
    structured_output: Literal["auto", "json_schema", "json_object", "prompt"] = "auto"
    """How an OpenAI-compatible judge is asked for a layer's reply schema: ``auto``
    tries ``json_schema``, then ``json_object`` (with the schema), then the prompt
    alone, once per model, and remembers (``gateway.upstream.judge``)."""


class ServerConfig(_Strict):
    """Limits of the HTTP server itself, enforced before a request reaches the gateway
    (``gateway.http.server_limits``)."""

    max_connections: int = Field(2048, ge=1)
    """Open client connections at most; one more is answered 503 and closed at once."""
    header_timeout: float = Field(10.0, gt=0)
    """Seconds a connection may take to send a request's headers (from connect, or from
    a kept-alive request's first byte); then 408 and closed."""
    max_header_bytes: int = Field(64 * 1024, ge=1024)
    """Request line plus headers at most; over it 431 and closed."""
    workers: int = Field(1, ge=1, le=64)
    """Relay processes sharing the port (``gateway serve --workers``); the limits above
    apply to each."""
    gc_gen0_threshold: int = Field(10_000, ge=700, le=1_000_000)
    """The cyclic collector's generation-0 threshold, set once the gateway is ready
    (Python's default is 700). The objects of the requests in flight alone pass 700 at
    a few dozen concurrent requests, so at 700 the relay ran a young collection every
    ~10 requests that found nothing to free (docs/benchmarks.md, session 6)."""


class Settings(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    upstreams: tuple[UpstreamConfig, ...] = ()
    auth: AuthConfig = AuthConfig()
    policies_dir: str | None = None
    """None: the shipped policies. An empty directory: pure pass-through."""
    max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    reload_policies: bool = True
    shadow: ShadowConfig = ShadowConfig()
    pool: PoolConfig = PoolConfig()
    audit: AuditConfig = AuditConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    judge: JudgeConfig = JudgeConfig()
    server: ServerConfig = ServerConfig()
    redis: RedisConfig = RedisConfig()
    routing: RoutingConfig = RoutingConfig()
    """Retries, passive health, pools and fallbacks (:mod:`gateway.settings.routing`)."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    readyz_detail: Literal["keyed", "public"] = "keyed"
    """Who sees ``/readyz``'s detail (policy files, their errors, the shadow queue).
    ``keyed``: a request with a valid gateway key; in forward mode nobody (the log and
    ``gateway policy check`` say the same). ``public``: everyone (a private network,
    development). Without it the answer is ``{"status": …}`` only."""

    _upstreams_list = field_validator("upstreams", mode="before")(
        _expect_list("upstreams", '[{name: a, base_url: "http://a/v1"}]'))

    def route(self, model: str) -> UpstreamConfig | None:
        for upstream in self.upstreams:
            if upstream.matches(model):
                return upstream
        return None

    @model_validator(mode="after")
    def _redis_runner_needs_a_url(self) -> Settings:
        if self.shadow.runner == "redis" and not self.redis.url:
            raise ValueError("shadow.runner is redis but redis.url is not set")
        return self

    def resolved_policies_dir(self) -> Path:
        return Path(self.policies_dir) if self.policies_dir else default_policies_dir()


def default_policies_dir() -> Path:
    """The shipped policies: the repo's ``policies/`` or the installed data copy."""
    import sys

    here = Path(__file__).resolve().parent.parent.parent / "policies"
    if here.is_dir():
        return here
    return Path(sys.prefix) / "share" / "verity-gateway" / "policies"
