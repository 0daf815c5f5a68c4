"""Building Responses API stream events: whole streams, error endings, text added to a
held tail. Pure. The event order and fields are described in
:mod:`gateway.wire.responses_stream`.

- :func:`synthesize` — the event stream of a whole response (the buffered path after
  a change, and a JSON answer to a stream request), numbered from 0.
- :func:`append_text` — a held stream tail with text appended to the last
  ``output_text`` part (disclaimer; a passthrough block's message), the events that
  repeat the part's text patched and every event from the insertion on renumbered.
- :func:`error_events` — a stream ended by the gateway: ``error``, then
  ``response.failed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gateway.wire.responses_actions import text_part
from gateway.wire.responses_stream import TERMINAL

__all__ = ["append_text", "error_events", "synthesize"]


def _skeleton(response: Mapping[str, Any]) -> dict[str, Any]:
    """The response as ``response.created`` shows it: in progress, no output yet."""
    out = dict(response)
    out.update(status="in_progress", output=[], usage=None, error=None,
               incomplete_details=None)
    out.pop("verity", None)
    if "completed_at" in out:
        out["completed_at"] = None
    return out


def _terminal_type(status: Any) -> str:
    if status == "incomplete":
        return "response.incomplete"
    return "response.failed" if status in ("failed", "cancelled") else "response.completed"


def _item_events(oi: int, item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The events of one whole output item, from ``added`` to ``done``."""
    kind = item.get("type")
    item_id = item.get("id") if isinstance(item.get("id"), str) else f"item_{oi}"
    at = {"item_id": item_id, "output_index": oi}
    added = dict(item)
    if "status" in added:
        added["status"] = "in_progress"
    events: list[dict[str, Any]] = [{"type": "response.output_item.added", "output_index": oi,
                                     "item": added}]
    if kind == "message" and isinstance(item.get("content"), list):
        added["content"] = []
        for ci, part in enumerate(item["content"]):
            events += _part_events({**at, "content_index": ci}, part)
    elif kind == "function_call":
        added["arguments"] = ""
        arguments = str(item.get("arguments") or "")
        events += [{"type": "response.function_call_arguments.delta", **at, "delta": arguments},
                   {"type": "response.function_call_arguments.done", **at,
                    "arguments": arguments}]
    events.append({"type": "response.output_item.done", "output_index": oi, "item": dict(item)})
    return events


def _part_events(at: Mapping[str, Any], part: Any) -> list[dict[str, Any]]:
    if not isinstance(part, Mapping):
        return []
    if part.get("type") == "refusal":
        refusal = str(part.get("refusal") or "")
        return [{"type": "response.content_part.added", **at,
                 "part": {"type": "refusal", "refusal": ""}},
                {"type": "response.refusal.delta", **at, "delta": refusal},
                {"type": "response.refusal.done", **at, "refusal": refusal},
                {"type": "response.content_part.done", **at, "part": dict(part)}]
    text = str(part.get("text") or "")
    logprobs = part.get("logprobs") if isinstance(part.get("logprobs"), list) else []
    events = [{"type": "response.content_part.added", **at, "part": text_part("")}]
    if text:
        events.append({"type": "response.output_text.delta", **at, "delta": text,
                       "logprobs": logprobs})
    events += [{"type": "response.output_text.done", **at, "text": text, "logprobs": logprobs},
               {"type": "response.content_part.done", **at, "part": dict(part)}]
    return events


def _numbered(events: Iterable[dict[str, Any]], start: int) -> list[dict[str, Any]]:
    return [{**event, "sequence_number": n} for n, event in enumerate(events, start)]


def synthesize(response: Mapping[str, Any], *, verity: Mapping[str, Any] | None = None,
               ) -> list[dict[str, Any]]:
    """The whole event stream of ``response`` (numbered from 0): created, in progress,
    each output item's events (one delta per text part), and the terminal event its
    ``status`` names, whose response is ``response`` (with ``verity`` when given)."""
    output = response.get("output")
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _skeleton(response)},
        {"type": "response.in_progress", "response": _skeleton(response)}]
    for oi, item in enumerate(output if isinstance(output, list) else ()):
        if isinstance(item, Mapping):
            events += _item_events(oi, item)
    final = dict(response)
    if verity is not None:
        final["verity"] = dict(verity)
    events.append({"type": _terminal_type(response.get("status")), "response": final})
    return _numbered(events, 0)


def error_events(error: Mapping[str, Any], *, sequence_number: int,
                 response: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """End a stream with an error: an ``error`` event carrying ``error`` (an OpenAI
    error body's ``error`` object: the SDK raises ``APIError`` with it, as for
    OpenAI's own), then — when the stream's ``response`` (from ``response.created``)
    is known — ``response.failed``, the terminal event clients that validate the
    lifecycle wait for. Its ``error.code`` is ``server_error``: the Response schema
    allows only OpenAI's codes there; ``type`` and ``message`` carry the gateway's."""
    err = {"type": error.get("type"), "code": error.get("code"),
           "message": str(error.get("message") or ""), "param": error.get("param")}
    events: list[dict[str, Any]] = [{"type": "error", "code": err["code"],
                                     "message": err["message"], "param": err["param"],
                                     "error": err}]
    if response is not None:
        failed = _skeleton(response)
        failed.update(status="failed", error={"code": "server_error", "type": err["type"],
                                              "message": err["message"]})
        events.append({"type": "response.failed", "response": failed})
    return _numbered(events, sequence_number)


def _appended_part(content: Any, ci: int, text: str) -> Any:
    if not isinstance(content, list) or ci >= len(content) or not isinstance(content[ci], dict):
        return content
    content = list(content)
    content[ci] = {**content[ci], "text": str(content[ci].get("text") or "") + text}
    return content


def _patch(event: dict[str, Any], oi: int, ci: int, item_id: Any, text: str,
           verity: Mapping[str, Any] | None) -> dict[str, Any]:
    """``event`` with ``text`` added where it repeats part ``(oi, ci)``'s text."""
    kind = event.get("type")
    same = event.get("output_index") == oi and event.get("content_index", ci) == ci
    if kind == "response.output_text.done" and same:
        return {**event, "text": str(event.get("text") or "") + text}
    if kind == "response.content_part.done" and same and isinstance(event.get("part"), dict):
        part = event["part"]
        return {**event, "part": {**part, "text": str(part.get("text") or "") + text}}
    if kind == "response.output_item.done" and same and isinstance(event.get("item"), dict):
        item = event["item"]
        return {**event, "item": {**item, "content": _appended_part(item.get("content"), ci,
                                                                    text)}}
    if kind in TERMINAL and isinstance(event.get("response"), dict):
        response = dict(event["response"])
        output = response.get("output")
        if isinstance(output, list):
            output = list(output)
            for k, item in enumerate(output):
                if isinstance(item, dict) and (item.get("id") == item_id if item_id
                                               else k == oi):
                    output[k] = {**item, "content": _appended_part(item.get("content"), ci,
                                                                   text)}
            response["output"] = output
        if verity is not None:
            response["verity"] = dict(verity)
        return {**event, "response": response}
    return event


def append_text(tail: list[dict[str, Any]], text: str, *, next_output_index: int,
                next_sequence: int, verity: Mapping[str, Any] | None = None,
                ) -> list[dict[str, Any]]:
    """The held ``tail`` of a stream with ``text`` appended to the answer.

    When ``tail`` holds an ``output_text.done`` (its last one is the part the text
    goes to: the answer's last text part; the hold-back holds from there), one
    ``output_text.delta`` with ``text`` (and ``verity``) goes just before it and the
    events that repeat the part's text get it too. Otherwise a new message item
    (``output_index = next_output_index``) carrying ``text`` goes before the terminal
    event and into its response's output. Every event from the insertion on is
    renumbered from its own ``sequence_number`` (``next_sequence`` when it has none),
    so numbers stay increasing."""
    done = next((k for k in range(len(tail) - 1, -1, -1)
                 if tail[k].get("type") == "response.output_text.done"), None)
    if done is not None:
        at = tail[done]
        oi, ci, item_id = at.get("output_index"), at.get("content_index"), at.get("item_id")
        delta: dict[str, Any] = {"type": "response.output_text.delta", "item_id": item_id,
                 "output_index": oi, "content_index": ci, "delta": text, "logprobs": []}
        if verity is not None:
            delta["verity"] = dict(verity)
        patched = [_patch(e, int(oi or 0), int(ci or 0), item_id, text, verity)
                   for e in tail[done:]]
        return tail[:done] + _renumber([delta, *patched], tail[done], next_sequence)
    end = next((k for k, e in enumerate(tail) if e.get("type") in TERMINAL), len(tail))
    item = {"type": "message", "id": f"msg_verity_{next_output_index}", "status": "completed",
            "role": "assistant", "content": [text_part(text)]}
    added = _item_events(next_output_index, item)
    rest = []
    for event in tail[end:]:
        if event.get("type") in TERMINAL and isinstance(event.get("response"), dict):
            response = dict(event["response"])
            if isinstance(response.get("output"), list):
                response["output"] = [*response["output"], item]
            if verity is not None:
                response["verity"] = dict(verity)
            event = {**event, "response": response}
        rest.append(event)
    first = tail[end] if end < len(tail) else {}
    return tail[:end] + _renumber([*added, *rest], first, next_sequence)


def _renumber(events: list[dict[str, Any]], first: Mapping[str, Any],
              fallback: int) -> list[dict[str, Any]]:
    start = first.get("sequence_number")
    return _numbered(events, start if type(start) is int else fallback)
