"""Responses API objects and streams shaped as OpenAI sends them (written out by hand,
not by the modules under test), for the wire tests."""

from __future__ import annotations

from typing import Any

import orjson
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

EVENT = TypeAdapter(ResponseStreamEvent)

USAGE = {"input_tokens": 12,
         "input_tokens_details": {"cached_tokens": 2, "cache_write_tokens": 0},
         "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 3},
         "total_tokens": 19}


def response(output: list[dict[str, Any]], *, status: str = "completed",
             **extra: Any) -> dict[str, Any]:
    """A ``response`` object with OpenAI's fields."""
    out: dict[str, Any] = {
        "id": "resp_abc123", "object": "response", "created_at": 1751642570,
        "status": status, "background": False, "error": None, "incomplete_details": None,
        "instructions": None, "max_output_tokens": None, "model": "gpt-4o-2024-08-06",
        "output": output, "parallel_tool_calls": True, "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None}, "service_tier": "default",
        "store": True, "temperature": 1.0, "text": {"format": {"type": "text"}},
        "tool_choice": "auto", "tools": [], "top_p": 1.0, "truncation": "disabled",
        "usage": USAGE if status != "in_progress" else None, "user": None, "metadata": {}}
    out.update(extra)
    return out


def message(*texts: str, item_id: str = "msg_1", refusal: str | None = None,
            ) -> dict[str, Any]:
    content: list[dict[str, Any]] = [
        {"type": "output_text", "annotations": [], "logprobs": [], "text": t} for t in texts]
    if refusal is not None:
        content.append({"type": "refusal", "refusal": refusal})
    return {"id": item_id, "type": "message", "status": "completed", "content": content,
            "role": "assistant"}


def function_call(name: str = "get_weather", arguments: str = '{"city":"Paris"}',
                  call_id: str = "call_1", item_id: str = "fc_1") -> dict[str, Any]:
    return {"id": item_id, "type": "function_call", "status": "completed",
            "arguments": arguments, "call_id": call_id, "name": name}


def reasoning(item_id: str = "rs_1") -> dict[str, Any]:
    return {"id": item_id, "type": "reasoning", "summary": []}


def stream_events(final: dict[str, Any], *, chunk: int = 4) -> list[dict[str, Any]]:
    """The events OpenAI streams for ``final``: text in ``chunk``-character deltas,
    arguments in one delta, each done event repeating the whole text."""
    events: list[dict[str, Any]] = []

    def emit(event: dict[str, Any]) -> None:
        events.append({**event, "sequence_number": len(events)})

    start = {**final, "status": "in_progress", "output": [], "usage": None}
    emit({"type": "response.created", "response": start})
    emit({"type": "response.in_progress", "response": start})
    for oi, item in enumerate(final["output"]):
        at = {"item_id": item["id"], "output_index": oi}
        if item["type"] == "message":
            emit({"type": "response.output_item.added", "output_index": oi,
                  "item": {**item, "status": "in_progress", "content": []}})
            for ci, part in enumerate(item["content"]):
                where = {**at, "content_index": ci}
                if part["type"] == "refusal":
                    emit({"type": "response.content_part.added", **where,
                          "part": {"type": "refusal", "refusal": ""}})
                    emit({"type": "response.refusal.delta", **where, "delta": part["refusal"]})
                    emit({"type": "response.refusal.done", **where, "refusal": part["refusal"]})
                else:
                    emit({"type": "response.content_part.added", **where,
                          "part": {"type": "output_text", "annotations": [], "logprobs": [],
                                   "text": ""}})
                    text = part["text"]
                    for k in range(0, len(text), chunk):
                        emit({"type": "response.output_text.delta", **where,
                              "delta": text[k:k + chunk], "logprobs": [],
                              "obfuscation": "xY"})
                    emit({"type": "response.output_text.done", **where, "text": text,
                          "logprobs": []})
                emit({"type": "response.content_part.done", **where, "part": part})
        elif item["type"] == "function_call":
            emit({"type": "response.output_item.added", "output_index": oi,
                  "item": {**item, "status": "in_progress", "arguments": ""}})
            emit({"type": "response.function_call_arguments.delta", **at,
                  "delta": item["arguments"], "obfuscation": "ab"})
            emit({"type": "response.function_call_arguments.done", **at,
                  "arguments": item["arguments"]})
        else:
            emit({"type": "response.output_item.added", "output_index": oi, "item": item})
        emit({"type": "response.output_item.done", "output_index": oi, "item": item})
    terminal = {"completed": "response.completed", "incomplete": "response.incomplete",
                "failed": "response.failed"}[final["status"]]
    emit({"type": terminal, "response": final})
    return events


def datas(events: list[dict[str, Any]]) -> list[bytes]:
    """Each event's ``data`` bytes, as an SSE parser yields them."""
    return [orjson.dumps(e) for e in events]


def sse(events: list[dict[str, Any]]) -> bytes:
    """The stream's bytes as OpenAI writes them (``event:`` and ``data:`` lines)."""
    return b"".join(b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n"
                    for e in events)


def validate(obj: dict[str, Any]) -> Response:
    """Strict validation with the SDK's model (not the lenient ``construct``)."""
    return Response.model_validate(obj)
