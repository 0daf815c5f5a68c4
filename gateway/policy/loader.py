"""Policy files: strict loading, resolution against the layer registry, safe reload.

Raw → resolved, as in tensorzero: a YAML file is parsed (keeping node marks for
line numbers), validated into :class:`~gateway.policy.models.PolicySpec`, then
each layer name is resolved in the registry and its ``config`` validated by that
layer's own ``Config``. Every problem becomes a :class:`PolicyError` naming the
file, the dotted key and the line::

    policies/x.yaml:12: layers.0.config.max_chars: Input should be greater than or equal to 0

:class:`PolicyStore` owns one policies directory. A file that breaks keeps its
last good version live (and is reported in :attr:`PolicyStore.errors` and
:meth:`PolicyStore.status`); the set-level rules (unique names, one default,
``candidates`` naming known policies) are checked across files by
:func:`assemble`, which ``gateway policy check`` uses too.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import logging
import re
import threading
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from gateway.policy.models import LayerSpec, PolicySpec
from gateway.policy.select import Matcher, PolicySet
from gateway.verify import registry
from gateway.verify.base import Layer, LayerConfig

__all__ = [
    "Policy", "PolicyError", "PolicyStore", "ResolvedLayer", "assemble", "load_policy_file",
    "load_policy_text", "policy_files",
]

log = logging.getLogger("gateway.policy")

Loc = Sequence[str | int]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SUFFIXES = (".yaml", ".yml")


class PolicyError(Exception):
    """A policy file problem: ``str(e)`` is ``file:line: dotted.key: message``.

    One file may have several problems; ``errors`` holds them all (the first is
    mirrored in this error's own fields) and :meth:`describe` prints them.
    """

    def __init__(self, file: str, key: str, line: int | None, message: str,
                 *, errors: Sequence[PolicyError] = ()) -> None:
        self.file = file
        self.key = key
        self.line = line
        self.message = message
        self.errors: tuple[PolicyError, ...] = tuple(errors) or (self,)
        super().__init__(file, key, line, message)

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"

    def describe(self) -> str:
        return "\n".join(str(e) for e in self.errors)

    @classmethod
    def collect(cls, errors: Sequence[PolicyError]) -> PolicyError:
        first = errors[0]
        return cls(first.file, first.key, first.line, first.message, errors=errors)


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


# ---- YAML with line numbers ------------------------------------------------------------------

def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _parse_yaml(text: str, source: str) -> tuple[yaml.Node | None, Any]:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else None)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise PolicyError(source, "", mark.line + 1 if mark else None,
                          f"invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise PolicyError(source, "", None, f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()


def _duplicate_keys(node: yaml.Node | None, source: str, path: tuple[str, ...] = ()
                    ) -> list[PolicyError]:
    """PyYAML keeps the last of two equal keys silently; a strict loader refuses."""
    out: list[PolicyError] = []
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for k, v in node.value:
            kv = str(k.value) if isinstance(k, yaml.ScalarNode) else ""
            if kv and kv != "<<":
                if kv in seen:
                    out.append(PolicyError(source, ".".join((*path, kv)), _line(k),
                                           "duplicate key (YAML would keep only the last one)"))
                seen.add(kv)
            out += _duplicate_keys(v, source, (*path, kv))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out += _duplicate_keys(item, source, (*path, str(i)))
    return out


def _locate(root: yaml.Node | None, loc: Loc) -> tuple[str, int | None]:
    """Map a pydantic ``loc`` to (dotted key as written in the file, line).

    Discriminator tags (``actions.fail.regenerate.max_attempts``) and ``[key]``
    markers are dropped from the key; a key missing from the file gets the line
    of its nearest parent.
    """
    node: yaml.Node | None = root
    line = _line(root) if root is not None else None
    shown: list[str] = []
    for part in loc:
        if part == "[key]":
            continue
        if isinstance(node, yaml.MappingNode):
            pairs = {str(k.value): (k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)}
            if str(part) in pairs:
                key_node, node = pairs[str(part)]
                line = _line(key_node)
                shown.append(str(part))
                continue
            tag = pairs.get("type")
            if tag is not None and isinstance(tag[1], yaml.ScalarNode) and tag[1].value == part:
                continue  # discriminated union tag: not a key in the file
        elif (isinstance(node, yaml.SequenceNode) and isinstance(part, int)
              and 0 <= part < len(node.value)):
            node = node.value[part]
            line = _line(node)
            shown.append(str(part))
            continue
        node = None
        shown.append(str(part))
    return ".".join(shown), line


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _fields_at(model: type[BaseModel], loc: Loc) -> list[str] | None:
    """The keys allowed at ``loc`` (for "did you mean"), when one model owns it."""
    models = [model]
    for part in loc:
        step = [f for m in models for n, f in m.model_fields.items() if part in (n, f.alias)]
        if step:
            models = [m for f in step for m in _models_in(f.annotation)]
        elif isinstance(part, str) and len(models) > 1:  # a discriminator tag
            models = [m for m in models if getattr(m.model_fields.get("type"), "default",
                                                   None) == part] or models
        if not models:
            return None
    if len(models) != 1:
        return None
    return [f.alias or n for n, f in models[0].model_fields.items()]


def _message(err: Mapping[str, Any], model: type[BaseModel]) -> str:
    if err["type"] == "extra_forbidden":
        loc = tuple(err["loc"])
        allowed = _fields_at(model, loc[:-1]) or []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        known = f" (allowed: {', '.join(allowed)})" if allowed else ""
        return f"unknown key{hint}{known}"
    msg = str(err["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    return msg


def _root_loc(msg: str) -> tuple[str, ...]:
    """Model-level validators report at the root; point them at the key they name."""
    m = re.match(r"(risk\.profiles\.\w+\.layers)", msg)
    if m:
        return tuple(m.group(1).split("."))
    return ("layers",) if msg.startswith("layer ids") else ()


def _validation_errors(exc: ValidationError, model: type[BaseModel], root: yaml.Node | None,
                       source: str, prefix: tuple[str | int, ...] = ()) -> list[PolicyError]:
    out = []
    for err in exc.errors():
        message = _message(err, model)
        loc = tuple(err["loc"]) or (_root_loc(message) if not prefix else ())
        key, line = _locate(root, (*prefix, *loc))
        out.append(PolicyError(source, key or ".".join(map(str, prefix)), line, message))
    return out


# ---- loading one file --------------------------------------------------------------------

def _resolve_layer(raw: Any, i: int, root: yaml.Node | None, source: str
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


def load_policy_text(text: str, source: str = "<string>", *, name: str | None = None,
                     path: Path | None = None) -> Policy:
    """Parse, validate and resolve one policy; raise :class:`PolicyError` with every problem.

    ``name`` is used when the file has no ``name:`` (the loader passes the file stem).
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
    resolved = [_resolve_layer(raw, i, root, source)
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
    if errors or spec is None:
        raise PolicyError.collect(errors)
    layers = tuple(
        ResolvedLayer(key=ls.key, name=ls.name, spec=ls, cls=cls, config=config)
        for ls, (cls, config, _) in zip(spec.layers, resolved, strict=True)
        if cls is not None and config is not None
    )
    version = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return Policy(name=policy_name, spec=spec, source=path, layers=layers, version=version)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(str(path), "", None, f"not UTF-8 text: {exc.reason}") from None
    except OSError as exc:
        raise PolicyError(str(path), "", None, f"cannot read: {exc.strerror or exc}") from None


def load_policy_file(path: Path) -> Policy:
    """Load one file; the policy name defaults to the file stem."""
    return load_policy_text(_read(path), str(path), name=path.stem, path=path)


def policy_files(directory: Path) -> list[Path]:
    """``*.yaml`` / ``*.yml`` in ``directory`` (not recursive), sorted.

    Hidden names are skipped, which also skips Kubernetes ConfigMap internals
    (``..data``, ``..2024_01_01_…``); the visible entries there are symlinks
    through ``..data`` and are read through it. A dangling symlink is kept so
    that it is reported (and the last good version stays) rather than dropped.
    """
    return [p for p in sorted(directory.iterdir())
            if not p.name.startswith(".") and p.suffix in SUFFIXES and not p.is_dir()]


# ---- a set of files -----------------------------------------------------------------------

@dataclass(slots=True)
class FileState:
    """What the store knows about one file: its newest parse and its last good version."""

    digest: str = ""
    text: str = ""
    parsed: Policy | None = None
    error: PolicyError | None = None
    good: Policy | None = None
    good_text: str = ""


def assemble(states: Mapping[str, FileState], prefer: Sequence[str] = ()
             ) -> tuple[dict[str, Policy], dict[str, str]]:
    """Pick the live version of every file and apply the cross-file rules.

    Returns (file -> live policy, file -> error message). For each file the
    newest parse is tried, then its last good version. Names must be unique and
    only one policy may be ``default``: on a clash the file in ``prefer`` (the
    ones already live) or else the earlier file name keeps it. ``candidates``
    naming unknown policies are an error for that file, but it stays live.
    """
    first = set(prefer)
    live: dict[str, Policy] = {}
    texts: dict[str, str] = {}
    owner: dict[str, str] = {}
    default_file: str | None = None
    messages: dict[str, list[str]] = {}
    for file in sorted(states, key=lambda f: (f not in first, f)):
        st = states[file]
        msgs = messages.setdefault(file, [st.error.describe()] if st.error else [])
        options = [(st.parsed, st.text)] if st.parsed is not None else []
        if st.good is not None and st.good is not st.parsed:
            options.append((st.good, st.good_text))
        for policy, text in options:
            root = _parse_yaml(text, file)[0]
            if policy.name in owner:
                key, line = _locate(root, ("name",))
                problem = PolicyError(file, key if policy.spec.name else "", line,
                                      f"policy name {policy.name!r} is already used by "
                                      f"{owner[policy.name]}")
            elif policy.spec.default and default_file is not None:
                key, line = _locate(root, ("default",))
                problem = PolicyError(file, key, line, f"more than one `default: true` policy "
                                                       f"(also {default_file})")
            else:
                live[file], texts[file], owner[policy.name] = policy, text, file
                if policy.spec.default:
                    default_file = file
                break
            if policy is st.parsed:
                msgs.append(str(problem))
    for file, policy in live.items():
        for i, cand in enumerate(policy.spec.candidates):
            if cand in owner and cand != policy.name:
                continue
            key, line = _locate(_parse_yaml(texts[file], file)[0], ("candidates", i))
            why = ("a policy cannot be its own candidate" if cand == policy.name else
                   f"unknown policy {cand!r} (known: {', '.join(sorted(owner))})")
            messages[file].append(str(PolicyError(file, key, line, why)))
    return live, {f: "\n".join(m) for f, m in messages.items() if m}


class PolicyStore:
    """The policies of one directory, reloadable while serving.

    Files are polled (:meth:`watch`): each pass re-reads every policy file and
    compares content hashes, so edits, atomic renames and Kubernetes ConfigMap
    symlink swaps are all seen, whatever the file system's mtime granularity.
    A file that stops loading keeps its last good version live.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._states: dict[str, FileState] = {}
        self._live: dict[str, Policy] = {}
        self._policies = PolicySet(())
        self._errors: dict[str, str] = {}
        self._loaded = False
        self._scanned_ok = False
        self._lock = threading.Lock()

    @property
    def policies(self) -> PolicySet:
        """Live policies by name (immutable snapshot; replaced on reload)."""
        return self._policies

    @property
    def errors(self) -> Mapping[str, str]:
        """File -> error message for every file with a problem."""
        return types.MappingProxyType(self._errors)

    def get(self, name: str) -> Policy | None:
        return self._policies.get(name)

    def load(self) -> None:
        """Initial scan: good files are loaded, broken ones recorded in :attr:`errors`."""
        self.reload()

    def reload(self) -> bool:
        """Rescan the directory; return True if any policy or error changed."""
        with self._lock:
            return self._reload()

    def _scan(self) -> dict[str, FileState] | str:
        try:
            paths = policy_files(self.directory)
        except OSError as exc:
            return f"cannot read policies directory: {exc.strerror or exc}"
        states: dict[str, FileState] = {}
        for path in paths:
            file = str(path)
            old = self._states.get(file, FileState())
            try:
                text = _read(path)
            except PolicyError as exc:
                states[file] = FileState(error=exc, good=old.good, good_text=old.good_text)
                continue
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            if digest == old.digest:
                states[file] = old
                continue
            st = FileState(digest=digest, text=text, good=old.good, good_text=old.good_text)
            try:
                st.parsed = load_policy_text(text, file, name=path.stem, path=path)
            except PolicyError as exc:
                st.error = exc
            states[file] = st
        return states

    def _reload(self) -> bool:
        scanned = self._scan()
        if isinstance(scanned, str):
            # Keep serving what we have: a directory that vanished mid-swap is not "no policies".
            errors = {str(self.directory): scanned}
            live, states = self._live, self._states
        else:
            states = scanned
            live, errors = assemble(states, prefer=list(self._live))
            for file, policy in live.items():
                if policy is states[file].parsed:
                    states[file].good, states[file].good_text = policy, states[file].text
        changed = (not self._loaded or errors != self._errors
                   or {f: p.version for f, p in live.items()}
                   != {f: p.version for f, p in self._live.items()})
        self._log(live, errors, states)
        self._scanned_ok = self._scanned_ok or not isinstance(scanned, str)
        self._states, self._live, self._errors, self._loaded = states, live, errors, True
        if changed:
            self._policies = PolicySet(live.values())
        return changed

    def _log(self, live: Mapping[str, Policy], errors: Mapping[str, str],
             states: Mapping[str, FileState]) -> None:
        for file, policy in live.items():
            before = self._live.get(file)
            if before is None or before.version != policy.version:
                log.info("policy %r %s from %s (version %s)", policy.name,
                         "reloaded" if before else "loaded", file, policy.version)
        for file, before in self._live.items():
            if file not in live:
                log.warning("policy %r from %s is no longer served", before.name, file)
        for file, message in errors.items():
            if self._errors.get(file) == message:
                continue  # already reported: do not repeat it on every poll
            kept = live.get(file)
            st = states.get(file)
            if kept is None:
                tail = "no version of it is served"
            elif st is not None and kept is st.parsed:
                tail = f"policy {kept.name!r} is served as written"
            else:
                tail = f"the last good version ({kept.version}) of policy {kept.name!r} stays live"
            log.error("policy file problem; %s:\n%s", tail, message)
        for file in self._errors:
            if file not in errors:
                log.info("policy file %s: problem fixed", file)

    async def watch(self, interval: float = 1.0) -> None:
        """Call :meth:`reload` every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                await asyncio.to_thread(self.reload)
            except Exception:  # keep watching: the next pass may succeed
                log.exception("policy reload failed; the current policies stay live")

    def status(self) -> tuple[bool, dict[str, Any]]:
        """(ready, detail) for ``/readyz``: ready once loaded with no file never loaded."""
        broken: dict[str, Any] = {}
        for file, message in self._errors.items():
            st = self._states.get(file)
            policy = self._live.get(file)
            broken[file] = {
                "error": message,
                "serving": policy.version if policy is not None else None,
                "serving_last_good": (policy is not None and st is not None
                                      and policy is not st.parsed),
            }
        directory = str(self.directory)
        ready = self._loaded and all(
            self._scanned_ok if f == directory else b["serving"] is not None
            for f, b in broken.items())
        return ready, {
            "directory": str(self.directory),
            "loaded": self._loaded,
            "policies": {p.name: {"file": f, "version": p.version, "mode": p.spec.mode,
                                  "default": p.spec.default}
                         for f, p in sorted(self._live.items())},
            "broken": broken,
        }

