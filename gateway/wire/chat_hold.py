"""The passthrough hold-back of a chat completion stream (``streaming: passthrough``),
with no I/O: which events may go out before the verdict, and the held tail rewritten
around the verdict's addition.

- :func:`relayable` — an event that may go out before the verdict;
- :func:`verdict_tail` — the held tail rewritten around the verdict's addition
  (:func:`split_tail` splits it);
- :class:`ChatHold` — both, as the :class:`~gateway.wire.base.StreamHold` of
  :data:`gateway.wire.chat.CHAT_COMPLETIONS`.

How the verdict is signalled in a stream:

For ``disclaimer`` and ``block`` the held tail is reordered around the addition: all
upstream content (and tool-call) deltas first — content sent after a finish chunk,
or another choice's last content, included (it was verified too) — then the
addition, then the finish events it concerns, then usage chunks and ``[DONE]``:

- ``disclaimer`` — one more content chunk with the disclaimer text (and a ``verity``
  field), just before choice 0's finish (split from the content its event may
  carry). Other choices keep their finish events where the upstream sent them.
- ``block`` (``style: completion``) — a chunk with the block message as content,
  ``finish_reason: "content_filter"`` and a ``verity`` field replaces choice 0's
  finish; with ``n > 1`` every other choice gets a finish-only chunk with
  ``content_filter`` (and ``verity``) in place of its own, so each choice ends
  exactly once. The official SDK accepts both the finish reason and the extra
  field (``chunk.model_extra["verity"]``).
- ``block`` (``style: error``) — an OpenAI error event ``data: {"error": …}``
  ends the stream (no ``[DONE]``): the SDK raises ``APIError`` while iterating.
- ``pass`` / ``flag`` — the tail unchanged; the verdict is only in the audit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.wire.sse import StreamAccumulator, encode_data, encode_event

__all__ = ["ChatHold", "chunk_base", "relayable", "split_tail", "verdict_tail"]


def chunk_base(completion: Mapping[str, Any]) -> dict[str, Any]:
    """The fields every chunk of a stream for ``completion`` repeats."""
    base: dict[str, Any] = {"id": completion.get("id") or "chatcmpl-verity",
                            "object": "chat.completion.chunk",
                            "created": completion.get("created") or 0,
                            "model": completion.get("model") or ""}
    if completion.get("system_fingerprint"):
        base["system_fingerprint"] = completion["system_fingerprint"]
    return base


def relayable(obj: dict[str, Any] | None) -> bool:
    """A chat completion chunk (a ``choices`` list) that does not start the tail: no
    ``finish_reason`` and not usage-only. Anything else — ``[DONE]``, an event that is
    not JSON, an error event, any other object — is held."""
    if obj is None:
        return False
    choices = obj.get("choices")
    if type(choices) is not list or (not choices and obj.get("usage")):
        return False
    return not any(type(c) is dict and c.get("finish_reason") for c in choices)


def verdict_tail(tail: list[bytes], completion: Mapping[str, Any], *, action: str,
                 text: str | None = None, verity: Mapping[str, Any] | None = None,
                 error_body: Mapping[str, Any] | None = None) -> bytes:
    """The held ``tail`` (``data`` fields, in upstream order) rewritten around the
    verdict's addition, encoded (see the module docstring).

    ``action`` ``disclaimer`` adds ``text`` as a content chunk before choice 0's
    finish; ``block`` sends ``text`` with ``finish_reason: content_filter`` in place
    of the upstream finish chunks (every choice's); ``error_body`` ends the stream
    with an error event instead. Otherwise the tail goes out as it came.
    ``completion`` is the answer accumulated so far (its id, model, choices).
    """
    out: list[bytes] = []
    if error_body is not None:
        return encode_event(error_body)
    if action == "block" or (action == "disclaimer" and text):
        base = chunk_base(completion)
        extra = {"verity": dict(verity)} if verity is not None else {}
        block = action == "block"
        body, finishes, end = split_tail(tail, every_choice=block)
        if block:  # the verdict is the response's: every choice ends content_filter
            others = sorted({c.get("index", 0) for c in completion["choices"]} - {0})
            finishes = [orjson.dumps({**base, "choices": [{
                "index": i, "delta": {} if i else {"content": text or ""},
                "logprobs": None, "finish_reason": "content_filter"}], **extra})
                for i in (0, *others)]
        else:
            body.append(orjson.dumps({**base, "choices": [{
                "index": 0, "delta": {"content": text}, "logprobs": None,
                "finish_reason": None}], **extra}))
        tail = [*body, *finishes, *end]
    out.extend(encode_data(d) for d in tail)
    return b"".join(out)


def _has_delta(choice: Mapping[str, Any]) -> bool:
    delta = choice.get("delta")
    return isinstance(delta, dict) and any(v for key, v in delta.items() if key != "role")


def split_tail(tail: list[bytes], *, every_choice: bool
                ) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """The held ``tail`` as ``(body, finishes, end)``, each in upstream order.

    ``finishes``: choice 0's finish (every choice's with ``every_choice``), each in
    an event of its own; ``end``: usage-only chunks, ``[DONE]`` and anything after
    it; ``body``: the rest. An event that carried a moved finish as well as content
    (servers often send the last token with the finish reason; with ``n > 1``
    another choice may share the event) keeps that content, and its usage, in
    ``body``. Events left whole are kept byte for byte.
    """
    body: list[bytes] = []
    finishes: list[bytes] = []
    end: list[bytes] = []
    done = False
    for data in tail:
        if done or data.strip() == b"[DONE]":
            done = True
            end.append(data)
            continue
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            body.append(data)
            continue
        choices = obj.get("choices") if isinstance(obj, dict) else None
        if not isinstance(obj, dict) or "error" in obj \
                or (choices is not None and not isinstance(choices, list)):
            body.append(data)
            continue
        if not choices:
            (end if obj.get("usage") else body).append(data)
            continue
        kept: list[Any] = []
        moved: list[dict[str, Any]] = []
        for c in choices:
            if isinstance(c, dict) and c.get("finish_reason") \
                    and (every_choice or c.get("index", 0) == 0):
                finish = {**c, "delta": {}}
                if _has_delta(c):
                    kept.append({**c, "finish_reason": None})
                    if "logprobs" in c:
                        finish["logprobs"] = None
                moved.append(finish)
            else:
                kept.append(c)
        if not moved:
            body.append(data)
            continue
        rest = {k: v for k, v in obj.items() if k != "usage"}
        finishes.extend(orjson.dumps({**rest, "choices": [c]}) for c in moved)
        if kept:
            body.append(orjson.dumps({**obj, "choices": kept}))
        elif obj.get("usage"):
            end.append(orjson.dumps({**obj, "choices": []}))
    return body, finishes, end


class ChatHold:
    """The passthrough hold-back of a chat completion stream (a
    :class:`~gateway.wire.base.StreamHold`): every chunk :func:`relayable` goes out as
    it comes; from the first that is not, everything is held until :meth:`end`, which
    sends it through :func:`verdict_tail`."""

    def __init__(self) -> None:
        self.acc = StreamAccumulator()
        self.tail: list[bytes] = []

    def feed(self, data: bytes) -> bytes:
        obj = self.acc.feed_data(data)
        # From the first event that is not a readable chat completion chunk on,
        # everything is held: it cannot be verified, and on_error decides at end()
        # whether it goes out.
        if self.tail or self.acc.unreadable or not relayable(obj):
            self.tail.append(data)
            return b""
        return encode_data(data)

    def end(self, *, action: str, text: str | None = None,
            verity: Mapping[str, Any] | None = None,
            error_body: Mapping[str, Any] | None = None) -> bytes:
        changed = error_body is not None or action == "block" \
            or (action == "disclaimer" and bool(text))
        return verdict_tail(self.tail, self.acc.completion() if changed else {},
                            action=action, text=text, verity=verity, error_body=error_body)
