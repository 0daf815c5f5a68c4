"""The scripted upstream's Responses API (``POST /v1/responses``): the shapes, built by
hand as OpenAI sends them (not by the gateway's translators, which the tests check
against this), with no I/O. :mod:`gateway.testing.scripted` serves them.

- :func:`user_text` — the text a reply rule matches: the last user message of
  ``input`` (a string is one);
- :func:`response` — the ``response`` object of a text answer or of one function call;
- :func:`events` — its stream: ``response.created``, ``response.in_progress``, the
  item's events (one ``output_text.delta`` per word), ``response.completed``, each
  numbered (``sequence_number``) and written with its ``event:`` line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["events", "input_words", "response", "sse", "user_text"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content
                       if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def user_text(payload: Mapping[str, Any]) -> str:
    """The last user message of ``input`` (a string input is one)."""
    items = payload.get("input")
    if isinstance(items, str):
        return items
    for item in reversed(items if isinstance(items, list) else []):
        if isinstance(item, dict) and item.get("role") == "user":
            return _text(item.get("content"))
    return ""


def input_words(payload: Mapping[str, Any]) -> int:
    """Words in ``instructions`` and every message of ``input`` (the scripted usage)."""
    items = payload.get("input")
    texts = [str(payload.get("instructions") or "")]
    if isinstance(items, str):
        texts.append(items)
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            texts.append(_text(item.get("content")) or str(item.get("output") or ""))
    return sum(len(t.split()) for t in texts)


def response(payload: Mapping[str, Any], rid: str, created: int, text: str, *,
             tool: str | None = None, status: str = "completed") -> dict[str, Any]:
    """The ``response`` object answering ``payload`` with ``text`` (or a call of
    ``tool``), every field OpenAI's."""
    suffix = rid.removeprefix("resp_")
    if tool is not None:
        item: dict[str, Any] = {"type": "function_call", "id": f"fc_{suffix}",
                                "call_id": "call_scripted", "name": tool,
                                "arguments": '{"city": "Paris"}', "status": "completed"}
    else:
        item = {"type": "message", "id": f"msg_{suffix}", "status": "completed",
                "role": "assistant", "content": [{"type": "output_text", "text": text,
                                                  "annotations": [], "logprobs": []}]}
    inputs, outputs = input_words(payload), len(text.split())
    return {
        "id": rid, "object": "response", "created_at": created, "status": status,
        "background": False, "error": None, "incomplete_details": None,
        "instructions": payload.get("instructions"),
        "max_output_tokens": payload.get("max_output_tokens"),
        "model": payload.get("model", "scripted"), "output": [item],
        "parallel_tool_calls": True,
        "previous_response_id": payload.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None}, "service_tier": "default",
        "store": payload.get("store", True), "temperature": 1.0,
        "text": payload.get("text") or {"format": {"type": "text"}},
        "tool_choice": payload.get("tool_choice", "auto"), "tools": payload.get("tools") or [],
        "top_p": 1.0, "truncation": "disabled",
        "usage": {"input_tokens": inputs,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": outputs,
                  "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": inputs + outputs},
        "user": None, "metadata": payload.get("metadata") or {}}


def _words(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text) or [text]


def events(final: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stream of ``final`` (one ``output_text.delta`` per word)."""
    start = {**final, "status": "in_progress", "output": [], "usage": None}
    out: list[dict[str, Any]] = [{"type": "response.created", "response": start},
                                 {"type": "response.in_progress", "response": start}]
    for oi, item in enumerate(final["output"]):
        at = {"item_id": item["id"], "output_index": oi}
        if item["type"] == "function_call":
            out += [{"type": "response.output_item.added", "output_index": oi,
                     "item": {**item, "arguments": "", "status": "in_progress"}},
                    {"type": "response.function_call_arguments.delta", **at,
                     "delta": item["arguments"]},
                    {"type": "response.function_call_arguments.done", **at,
                     "arguments": item["arguments"]}]
        else:
            part = item["content"][0]
            where = {**at, "content_index": 0}
            out += [{"type": "response.output_item.added", "output_index": oi,
                     "item": {**item, "status": "in_progress", "content": []}},
                    {"type": "response.content_part.added", **where,
                     "part": {**part, "text": ""}}]
            out += [{"type": "response.output_text.delta", **where, "delta": w, "logprobs": []}
                    for w in _words(part["text"])]
            out += [{"type": "response.output_text.done", **where, "text": part["text"],
                     "logprobs": []},
                    {"type": "response.content_part.done", **where, "part": part}]
        out.append({"type": "response.output_item.done", "output_index": oi, "item": item})
    out.append({"type": "response.completed", "response": final})
    return [{**event, "sequence_number": n} for n, event in enumerate(out)]


def sse(event: Mapping[str, Any]) -> bytes:
    """One event as OpenAI writes it: its ``event:`` line, then its ``data:``."""
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + orjson.dumps(event) \
        + b"\n\n"
