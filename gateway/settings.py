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

import fnmatch
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = ["ConfigError", "Settings", "UpstreamConfig", "load_settings", "default_policies_dir"]

ENV_PREFIX = "GATEWAY_"


class ConfigError(Exception):
    """Configuration is invalid; the message names the source and dotted key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Timeouts(_Strict):
    connect: float = Field(10.0, gt=0, description="seconds to open a connection")
    read: float = Field(600.0, gt=0, description="seconds between bytes from upstream")
    total: float | None = Field(None, gt=0, description="whole-request cap (None = none)")


class UpstreamConfig(_Strict):
    name: str
    base_url: str = Field(description="OpenAI-compatible base URL including /v1")
    kind: Literal["openai"] = "openai"
    api_key_env: str | None = Field(
        None, description="environment variable holding this upstream's API key")
    models: tuple[str, ...] = ("*",)
    """Model-name glob patterns routed here; first matching upstream wins."""
    timeouts: Timeouts = Timeouts()
    max_connections: int = Field(1000, ge=1)

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


class GatewayKey(_Strict):
    name: str
    tenant: str
    key: str | None = Field(None, repr=False)
    key_env: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> GatewayKey:
        if (self.key is None) == (self.key_env is None):
            raise ValueError("give exactly one of 'key' or 'key_env'")
        return self

    def secret(self) -> str | None:
        return self.key if self.key is not None else os.environ.get(self.key_env or "")


class AuthConfig(_Strict):
    keys: tuple[GatewayKey, ...] = ()
    """Gateway keys. Empty: the client's Authorization header is forwarded as is."""


class ShadowConfig(_Strict):
    queue_size: int = Field(1000, ge=1)
    concurrency: int = Field(4, ge=1)
    drain_seconds: float = Field(10.0, ge=0)


class AuditConfig(_Strict):
    path: str | None = "verity-audit.jsonl"
    """Append-only JSONL audit file; None disables the file sink."""


class JudgeConfig(_Strict):
    upstream: str | None = None
    """Upstream name used for judge calls (default: the first upstream)."""
    model: str | None = None
    price_per_1k_input: float = 0.0
    price_per_1k_output: float = 0.0


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
    judge: JudgeConfig = JudgeConfig()
    log_level: Literal["debug", "info", "warning", "error"] = "info"

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


def _env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    layer: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name in ("GATEWAY_CONFIG",):
            continue
        path = name[len(ENV_PREFIX):].lower().split("__")
        if path == ["upstream"]:
            layer["upstreams"] = [{"name": "default", "base_url": raw}]
            continue
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigError(f"environment {name}: not a valid value: {exc}") from exc
        node = layer
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return layer


def _format_errors(exc: ValidationError, source: str) -> str:
    lines = [f"invalid configuration ({source}):"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"  {loc}: {msg}")
    return "\n".join(lines)


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build :class:`Settings` from file, environment and overrides; raise ConfigError."""
    environ = os.environ if environ is None else environ
    config_file = config_file or environ.get("GATEWAY_CONFIG")
    data: dict[str, Any] = {}
    sources = ["defaults"]
    if config_file:
        path = Path(config_file)
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path}: top level must be a mapping")
        data = loaded
        sources.append(str(path))
    env = _env_layer(environ)
    if env:
        data = _deep_merge(data, env)
        sources.append("GATEWAY_* environment")
    if overrides:
        data = _deep_merge(data, {k: v for k, v in overrides.items() if v is not None})
        sources.append("command line")
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc, " < ".join(sources))) from None
    names = [u.name for u in settings.upstreams]
    if len(set(names)) != len(names):
        raise ConfigError("invalid configuration: upstreams: names must be unique")
    return settings
