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
  ``required``, ``items``, ``enum``, ``minItems`` / ``maxItems``, and
  ``maxLength`` on a string (:func:`text`). Item ids are enums, not integer
  ranges: llama.cpp's grammar enforces enums but not ``minimum`` / ``maximum``, so
  numbers are clamped by the layers after parsing. ``maxLength`` is the one
  keyword not every mode takes: OpenAI's strict mode and Anthropic's tool schemas
  do not list it, so the judge strips it there (``gateway.upstream.judge``) and
  sends it only where decoding is constrained by a grammar (``json_object`` +
  ``schema``: llama.cpp, llama-cpp-python), which is where a small model needs it.
- :func:`salvage_cut` — the complete array items of a reply cut at ``max_tokens``
  (opt-in per call: only where a shorter list is an honest answer).

Errors are :class:`~gateway.layers.base.JudgeError` in the gateway's own words (no
reply text): they are recorded, and quoted back to the judge by the repair retry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from gateway.layers.base import JudgeError

__all__ = ["arr", "ids", "obj", "parse_json_reply", "salvage_cut", "text"]

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


def salvage_cut(reply: str) -> Any | None:
    """The JSON value of a reply cut at ``max_tokens``, kept up to its last complete
    array item and closed; ``None`` when nothing is left (no ``{``/``[``, or a cut
    before any array opened). An incomplete item is dropped whole: a string cut
    mid-word never passes as a shorter string. The caller decides whether a
    shorter list is an honest answer (a decomposition's "at most N facts" is; an
    error list is not: a cut one would hide errors)."""
    text = reply[:_MAX_SCAN]
    start = next((k for k, ch in enumerate(text) if ch in "{["), -1)
    if start < 0:
        return None
    stack: list[str] = []
    safe: tuple[int, str] | None = None  # (cut position, closers) of the last safe point
    in_str, esc = False, False
    for k in range(start, len(text)):
        ch = text[k]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
                if stack and stack[-1] == "[" and _whole(stack):  # a complete string item
                    safe = (k + 1, _closers(stack))
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append(ch)
            if ch == "[" and _whole(stack):  # an array may close empty here
                safe = (k + 1, _closers(stack))
        elif ch in "}]":
            if not stack:
                break
            stack.pop()
            if not stack:  # the value was complete after all
                safe = (k + 1, "")
                break
            if stack[-1] == "[" and _whole(stack):  # a complete object/array item
                safe = (k + 1, _closers(stack))
    if safe is None:
        return None
    try:
        return _loads(text[start:safe[0]] + safe[1])
    except orjson.JSONDecodeError:
        return None


def _whole(stack: list[str]) -> bool:
    """No open container is itself an array item (such an item is kept only whole)."""
    return all(stack[i - 1] != "[" for i in range(1, len(stack)))


def _closers(stack: list[str]) -> str:
    return "".join("]" if ch == "[" else "}" for ch in reversed(stack))


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


def text(max_chars: int) -> dict[str, Any]:
    """A string of at most ``max_chars`` characters (enforced by a grammar-constrained
    judge; stripped for OpenAI strict mode and Anthropic tools, see the module doc)."""
    return {"type": "string", "maxLength": max_chars}


def ids(values: Iterable[int | str]) -> dict[str, Any]:
    """An id field: one of ``values`` (an enum: enforced where numeric bounds are not)."""
    return {"enum": list(values)}
