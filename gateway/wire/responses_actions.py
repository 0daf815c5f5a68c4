"""The actions' shapes in the Responses API: disclaimer, block, regenerate. Pure.

- :func:`with_disclaimer` appends the text to the **last ``output_text`` part of the
  last message item** (a new message item when there is none). Appending to the part
  that exists, rather than adding a part or an item, is what every reader shows: the
  SDK's ``response.output_text`` (joins all parts), the Agents SDK's final output (the
  last message item's text), and the many applications that read
  ``response.output[0].content[0].text`` (a new part or item is invisible to them; a
  new item would even *be* the Agents SDK's final output, alone). Annotation offsets
  stay valid: text is only added at the end. It is also what the chat path does
  (appended to ``content``).
- :func:`blocked_response` replaces the output with one message item whose content is
  a ``refusal`` part carrying the block message; ``status`` stays ``completed`` (a
  ``response.incomplete`` terminal event would make the SDK's
  ``stream.get_final_response()`` raise). Id, model, ``created_at`` and usage are
  kept. A refusal part is not in ``response.output_text`` (an application that reads
  only that shows nothing); ``refusal=False`` carries the message as ``output_text``.
- ``style: error`` is :class:`gateway.errors.VerificationBlocked`, as for chat.
- :func:`regenerate_body` — the request re-sent with the failed answer and the repair
  feedback appended to its ``input`` (the chat path's ``_regen_payload``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["blocked_response", "last_text_part", "regenerate_body", "text_part",
           "with_disclaimer", "with_text"]


def _suffix(response: Mapping[str, Any]) -> str:
    ident = response.get("id")
    return ident.removeprefix("resp_") if isinstance(ident, str) and ident else "verity"


def _message_item(item_id: str, part: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": item_id, "status": "completed", "role": "assistant",
            "content": [part]}


def text_part(text: str) -> dict[str, Any]:
    """An ``output_text`` content part."""
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def last_text_part(response: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(output_index, content_index)`` of the last ``output_text`` part of the last
    message item that has one; None when no message item has one."""
    output = response.get("output")
    if not isinstance(output, list):
        return None
    for i in range(len(output) - 1, -1, -1):
        item = output[i]
        if isinstance(item, dict) and item.get("type") == "message" \
                and isinstance(content := item.get("content"), list):
            for j in range(len(content) - 1, -1, -1):
                if isinstance(content[j], dict) and content[j].get("type") == "output_text":
                    return i, j
    return None


def with_disclaimer(response: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A copy of ``response`` with ``text`` appended to its last ``output_text`` part
    (:func:`last_text_part`); with none, a new message item carrying it is added at
    the end of ``output``. ``response`` itself is not changed."""
    out = dict(response)
    output = list(out.get("output") or ())
    out["output"] = output
    where = last_text_part(out)
    if where is None:
        output.append(_message_item(f"msg_{_suffix(response)}_verity", text_part(text)))
        return out
    i, j = where
    item = dict(output[i])
    content = list(item["content"])
    part = dict(content[j])
    part["text"] = str(part.get("text") or "") + text
    content[j] = part
    item["content"] = content
    output[i] = item
    return out


def with_text(response: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A copy of ``response`` whose text is ``text``: its last ``output_text`` part
    holds it (annotations cleared), the message items' other ``output_text`` parts are
    removed (and a message item left empty); other items are kept. With no text part,
    as :func:`with_disclaimer`."""
    where = last_text_part(response)
    if where is None:
        return with_disclaimer(response, text)
    output: list[Any] = []
    for i, item in enumerate(response["output"]):
        if isinstance(item, dict) and item.get("type") == "message" \
                and isinstance(item.get("content"), list):
            content = []
            for j, part in enumerate(item["content"]):
                if isinstance(part, dict) and part.get("type") == "output_text":
                    if (i, j) != where:
                        continue
                    part = {**part, "text": text, "annotations": []}
                content.append(part)
            if not content:
                continue
            item = {**item, "content": content}
        output.append(item)
    return {**response, "output": output}


def blocked_response(response: Mapping[str, Any], message: str, *,
                     refusal: bool = True) -> dict[str, Any]:
    """``response`` refusing with ``message``: its output replaced by one message item
    (the first message item's id, if any) whose only part is ``{"type": "refusal"}``
    (``refusal=False``: an ``output_text`` part); ``status: completed``, no error or
    incomplete details; id, model, ``created_at``, usage and the rest kept."""
    output = response.get("output")
    item_id = next((item["id"] for item in output if isinstance(item, dict)
                    and item.get("type") == "message" and isinstance(item.get("id"), str)),
                   None) if isinstance(output, list) else None
    part = {"type": "refusal", "refusal": message} if refusal else text_part(message)
    out = copy.copy(dict(response))
    out.update(status="completed", error=None, incomplete_details=None,
               output=[_message_item(item_id or f"msg_{_suffix(response)}", part)])
    return out


def regenerate_body(body: Mapping[str, Any], failed: str, feedback: str,
                    model: str | None = None) -> dict[str, Any]:
    """``body`` (the client's request) for a regenerate attempt: not streamed, its
    ``input`` (a string becomes a user message) followed by the failed answer as an
    assistant message and ``feedback`` as a user message; ``model`` replaces the model
    when given (``fallback_model``). Everything else — ``instructions``, tools,
    ``previous_response_id`` — is kept, so the attempt sees what the first one saw."""
    out = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    items = body.get("input")
    history = [{"role": "user", "content": items}] if isinstance(items, str) \
        else list(items) if isinstance(items, list) else []
    out["input"] = [*history, {"role": "assistant", "content": failed},
                    {"role": "user", "content": feedback}]
    if model is not None:
        out["model"] = model
    return out
