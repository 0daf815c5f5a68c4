"""OpenAI chat completions -> Anthropic Messages responses, and the verification shapes.

For the Messages front door in front of OpenAI-compatible upstreams; pure. The request
side is :mod:`gateway.wire.anthropic_messages`, streams
:mod:`gateway.wire.anthropic_stream`, errors :mod:`gateway.wire.anthropic_errors`.

- :func:`chat_to_message` — choice 0 -> a Message: content (or ``refusal``) -> a text
  block, ``tool_calls`` -> ``tool_use`` blocks (arguments that are not a JSON object ->
  ``{}``), ``finish_reason`` -> ``stop_reason`` (:data:`STOP_REASONS`: the inverse of
  :data:`gateway.wire.anthropic_tables.FINISH_REASONS`, so both directions share one
  table), usage -> Anthropic usage (:func:`usage_to_anthropic`). ``reasoning_content``
  is not carried: a thinking block needs a signature only Anthropic can make.
- :func:`block_message` — a blocked answer: the block message as the only text block,
  ``stop_reason: "refusal"`` (as ``block_completion`` gives ``content_filter``).
- :func:`with_disclaimer` — the disclaimer appended to the last text block.
- :func:`models_to_anthropic` — OpenAI's model list as Anthropic's models page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from gateway.errors import UpstreamError
from gateway.wire.anthropic_tables import FINISH_REASONS

__all__ = [
    "STOP_REASONS", "block_message", "chat_to_message", "message_id", "models_to_anthropic",
    "stop_reason", "usage_to_anthropic", "with_disclaimer",
]

STOP_REASONS: Mapping[str, str] = {
    **{finish: stop for stop, finish in reversed(FINISH_REASONS.items())},
    "function_call": "tool_use",
}
"""OpenAI ``finish_reason`` -> Anthropic ``stop_reason``: the inverse of
``FINISH_REASONS``, where several stop reasons share a finish reason the first listed
wins (``stop`` -> ``end_turn``, ``length`` -> ``max_tokens``)."""


# ---- response ---------------------------------------------------------------------------


def stop_reason(finish_reason: Any) -> str:
    return STOP_REASONS.get(finish_reason, "end_turn") if isinstance(finish_reason, str) \
        else "end_turn"


def usage_to_anthropic(usage: Any) -> dict[str, int]:
    """OpenAI usage -> Anthropic usage (cached prompt tokens as cache reads; the inverse
    of ``usage_to_openai`` for usage without cache writes, which OpenAI does not report)."""
    u = usage if isinstance(usage, Mapping) else {}

    def n(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) \
            and value > 0 else 0

    details = u.get("prompt_tokens_details")
    cached = n(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
    prompt = n(u.get("prompt_tokens"))
    return {"input_tokens": max(prompt - cached, 0), "output_tokens": n(u.get(
        "completion_tokens")), "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": min(cached, prompt)}


def message_id(openai_id: Any) -> str:
    """Anthropic ids start ``msg_``; the upstream's id is kept after it."""
    text = openai_id if isinstance(openai_id, str) and openai_id else "gateway"
    return text if text.startswith("msg_") else f"msg_{text}"


def _arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments as an object ({} when the model wrote no valid object)."""
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        value = orjson.loads(raw) if isinstance(raw, (str, bytes)) and raw else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _stop_sequence(choice: Mapping[str, Any], stops: Sequence[str] | None) -> str | None:
    """vLLM names the stop string that ended the answer in ``choice.stop_reason``."""
    found = choice.get("stop_reason")
    if isinstance(found, str) and (stops is None or found in stops):
        return found
    return None


def chat_to_message(completion: Mapping[str, Any], *,
                    stop_sequences: Sequence[str] | None = None,
                    model: str | None = None) -> dict[str, Any]:
    """An OpenAI ``chat.completion`` -> an Anthropic Message (choice 0).

    ``stop_sequences``: the request's, to tell ``stop_sequence`` from ``end_turn`` where
    the upstream names the stop string. Raises :class:`UpstreamError` without a choice.
    """
    choices = completion.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(first, Mapping):
        raise UpstreamError("upstream answered a chat completion without choices")
    msg = first.get("message")
    msg = msg if isinstance(msg, Mapping) else {}
    blocks: list[dict[str, Any]] = []
    text = msg.get("content")
    if isinstance(text, list):  # content parts, as some servers send
        text = "".join(str(p.get("text") or "") for p in text if isinstance(p, Mapping))
    refusal = msg.get("refusal")
    if isinstance(refusal, str) and refusal:
        text = (text or "") + refusal if isinstance(text, str) else refusal
    if isinstance(text, str) and text:
        blocks.append({"type": "text", "text": text})
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping):
            blocks.append({"type": "tool_use", "id": str(call.get("id") or ""),
                           "name": str(fn.get("name") or ""),
                           "input": _arguments(fn.get("arguments"))})
    reason = stop_reason(first.get("finish_reason"))
    if isinstance(refusal, str) and refusal:
        reason = "refusal"
    elif reason == "end_turn" and any(b["type"] == "tool_use" for b in blocks):
        reason = "tool_use"  # servers that end a tool call with "stop": clients loop on it
    sequence = _stop_sequence(first, stop_sequences) if reason == "end_turn" else None
    return {
        "id": message_id(completion.get("id")), "type": "message", "role": "assistant",
        "model": model or str(completion.get("model") or ""), "content": blocks,
        "stop_reason": "stop_sequence" if sequence is not None else reason,
        "stop_sequence": sequence, "usage": usage_to_anthropic(completion.get("usage")),
    }


# ---- verification shapes ----------------------------------------------------------------


def block_message(message: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A Message refusing with ``text``: the only content, ``stop_reason: "refusal"``
    (Anthropic's own for an answer its classifiers stopped); id, model and usage kept."""
    return {"id": message.get("id") or "msg_verity_blocked", "type": "message",
            "role": "assistant", "model": message.get("model") or "",
            "content": [{"type": "text", "text": text}], "stop_reason": "refusal",
            "stop_sequence": None,
            "usage": message.get("usage") or usage_to_anthropic(None)}


def with_disclaimer(message: Mapping[str, Any], text: str) -> dict[str, Any]:
    """``message`` with ``text`` appended to its last text block (a new text block when
    it has none), so ``content[0].text`` readers of a plain answer see it."""
    blocks = [dict(b) if isinstance(b, Mapping) else b for b in message.get("content") or ()]
    for block in reversed(blocks):
        if isinstance(block, dict) and block.get("type") == "text":
            block["text"] = str(block.get("text") or "") + text
            break
    else:
        blocks.append({"type": "text", "text": text})
    return {**message, "content": blocks}


# ---- models -----------------------------------------------------------------------------


def models_to_anthropic(data: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAI's model list -> Anthropic's ``GET /v1/models`` page (one page)."""
    out = []
    for m in data.get("data") or ():
        if not isinstance(m, Mapping) or not isinstance(m.get("id"), str):
            continue
        created = m.get("created")
        when = datetime.fromtimestamp(created if isinstance(created, int)
                                      and 0 <= created < 2**33 else 0, UTC)
        out.append({"type": "model", "id": m["id"], "display_name": m["id"],
                    "created_at": when.isoformat().replace("+00:00", "Z"),
                    "lifecycle": "active"})
    return {"data": out, "has_more": False, "first_id": out[0]["id"] if out else None,
            "last_id": out[-1]["id"] if out else None}
