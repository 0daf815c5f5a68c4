"""Gateway configuration: a YAML file, then ``GATEWAY_*`` environment variables.

Precedence (later wins): built-in defaults < config file < environment <
command-line flags. Environment names map onto keys with ``__`` for nesting,
e.g. ``GATEWAY_PORT=9000``, ``GATEWAY_SHADOW__QUEUE_SIZE=500``; values are parsed
as YAML scalars/flow collections (``GATEWAY_UPSTREAMS='[{name: a, base_url: …}]'``).
``GATEWAY_UPSTREAM=<url>`` is the shortcut for "every model goes to this URL".
``GATEWAY_CONFIG`` names the config file.

Validation is strict: unknown keys are errors, and every error names the dotted
key (``upstreams.0.timeouts.read``) and where it came from.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import typing
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from gateway.routes import DEFAULT_KEY_ROUTES, parse_rule
from gateway.telemetry import DEFAULT_FLUSH_SECONDS

__all__ = ["ConfigError", "Settings", "UpstreamConfig", "load_settings", "default_policies_dir"]

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

    _models_list = field_validator("models", mode="before")(
        _expect_list("globs", '["gpt-*"]'))

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v.rstrip("/")

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
"""``"METHOD /v1/path-glob"`` (see :mod:`gateway.routes`)."""


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
    ``gateway.routes.DEFAULT_KEY_ROUTES`` with gateway keys, every route without."""
    tenants: dict[str, TenantConfig] = Field(default_factory=dict)
    """Per-tenant settings (``routes``), by the tenant names of ``keys``."""

    _keys_list = field_validator("keys", mode="before")(
        _expect_list("keys", "[{name: k, tenant: t, key_env: MY_KEY}]"))
    _routes_in = field_validator("routes", mode="before")(_routes_list)

    def effective_routes(self, key: GatewayKey | None) -> tuple[str, ...] | None:
        """The rules that apply to ``key`` (None: forward mode, no key); None: all routes.

        The most specific list wins: the key's, its tenant's, ``auth.routes``, then the
        default (:data:`~gateway.routes.DEFAULT_KEY_ROUTES` with gateway keys)."""
        if key is not None:
            if key.routes is not None:
                return key.routes
            tenant = self.tenants.get(key.tenant)
            if tenant is not None and tenant.routes is not None:
                return tenant.routes
        if self.routes is not None:
            return self.routes
        return DEFAULT_KEY_ROUTES if self.keys else None


class ShadowConfig(_Strict):
    queue_size: int = Field(1000, ge=1)
    concurrency: int = Field(4, ge=1)
    drain_seconds: float = Field(10.0, ge=0)


class TelemetryConfig(_Strict):
    flush_seconds: float = Field(DEFAULT_FLUSH_SECONDS, ge=0)
    """On shutdown, how long the final telemetry flush may take in all (every signal
    flushed at once); 0: do not wait. Exporters themselves are ``OTEL_*``-configured."""


class AuditConfig(_Strict):
    path: str | None = "verity-audit.jsonl"
    """Append-only JSONL audit file; None disables the file sink."""


class JudgeConfig(_Strict):
    """The model that model-based layers call (see ``gateway.judge``).

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


class ServerConfig(_Strict):
    """Limits of the HTTP server itself, enforced before a request reaches the gateway
    (``gateway.server_limits``)."""

    max_connections: int = Field(2048, ge=1)
    """Open client connections at most; one more is answered 503 and closed at once."""
    header_timeout: float = Field(10.0, gt=0)
    """Seconds a connection may take to send a request's headers (from connect, or from
    a kept-alive request's first byte); then 408 and closed."""
    max_header_bytes: int = Field(64 * 1024, ge=1024)
    """Request line plus headers at most; over it 431 and closed."""


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
    audit: AuditConfig = AuditConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    judge: JudgeConfig = JudgeConfig()
    server: ServerConfig = ServerConfig()
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

    def resolved_policies_dir(self) -> Path:
        return Path(self.policies_dir) if self.policies_dir else default_policies_dir()


def default_policies_dir() -> Path:
    """The shipped policies: the repo's ``policies/`` or the installed data copy."""
    import sys

    here = Path(__file__).resolve().parent.parent / "policies"
    if here.is_dir():
        return here
    return Path(sys.prefix) / "share" / "verity-gateway" / "policies"


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _secret_refs(node: Any) -> set[str]:
    """Environment names the config points at for secrets (``key_env``, ``api_key_env``)."""
    if isinstance(node, Mapping):
        refs = {v for k, v in node.items()
                if k in ("key_env", "api_key_env") and isinstance(v, str)}
        for value in node.values():
            refs |= _secret_refs(value)
        return refs
    if isinstance(node, (list, tuple)):
        return set().union(*(_secret_refs(v) for v in node)) if node else set()
    return set()


_LIST_EXAMPLES = {
    ("upstreams",): '[{name: a, base_url: "http://a/v1", models: [gpt-*]}]',
    ("auth", "keys"): "[{name: k, tenant: t, key_env: MY_KEY}]",
}


def _list_field(path: list[str]) -> tuple[str, ...] | None:
    """The list-valued key that ``path`` reaches inside (``upstreams`` for
    ``upstreams.0.name``), or None: lists are set whole, never item by item."""
    model: type[BaseModel] = Settings
    for i, part in enumerate(path[:-1]):
        field = model.model_fields.get(part)
        if field is None:
            return None  # an unknown key: reported by validation
        annotation = field.annotation
        if typing.get_origin(annotation) is tuple:
            return tuple(path[:i + 1])
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return None


def _env_layer(environ: Mapping[str, str], skip: Collection[str] = (),
               origins: dict[tuple[str, ...], str] | None = None) -> dict[str, Any]:
    """``GATEWAY_*`` variables as a nested mapping; ``skip`` names hold secrets, not config.

    ``origins`` (if given) receives the key path each variable set.
    """
    layer: dict[str, Any] = {}
    seen: dict[tuple[str, ...], str] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name in ("GATEWAY_CONFIG",) or name in skip:
            continue
        path = name[len(ENV_PREFIX):].lower().split("__")
        value: Any
        if path == ["upstream"]:
            path, value = ["upstreams"], [{"name": "default", "base_url": raw}]
        else:
            try:
                value = yaml.safe_load(raw) if raw.strip() else None
            except yaml.YAMLError as exc:
                raise ConfigError(f"environment {name}: not a valid value: {exc}") from exc
        key = tuple(path)
        inside = _list_field(path)
        if inside is not None:
            whole = ENV_PREFIX + "__".join(inside).upper()
            example = _LIST_EXAMPLES.get(inside, "[...]")
            raise ConfigError(
                f"invalid configuration (GATEWAY_* environment):\n"
                f"  {'.'.join(inside)}: a list is set whole, as one YAML value, not item by "
                f"item: {whole}='{example}' (from {name})")
        # Two variables for one key (GATEWAY_UPSTREAM and GATEWAY_UPSTREAMS), or for a
        # section and a key inside it: the environment's order would pick the winner.
        clash = next((p for p in seen if p[:len(key)] == key or key[:len(p)] == p), None)
        if clash is not None:
            raise ConfigError(f"environment {seen[clash]} and {name} both set "
                              f"{'.'.join(key if len(key) < len(clash) else clash)}: set only one")
        seen[key] = name
        node = layer
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    if origins is not None:
        origins.update(seen)
    return layer


def _has_path(data: Any, path: tuple[str, ...]) -> bool:
    for part in path:
        if isinstance(data, Mapping) and part in data:
            data = data[part]
        elif isinstance(data, (list, tuple)) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return False
    return True


def _origin(loc: tuple[str, ...], overrides: Mapping[str, Any] | None,
            env_origins: dict[tuple[str, ...], str], file: str | None,
            file_data: Mapping[str, Any]) -> str:
    """Where the value at ``loc`` came from (later sources win), for error messages."""
    if overrides and loc and overrides.get(loc[0]) is not None and (
            not isinstance(overrides[loc[0]], Mapping) or _has_path(overrides, loc)):
        return "from the command line"
    for n in range(len(loc), 0, -1):
        if loc[:n] in env_origins:
            return f"from {env_origins[loc[:n]]}"
    for path, name in env_origins.items():
        if path[:len(loc)] == loc:
            return f"from {name}"
    if file and _has_path(file_data, loc[:1]):
        return f"in {file}"
    return ""


def _format_errors(exc: ValidationError, source: str,
                   where: Callable[[tuple[str, ...]], str] = lambda loc: "") -> str:
    lines = [f"invalid configuration ({source}):"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        origin = where(tuple(str(p) for p in err["loc"]))
        lines.append(f"  {loc}: {msg}" + (f" ({origin})" if origin else ""))
    return "\n".join(lines)


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    check_secrets: bool = False,
    origins: dict[str, str] | None = None,
) -> Settings:
    """Build :class:`Settings` from file, environment and overrides; raise ConfigError.

    ``check_secrets``: a gateway key's ``key_env`` must be set (non-empty) in
    ``environ``, as ``gateway serve`` requires before it starts. ``origins`` (if
    given) receives, per top-level key set by a source, where it came from
    (``"in FILE"``, ``"from GATEWAY_PORT"``, ``"from the command line"``).
    """
    environ = os.environ if environ is None else environ
    config_file = config_file or environ.get("GATEWAY_CONFIG")
    data: dict[str, Any] = {}
    sources = ["defaults"]
    if config_file:
        path = Path(config_file)
        from gateway.policy.locate import PolicyError, _duplicate_keys, _parse_yaml

        try:
            root, loaded = _parse_yaml(path.read_text(encoding="utf-8"), str(path))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except PolicyError as exc:
            at = f"line {exc.line}: " if exc.line is not None else ""
            raise ConfigError(f"config file {path} is not valid YAML: {at}"
                              f"{exc.message.removeprefix('invalid YAML: ')}") from None
        # PyYAML keeps the last of two equal keys silently (two `port:` lines): refuse,
        # as policy files do.
        duplicates = _duplicate_keys(root, str(path))
        if duplicates:
            raise ConfigError("\n".join(
                [f"invalid configuration ({path}):"]
                + [f"  {d.key}: {d.message} (in {path}, line {d.line})" for d in duplicates]))
        loaded = loaded or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path}: top level must be a mapping")
        data = loaded
        sources.append(str(path))
    # Variables named by key_env / api_key_env hold secrets, not config (GATEWAY_KEY_TEAM_A).
    refs = _secret_refs(data) | _secret_refs(overrides or {})
    for name, raw in environ.items():
        if name.startswith(ENV_PREFIX) and name not in refs:
            # Invalid YAML is reported below, unless the variable is itself a secret.
            with contextlib.suppress(yaml.YAMLError):
                refs |= _secret_refs(yaml.safe_load(raw))
    env_origins: dict[tuple[str, ...], str] = {}
    env = _env_layer(environ, refs, env_origins)
    file_data = data
    if env:
        data = _deep_merge(data, env)
        sources.append("GATEWAY_* environment")
    if overrides:
        data = _deep_merge(data, {k: v for k, v in overrides.items() if v is not None})
        sources.append("command line")
    def where(loc: tuple[str, ...]) -> str:
        return _origin(loc, overrides, env_origins, str(config_file) if config_file else None,
                       file_data)

    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc, " < ".join(sources), where)) from None
    if origins is not None:
        origins.update({key: origin for key in data if (origin := where((key,)))})
    if check_secrets:
        unset = [(i, k) for i, k in enumerate(settings.auth.keys)
                 if k.key_env is not None and not environ.get(k.key_env)]
        if unset:
            lines = [f"invalid configuration ({' < '.join(sources)}):"]
            for i, k in unset:
                origin = where(("auth", "keys", str(i), "key_env"))
                lines.append(f"  auth.keys.{i}.key_env: environment variable {k.key_env} "
                             f"(gateway key {k.name!r}) is not set or empty"
                             + (f" ({origin})" if origin else ""))
            raise ConfigError("\n".join(lines))
    tenants = sorted({k.tenant for k in settings.auth.keys})
    for tenant in settings.auth.tenants:
        if tenant not in tenants:
            raise ConfigError(f"invalid configuration: auth.tenants.{tenant}: no gateway key "
                              f"has this tenant (tenants of auth.keys: "
                              f"{', '.join(tenants) or 'none'})")
    names = [u.name for u in settings.upstreams]
    if len(set(names)) != len(names):
        raise ConfigError("invalid configuration: upstreams: names must be unique")
    if settings.judge.upstream and settings.judge.upstream not in names:
        raise ConfigError(f"invalid configuration: judge.upstream: no upstream named "
                          f"{settings.judge.upstream!r} (known: {', '.join(names) or 'none'})")
    return settings
