"""Policy files: strict loading, resolution against the layer registry, safe reload.

Raw → resolved, as in tensorzero: a YAML file is parsed (keeping node marks for
line numbers), validated into :class:`~gateway.policy.models.PolicySpec`, then
each layer name is resolved in the registry and its ``config`` validated by that
layer's own ``Config``. Every problem becomes a :class:`PolicyError` naming the
file, the dotted key and the line::

    policies/x.yaml:12: layers.0.config.max_chars: Input should be greater than or equal to 0

Errors and line finding live in ``gateway.policy.locate``; a directory of
policies, its cross-file rules and reloading in ``gateway.policy.store``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gateway.layers.base import Layer, LayerConfig
from gateway.layers.registry import BUILTIN, LayerRegistry
from gateway.policy.locate import (
    PolicyError,
    _duplicate_keys,
    _line,
    _locate,
    _parse_yaml,
    _validation_errors,
)
from gateway.policy.models import LayerSpec, PolicySpec
from gateway.policy.select import Matcher

__all__ = [
    "Policy", "PolicyError", "ResolvedLayer", "load_policy_file", "load_policy_text",
    "policy_files",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class ResolvedLayer:
    key: str
    """``LayerSpec.key``: the id, or the name when no id is given."""
    name: str
    """Registry name."""
    spec: LayerSpec
    cls: type[Layer]
    config: LayerConfig
    """``spec.config`` validated by ``cls.Config``."""


@dataclass(frozen=True, slots=True)
class Policy:
    """A loaded, resolved policy, ready for the pipeline. Immutable: a reload makes a new one."""

    name: str
    spec: PolicySpec = field(repr=False)
    source: Path | None
    layers: tuple[ResolvedLayer, ...] = field(repr=False)
    version: str
    """Content hash of the file text: changes on every edit."""
    matcher: Matcher = field(init=False, repr=False, compare=False)
    """``spec.match`` compiled once (selection runs on every request)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "matcher", Matcher(self.spec.match))

    def layer(self, key: str) -> ResolvedLayer:
        for layer in self.layers:
            if layer.key == key:
                return layer
        raise KeyError(f"policy {self.name!r} has no layer {key!r}; "
                       f"its layers: {', '.join(x.key for x in self.layers)}")


def _resolve_layer(raw: Any, i: int, root: yaml.Node | None, source: str,
                   registry: LayerRegistry,
                   ) -> tuple[type[Layer] | None, LayerConfig | None, list[PolicyError]]:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        return None, None, []  # shape errors come from PolicySpec validation
    name = raw["name"]
    try:
        cls = registry.resolve(name)
    except KeyError as exc:
        key, line = _locate(root, ("layers", i, "name"))
        return None, None, [PolicyError(source, key, line, str(exc.args[0]))]
    except ImportError as exc:
        key, line = _locate(root, ("layers", i, "name"))
        return None, None, [PolicyError(source, key, line,
                                        f"layer {name!r} is registered but cannot be imported: {exc}")]
    config = raw.get("config", {})
    if config is None:
        config = {}
    if not isinstance(config, dict):
        return cls, None, []
    try:
        return cls, cls.Config.model_validate(config), []
    except ValidationError as exc:
        return cls, None, _validation_errors(exc, cls.Config, root, source, ("layers", i, "config"))


def _corpus_errors(spec: PolicySpec, root: yaml.Node | None, source: str,
                   path: Path | None) -> list[PolicyError]:
    """``context.corpus_dir`` must be a readable directory (a relative one is relative to
    the policy file), and the corpus is used exactly when ``corpus`` is in ``sources``."""
    from gateway.sources.corpus import corpus_dir_problem, resolve_corpus_dir

    ctx = spec.context
    if not ctx.corpus_dir:
        if "corpus" in ctx.sources:
            key, line = _locate(root, ("context", "sources"))
            return [PolicyError(source, key, line,
                                "`corpus` is listed but `context.corpus_dir` is not set: "
                                "name the corpus directory or remove `corpus`")]
        return []
    key, line = _locate(root, ("context", "corpus_dir"))
    if "corpus" not in ctx.sources:
        return [PolicyError(source, key, line,
                            "`corpus_dir` is set but `corpus` is not in `context.sources`, "
                            "so the corpus would be ignored: add `corpus` to the sources "
                            "or remove `corpus_dir`")]
    problem = corpus_dir_problem(resolve_corpus_dir(ctx.corpus_dir, path))
    if problem is None:
        return []
    if path is not None and not Path(ctx.corpus_dir).expanduser().is_absolute():
        problem += f" (relative paths resolve against the policy file's directory, {path.parent})"
    return [PolicyError(source, key, line, problem)]


def load_policy_text(text: str, source: str = "<string>", *, name: str | None = None,
                     path: Path | None = None, layers: LayerRegistry = BUILTIN) -> Policy:
    """Parse, validate and resolve one policy; raise :class:`PolicyError` with every problem.

    ``name`` is used when the file has no ``name:`` (the loader passes the file stem);
    layer names are resolved in ``layers`` (the shipped registry by default).
    """
    root, data = _parse_yaml(text, source)
    if data is None:
        raise PolicyError(source, "", None,
                          "empty policy file: a policy needs at least `layers:` (docs/policies.md)")
    if not isinstance(data, dict):
        raise PolicyError(source, "", _line(root) if root is not None else None,
                          f"the top level must be a mapping of policy keys, "
                          f"not a {type(data).__name__}")
    errors = _duplicate_keys(root, source)
    spec: PolicySpec | None = None
    try:
        spec = PolicySpec.model_validate(data)
    except ValidationError as exc:
        errors += _validation_errors(exc, PolicySpec, root, source)
    raw_layers = data.get("layers")
    resolved = [_resolve_layer(raw, i, root, source, layers)
                for i, raw in enumerate(raw_layers if isinstance(raw_layers, list) else [])]
    for _, _, errs in resolved:
        errors += errs
    fallback = name or (Path(source).stem if not source.startswith("<") else "policy")
    policy_name = (spec.name if spec is not None and spec.name else None) or fallback
    if spec is not None and not _NAME.match(policy_name):
        key, line = _locate(root, ("name",)) if spec.name else ("name", None)
        errors.append(PolicyError(source, key, line,
                                  f"invalid policy name {policy_name!r}: use letters, digits, "
                                  f"'.', '_' and '-' (it travels in the x-verity-policy header)"))
    if spec is not None and spec.default and spec.match != type(spec.match)():
        key, line = _locate(root, ("match",))
        errors.append(PolicyError(source, key, line,
                                  "a `default: true` policy applies when no other policy matches, "
                                  "so its `match` would be ignored: remove one of them"))
    if spec is not None:
        errors += _corpus_errors(spec, root, source, path)
    if errors or spec is None:
        raise PolicyError.collect(errors)
    resolved_layers = tuple(
        ResolvedLayer(key=ls.key, name=ls.name, spec=ls, cls=cls, config=config)
        for ls, (cls, config, _) in zip(spec.layers, resolved, strict=True)
        if cls is not None and config is not None
    )
    version = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return Policy(name=policy_name, spec=spec, source=path, layers=resolved_layers,
                  version=version)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(str(path), "", None, f"not UTF-8 text: {exc.reason}") from None
    except OSError as exc:
        raise PolicyError(str(path), "", None, f"cannot read: {exc.strerror or exc}") from None


def load_policy_file(path: Path, *, layers: LayerRegistry = BUILTIN) -> Policy:
    """Load one file; the policy name defaults to the file stem."""
    return load_policy_text(_read(path), str(path), name=path.stem, path=path, layers=layers)


def policy_files(directory: Path) -> list[Path]:
    """``*.yaml`` / ``*.yml`` in ``directory`` (not recursive), sorted.

    Hidden names are skipped, which also skips Kubernetes ConfigMap internals
    (``..data``, ``..2024_01_01_…``); the visible entries there are symlinks
    through ``..data`` and are read through it. A dangling symlink is kept so
    that it is reported (and the last good version stays) rather than dropped.
    """
    return [p for p in sorted(directory.iterdir())
            if not p.name.startswith(".") and p.suffix in SUFFIXES and not p.is_dir()]
