"""Reading a judge's JSON reply, and building the JSON Schemas the layers ask by.

Two jobs shared by every model-based layer:

- :func:`parse_json_reply` — the JSON value in a reply, leniently: the whole text,
  else a fenced code block, else the first *balanced* ``{…}`` / ``[…]`` (a scan that
  knows strings, so prose after the JSON may hold braces), each also tried with
  trailing commas removed. A reply cut at ``max_tokens`` is its own error (the fix
  is a budget, and a cut list must never pass as a shorter one).
- :func:`obj` / :func:`arr` / :func:`ids` — builders of reply schemas in the
  *strict* subset every structured-output mode accepts (OpenAI ``strict: true``,
  llama.cpp's schema-to-grammar, Anthropic tool ``input_schema``): every property
  required, ``additionalProperties: false``; only ``type``, ``properties``,
  ``required``, ``items``, ``enum``, ``minItems`` / ``maxItems``. Item ids are
  enums, not integer ranges: llama.cpp's grammar enforces enums but not
  ``minimum`` / ``maximum``, so numbers are clamped by the layers after parsing.

Errors are :class:`~gateway.layers.base.JudgeError` in the gateway's own words (no
reply text): they are recorded, and quoted back to the judge by the repair retry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from gateway.layers.base import JudgeError

__all__ = ["arr", "ids", "obj", "parse_json_reply"]

_FENCED = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_MAX_SCAN = 200_000
"""Characters scanned for a balanced JSON value (judge replies are capped upstream)."""


def _loads(text: str) -> Any:
    """``text`` as JSON, also with trailing commas dropped; raises JSONDecodeError."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        fixed = _TRAILING_COMMA.sub(r"\1", text)
        if fixed == text:
            raise
        return orjson.loads(fixed)


def _balanced(text: str) -> Iterator[str]:
    """Each balanced ``{…}`` / ``[…]`` in ``text``, outermost first, left to right
    (string-aware: brackets inside JSON strings do not count)."""
    start = 0
    limit = min(len(text), _MAX_SCAN)
    while start < limit:
        i = next((k for k in range(start, limit) if text[k] in "{["), -1)
        if i < 0:
            return
        depth, in_str, esc = 0, False, False
        end = -1
        for k in range(i, limit):
            ch = text[k]
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    end = k
                    break
        if end < 0:
            return  # unbalanced to the end: nothing further can close
        yield text[i:end + 1]
        start = end + 1


def parse_json_reply(text: str, *, truncated: bool = False) -> Any:
    """The JSON value in a judge reply (code fences, prose around it and trailing
    commas tolerated). ``truncated``: the reply stopped at ``max_tokens``."""
    stripped = text.strip()
    candidates = [stripped, *(m.group(1).strip() for m in _FENCED.finditer(stripped))]
    for cand in candidates:
        if not cand:
            continue
        try:
            return _loads(cand)
        except orjson.JSONDecodeError:
            pass
    for cand in _balanced(stripped):
        try:
            return _loads(cand)
        except orjson.JSONDecodeError:
            continue
    if truncated:
        raise JudgeError(f"judge reply cut at max_tokens before its JSON ended "
                         f"({len(text)} chars)")
    if not stripped:
        raise JudgeError("judge reply is empty")
    raise JudgeError(f"judge reply is not JSON ({len(text)} chars)")


# -- reply schemas ---------------------------------------------------------------------

def obj(props: dict[str, Any]) -> dict[str, Any]:
    """A strict object schema: every property required, no others."""
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


def arr(items: dict[str, Any], lo: int | None = None, hi: int | None = None) -> dict[str, Any]:
    """An array schema, with its item count bounds when given."""
    out: dict[str, Any] = {"type": "array", "items": items}
    if lo is not None:
        out["minItems"] = lo
    if hi is not None:
        out["maxItems"] = hi
    return out


def ids(values: Iterable[int | str]) -> dict[str, Any]:
    """An id field: one of ``values`` (an enum: enforced where numeric bounds are not)."""
    return {"enum": list(values)}
