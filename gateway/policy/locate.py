"""Policy errors that name file, dotted key and line, and the YAML helpers that
find the line: parse keeping node marks, map a pydantic ``loc`` to a node, turn
validation errors into :class:`PolicyError` (with "did you mean" for unknown keys).
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

__all__ = ["Loc", "PolicyError"]

Loc = Sequence[str | int]


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


_KEYED = re.compile(r"([A-Za-z_]\w*(?:\.[\w-]+)+): (.+)", re.S)


def _keyed(message: str, loc: tuple[str | int, ...]) -> tuple[tuple[str | int, ...], str]:
    """A model validator's ``dotted.key: message`` (from the policy root) names a key
    below the model it ran on: report it there."""
    m = _KEYED.match(message)
    if m:
        parts = tuple(m.group(1).split("."))
        if parts[:len(loc)] == tuple(map(str, loc)) and len(parts) > len(loc):
            return parts, m.group(2)
    return loc, message


def _shadowed(err: Mapping[str, Any], errors: Sequence[Mapping[str, Any]]) -> bool:
    """pydantic checks a sequence's length on the items that validated, so one bad item
    of a one-item ``layers`` also reports "at least 1 item ... not 0": drop that echo."""
    loc = tuple(err["loc"])
    return err["type"] == "too_short" and any(
        len(other["loc"]) > len(loc) and tuple(other["loc"][:len(loc)]) == loc
        for other in errors)


def _validation_errors(exc: ValidationError, model: type[BaseModel], root: yaml.Node | None,
                       source: str, prefix: tuple[str | int, ...] = ()) -> list[PolicyError]:
    out = []
    errors = exc.errors()
    for err in errors:
        if _shadowed(err, errors):
            continue
        message = _message(err, model)
        loc = tuple(err["loc"]) or (_root_loc(message) if not prefix else ())
        if not prefix:
            loc, message = _keyed(message, loc)
        key, line = _locate(root, (*prefix, *loc))
        out.append(PolicyError(source, key or ".".join(map(str, prefix)), line, message))
    return out
