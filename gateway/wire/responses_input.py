"""A Responses API request's ``instructions`` and ``input`` as chat messages. Pure.

One converter serves two readers, so that what the verification layers see of a
``/v1/responses`` request is exactly what they would see of the same conversation
sent to ``/v1/chat/completions`` (and what a chat completions upstream is sent):

- :func:`gateway.wire.responses.read_request` — the layers' view; lenient (``view=True``):
  what has no chat shape is counted and left out, tool results of built-in tools
  (``mcp_call`` output, ``file_search_call`` results) and custom tools are read too.
- :mod:`gateway.upstream.responses_chat` — the translation; strict: ``unsupported``
  raises, naming the field (``input[3].content[1]``).

The mapping (chat shape on the right)::

    instructions: "…"                        {"role": "system", "content": "…"} (first)
    input: "…"                               {"role": "user", "content": "…"}
    {"type"?: "message", role, content}      {"role": role, "content": …}
        content "…"                              "…"
        [input_text | output_text | text]        [{"type": "text", "text": …}, …]
        [input_image {image_url, detail}]        {"type": "image_url", "image_url": {url, detail}}
        assistant: output_text parts             one string, the parts joined with "" (as
                                                 the SDK's ``response.output_text`` joins)
        assistant: refusal parts                 ``refusal`` (joined with "")
    {"type": "function_call", call_id, name, arguments}
                                             a ``tool_calls`` entry of the assistant message
                                             just before it (consecutive calls: one message;
                                             text then calls: one message, as chat has it)
    {"type": "function_call_output", call_id, output}
                                             {"role": "tool", "tool_call_id": call_id,
                                              "content": output (string or text parts)}
    {"type": "reasoning", …}                 left out (no chat shape; not grounding)

Roles are kept as sent (``developer`` stays ``developer``:
:func:`gateway.sources.context.extract_context` reads it as ``system``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MESSAGE_ROLES", "Unsupported", "convert_input"]

MESSAGE_ROLES = frozenset({"user", "system", "developer", "assistant"})

Unsupported = Callable[[str, str], None]
"""``(param, what)`` — called for input the chat shape cannot hold: ``param`` is the
field's path (``input[2].content[0]``), ``what`` a short name of it
(``"input_file part"``, ``"web_search_call item"``). A strict reader raises; a lenient
one counts ``what`` and goes on (the input is then left out)."""

_UNSEEN_ITEMS = frozenset({"item_reference", "compaction"})
"""Items that stand for server-side state the request does not carry."""


def _image(part: Mapping[str, Any], param: str, unsupported: Unsupported) -> dict[str, Any] | None:
    url = part.get("image_url")
    if not isinstance(url, str) or not url:
        unsupported(param, "input_image part without image_url")  # a file_id image
        return None
    image: dict[str, Any] = {"url": url}
    if isinstance(detail := part.get("detail"), str) and detail:
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def _part(part: Any, where: str, unsupported: Unsupported, *,
          images: bool) -> dict[str, Any] | None:
    """One content part in the chat shape: text (and, where chat takes it, an image)."""
    kind = part.get("type") if isinstance(part, Mapping) else None
    if not isinstance(part, Mapping) or not isinstance(kind, str):
        unsupported(where, "content part that is not a typed object")
    elif kind in ("input_text", "output_text", "text"):
        if isinstance(text := part.get("text"), str):
            return {"type": "text", "text": text}
        unsupported(where, f"{kind} part without text")
    elif kind == "input_image" and images:
        return _image(part, where, unsupported)
    else:
        unsupported(where, f"{kind} part")
    return None


def _parts(content: list[Any], param: str, unsupported: Unsupported, *,
           images: bool) -> list[dict[str, Any]]:
    return [p for j, part in enumerate(content)
            if (p := _part(part, f"{param}[{j}]", unsupported, images=images)) is not None]


class _Converter:
    def __init__(self, unsupported: Unsupported, view: bool) -> None:
        self.unsupported = unsupported
        self.view = view
        self.messages: list[dict[str, Any]] = []
        self.dropped: Counter[str] = Counter()
        self.unseen: Counter[str] = Counter()

    def item(self, item: Any, param: str) -> None:
        if not isinstance(item, Mapping):
            self.unsupported(param, "item that is not an object")
            return
        kind = item.get("type")
        if kind is None or kind == "message":
            self.message(item, param)
        elif kind == "function_call":
            self.call(item, param, {"type": "function", "function": {
                "name": _str(item.get("name")), "arguments": _str(item.get("arguments"))}})
        elif kind == "function_call_output":
            self.result(item.get("call_id"), item.get("output"), param)
        elif kind == "reasoning":
            self.dropped["reasoning item"] += 1
        elif kind in _UNSEEN_ITEMS:
            self.unseen[str(kind)] += 1
            self.unsupported(param, f"{kind} item")
        elif self.view and kind == "custom_tool_call":
            self.call(item, param, {"type": "custom", "custom": {
                "name": _str(item.get("name")), "input": _str(item.get("input"))}})
        elif self.view and kind == "custom_tool_call_output":
            self.result(item.get("call_id"), item.get("output"), param)
        elif self.view and kind == "mcp_call":
            if isinstance(output := item.get("output"), str) and output:
                self.result(item.get("id"), output, param)
        elif self.view and kind == "file_search_call":
            self.file_results(item, param)
        else:
            self.unsupported(param, f"{kind} item")

    def message(self, item: Mapping[str, Any], param: str) -> None:
        role = item.get("role")
        if role not in MESSAGE_ROLES:
            self.unsupported(f"{param}.role", f"message role {role!r}")
            return
        content = item.get("content")
        where = f"{param}.content"
        if role == "assistant" and isinstance(content, list):
            self.messages.append(self.assistant(content, where))
        elif isinstance(content, str):
            self.messages.append({"role": role, "content": content})
        elif isinstance(content, list):
            parts = _parts(content, where, self.unsupported, images=role == "user")
            self.messages.append({"role": role, "content": parts})
        else:
            self.unsupported(where, "message content that is not a string or an array")

    def assistant(self, content: list[Any], param: str) -> dict[str, Any]:
        """An assistant message item (a previous turn's output, sent back)."""
        texts: list[str] = []
        refusals: list[str] = []
        for j, part in enumerate(content):
            if isinstance(part, Mapping) and part.get("type") == "refusal" \
                    and isinstance(refusal := part.get("refusal"), str):
                refusals.append(refusal)
                continue
            if (text := _part(part, f"{param}[{j}]", self.unsupported, images=False)):
                texts.append(text["text"])
        message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
        if refusals:
            message["refusal"] = "".join(refusals)
            if not texts:
                message["content"] = None
        return message

    def call(self, item: Mapping[str, Any], param: str, call: dict[str, Any]) -> None:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            self.unsupported(f"{param}.call_id", "tool call without call_id")
            call_id = _str(item.get("id"))
        last = self.messages[-1] if self.messages else None
        if last is None or last.get("role") != "assistant":
            last = {"role": "assistant", "content": None}
            self.messages.append(last)
        last.setdefault("tool_calls", []).append({"id": call_id, **call})

    def result(self, call_id: Any, output: Any, param: str) -> None:
        if not isinstance(call_id, str) or not call_id:
            self.unsupported(f"{param}.call_id", "tool output without call_id")
            call_id = ""
        if isinstance(output, list):
            content: Any = _parts(output, f"{param}.output", self.unsupported, images=False)
        elif isinstance(output, str):
            content = output
        else:
            self.unsupported(f"{param}.output", "tool output that is not a string or an array")
            return
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})

    def file_results(self, item: Mapping[str, Any], param: str) -> None:
        results = item.get("results")
        for j, result in enumerate(results if isinstance(results, list) else ()):
            if isinstance(result, Mapping) and isinstance(text := result.get("text"), str):
                ident = result.get("file_id")
                self.result(ident if isinstance(ident, str) and ident else f"{param}-{j}",
                            text, param)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def convert_input(body: Mapping[str, Any], unsupported: Unsupported, *, view: bool = False,
                  ) -> tuple[list[dict[str, Any]], Counter[str], Counter[str]]:
    """``(messages, dropped, unseen)`` for ``body``'s ``instructions`` and ``input``.

    ``dropped`` counts what is left out by design (reasoning items); ``unseen`` the
    items that stand for server-side state (``item_reference``, ``compaction``), which
    are also reported to ``unsupported``. With ``view`` the tool results of built-in
    and custom tools are read as ``role: tool`` messages; without, they are
    ``unsupported``."""
    conv = _Converter(unsupported, view)
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        conv.messages.append({"role": "system", "content": instructions})
    elif instructions is not None and not isinstance(instructions, str):
        unsupported("instructions", "instructions that are not a string")
    items = body.get("input")
    if isinstance(items, str):
        conv.messages.append({"role": "user", "content": items})
    elif isinstance(items, list):
        for i, item in enumerate(items):
            conv.item(item, f"input[{i}]")
    elif items is not None:
        unsupported("input", "input that is not a string or an array")
    return conv.messages, conv.dropped, conv.unseen

