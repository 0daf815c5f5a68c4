"""Unit tests of the Messages front door's response rewriting (one module, no server):
chat-shaped ASGI messages in, Messages-shaped ones out."""

from __future__ import annotations

from typing import Any

import anthropic
import orjson
import pytest

from gateway.http import messages_send
from gateway.http.messages_send import MessagesSend, models_page
from gateway.wire.chat import synthesize

COMPLETION = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi."},
                           "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
              "verity": {"verdict": "pass"}}


async def run(*messages: dict[str, Any]) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []

    async def sink(message: dict[str, Any]) -> None:
        got.append(message)

    out = MessagesSend(sink, model="claude-x")
    for m in messages:
        await out(m)
    return got


def start(status: int, ctype: bytes, *extra: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http.response.start", "status": status,
            "headers": [(b"content-type", ctype), (b"content-length", b"999"), *extra]}


def body(data: bytes, more: bool = False) -> dict[str, Any]:
    return {"type": "http.response.body", "body": data, "more_body": more}


@pytest.mark.anyio
async def test_a_completion_becomes_a_message_and_keeps_headers() -> None:
    data = orjson.dumps(COMPLETION)
    got = await run(start(200, b"application/json", (b"x-verity-verdict", b"pass")),
                    body(data[:10], True), body(data[10:]))
    headers = dict(got[0]["headers"])
    assert headers[b"x-verity-verdict"] == b"pass"
    message = anthropic.types.Message.model_validate(orjson.loads(got[1]["body"]))
    assert message.content[0].text == "Hi." and message.model == "claude-x"  # type: ignore[union-attr]
    assert message.model_extra == {"verity": {"verdict": "pass"}}
    assert headers[b"content-length"] == str(len(got[1]["body"])).encode()


@pytest.mark.anyio
async def test_an_error_becomes_an_anthropic_error() -> None:
    err = {"error": {"message": "slow down", "type": "rate_limit", "param": None, "code": None}}
    got = await run(start(429, b"application/json", (b"retry-after", b"3")),
                    body(orjson.dumps(err)))
    assert got[0]["status"] == 429 and dict(got[0]["headers"])[b"retry-after"] == b"3"
    assert orjson.loads(got[1]["body"]) == {"type": "error", "error": {
        "type": "rate_limit_error", "message": "slow down"}}


@pytest.mark.anyio
async def test_a_chunk_stream_becomes_events() -> None:
    sse = synthesize(COMPLETION, include_usage=True)
    got = await run(start(200, b"text/event-stream"), body(sse[:7], True), body(sse[7:], True),
                    body(b""))
    assert all(k != b"content-length" for k, _ in got[0]["headers"])
    events = b"".join(m["body"] for m in got[1:])
    assert events.startswith(b"event: message_start")
    assert b'"text":"Hi."' in events and events.rstrip().endswith(b'{"type":"message_stop"}')


@pytest.mark.anyio
async def test_an_event_that_never_ends_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(messages_send, "_MAX_JSON", 100)
    got = await run(start(200, b"text/event-stream"), body(b"data: " + b"x" * 200, True))
    assert got[-1]["body"].startswith(b"event: error")


def test_models_page() -> None:
    page = orjson.loads(models_page(orjson.dumps({"object": "list", "data": [
        {"id": "a", "object": "model", "created": 0, "owned_by": "x"}]})))
    assert page["data"][0]["type"] == "model" and page["first_id"] == "a"
    assert models_page(b"not json") == b"not json"
