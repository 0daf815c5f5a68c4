"""Loading the configuration: a YAML file, then ``GATEWAY_*`` environment variables.

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
import os
import typing
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from gateway.settings.routing import routing_errors
from gateway.settings.schema import ENV_PREFIX, ConfigError, Settings

__all__ = ["load_settings"]


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _secret_refs(node: Any) -> set[str]:
    """Environment names the config points at for secrets (``key_env``, ``api_key_env``,
    ``password_env``)."""
    if isinstance(node, Mapping):
        refs = {v for k, v in node.items()
                if k in ("key_env", "api_key_env", "password_env") and isinstance(v, str)}
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
    board = settings.audit.dashboard
    if board.path is not None:
        keys = sorted(k.name for k in settings.auth.keys)
        unknown = sorted(set(board.keys) - set(keys))
        if not board.keys or unknown:
            raise ConfigError(
                "invalid configuration: audit.dashboard.keys: " + (
                    f"{', '.join(unknown)} not among auth.keys (known: "
                    f"{', '.join(keys) or 'none'})" if unknown else
                    f"name the gateway keys (auth.keys[].name) that may open the audit "
                    f"pages at {board.path}: they show every tenant's records"))
    names = [u.name for u in settings.upstreams]
    if len(set(names)) != len(names):
        raise ConfigError("invalid configuration: upstreams: names must be unique")
    problems = routing_errors(settings.routing, names)
    if problems:
        raise ConfigError("\n".join(["invalid configuration:"] + [f"  {p}" for p in problems]))
    if settings.judge.upstream and settings.judge.upstream not in names:
        raise ConfigError(f"invalid configuration: judge.upstream: no upstream named "
                          f"{settings.judge.upstream!r} (known: {', '.join(names) or 'none'})")
    return settings
