"""The request side of the wire: JSON bodies and the chat message checks.

- :func:`parse_object` — a request body that must be a JSON object, without a
  duplicate key (400 otherwise: :mod:`gateway.wire.duplicates`); :func:`parsed` /
  :func:`settle` — the same as a picklable value, for another process to compute;
- :func:`check_messages` — the message shapes no OpenAI-compatible chat API
  accepts, refused before the upstream is called when a policy will read them;
- :func:`json_type` — how OpenAI's errors name a JSON value's type;
- :func:`maybe_json` — a body parsed if it is JSON (None otherwise).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import InvalidJSON, InvalidRequest
from gateway.wire.duplicates import duplicate_key

__all__ = ["Parsed", "check_messages", "json_type", "load_object", "maybe_json",
           "parse_object", "parsed", "refuse_duplicate", "refuse_duplicate_keys", "settle"]


def check_messages(messages: list[Any]) -> None:
    """Raise :class:`InvalidRequest` (400, ``param: messages[i]…``) for a message no
    OpenAI-compatible chat API accepts: not an object, no ``role`` or a ``role`` that is
    not a string, or ``content`` that is neither a string, an array nor null.

    Deliberately no stricter: unknown role names (some servers accept their own),
    content parts, ``name``, ``tool_calls`` and extra keys are the upstream's to judge.
    """
    for i, message in enumerate(messages):
        if type(message) is not dict:
            raise InvalidRequest(f"Invalid type for 'messages[{i}]': expected an object, but "
                                 f"got {json_type(message)} instead.",
                                 param=f"messages[{i}]", code="invalid_type")
        role = message.get("role")
        if type(role) is not str:
            if "role" not in message:
                raise InvalidRequest(f"Missing required parameter: 'messages[{i}].role'.",
                                     param=f"messages[{i}].role",
                                     code="missing_required_parameter")
            raise InvalidRequest(f"Invalid type for 'messages[{i}].role': expected a string, "
                                 f"but got {json_type(role)} instead.",
                                 param=f"messages[{i}].role", code="invalid_type")
        content = message.get("content")
        if content is not None and type(content) is not str and type(content) is not list:
            raise InvalidRequest(f"Invalid type for 'messages[{i}].content': expected a "
                                 f"string or an array of content parts, but got "
                                 f"{json_type(content)} instead.",
                                 param=f"messages[{i}].content", code="invalid_type")


def json_type(value: Any) -> str:
    """How OpenAI's errors name a JSON value's type ("an integer", "null", …)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def parse_object(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object (400 ``invalid_json`` / ``invalid_request_error``),
    with no duplicate key (400 ``duplicate_key``)."""
    payload = load_object(body)
    refuse_duplicate_keys(body)
    return payload


Parsed = tuple[dict[str, Any] | None, InvalidRequest | None]
"""What :func:`parsed` returns: (the object, None) or (None, the 400 to raise)."""


def parsed(body: bytes) -> Parsed:
    """:func:`parse_object` as a value that pickles: a worker process
    (``gateway.pool``) parses a large body with it, the relay :func:`settle` s it —
    the same object, or the same error, as :func:`parse_object` in the relay."""
    try:
        return parse_object(body), None
    except InvalidRequest as exc:
        return None, exc


def settle(result: Parsed) -> dict[str, Any]:
    """The object of a :func:`parsed` result, or its error raised."""
    payload, error = result
    if error is not None:
        raise error
    assert payload is not None
    return payload


def load_object(body: bytes) -> dict[str, Any]:
    """:func:`parse_object` without the duplicate-key check: the caller makes it
    (:func:`refuse_duplicate_keys`, or :func:`refuse_duplicate` on the key found)."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidJSON(f"We could not parse the JSON body of your request: {exc}") from None
    if not isinstance(payload, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return payload


def refuse_duplicate_keys(body: bytes) -> None:
    """400 ``duplicate_key`` when an object in the JSON document ``body`` names a key
    twice: parsers disagree on which value counts (:mod:`gateway.wire.duplicates`)."""
    refuse_duplicate(duplicate_key(body))


def refuse_duplicate(key: str | None) -> None:
    """400 ``duplicate_key`` when :func:`~gateway.wire.duplicates.duplicate_key` found
    ``key`` (None: nothing found)."""
    if key is not None:
        shown = key if len(key) <= 64 else key[:64] + "…"
        raise InvalidRequest(f"The JSON body names the key {shown!r} twice in one object: "
                             f"send each key once.", code="duplicate_key")


def maybe_json(data: bytes) -> Any:
    """``data`` parsed as JSON, or None when it is not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
