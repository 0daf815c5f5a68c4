"""Message shapes under a policy: what no chat API accepts is a 400 before the upstream
is called (inline JSON, inline streams, shadow); odd but valid shapes are verified."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest

from modes.conftest import PolicyGateway, StartGateway

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import ServedUpstream


def _policy(mode: str, streaming: str = "buffer") -> str:
    return f"""
mode: {mode}
default: true
streaming: {streaming}
layers: [{{name: keyword, config: {{block: [zzz]}}}}]
actions: {{fail: {{type: block}}}}
"""


# How the request is served: (policy mode, streaming setting, stream?)
SERVING = {
    "inline-json": ("inline", "buffer", False),
    "inline-buffer-stream": ("inline", "buffer", True),
    "inline-passthrough-stream": ("inline", "passthrough", True),
    "shadow-json": ("shadow", "buffer", False),
    "shadow-stream": ("shadow", "buffer", True),
}

# messages -> (param, code) of the 400
INVALID: dict[str, tuple[list[Any], str, str]] = {
    "string": (["hi"], "messages[0]", "invalid_type"),
    "null": ([None], "messages[0]", "invalid_type"),
    "number-second": ([{"role": "user", "content": "hi"}, 7], "messages[1]", "invalid_type"),
    "array": ([[{"role": "user", "content": "hi"}]], "messages[0]", "invalid_type"),
    "no-role": ([{"content": "hi"}], "messages[0].role", "missing_required_parameter"),
    "role-null": ([{"role": None, "content": "hi"}], "messages[0].role", "invalid_type"),
    "role-number": ([{"role": 1, "content": "hi"}], "messages[0].role", "invalid_type"),
    "role-object": ([{"role": {"name": "user"}, "content": "hi"}], "messages[0].role",
                    "invalid_type"),
    "content-number": ([{"role": "user", "content": 5}], "messages[0].content",
                       "invalid_type"),
    "content-object": ([{"role": "user", "content": {"type": "text", "text": "hi"}}],
                       "messages[0].content", "invalid_type"),
    "content-bool": ([{"role": "system", "content": "ok"}, {"role": "user", "content": True}],
                     "messages[1].content", "invalid_type"),
}


def _chat_requests(upstream: ServedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r["path"] == "/v1/chat/completions"]


@pytest.mark.parametrize("serving", list(SERVING))
@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_message_is_400_before_the_upstream(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI], serving: str, case: str) -> None:
    mode, streaming, stream = SERVING[serving]
    messages, param, code = INVALID[case]
    gw = start_gateway({"p": _policy(mode, streaming)})
    with pytest.raises(openai.BadRequestError) as info:
        make_client(gw.base_url).chat.completions.create(
            model="scripted-small", messages=[{"role": "user", "content": "placeholder"}],
            stream=stream, extra_body={"messages": messages})
    err = info.value
    assert err.status_code == 400
    assert err.type == "invalid_request_error"
    assert (err.param, err.code) == (param, code)
    assert param in err.message and "messages" in err.message
    assert _chat_requests(upstream) == []  # never forwarded, never billed
    assert gw.audit() == []


def test_invalid_message_error_names_the_type(start_gateway: StartGateway,
                                              upstream: ServedUpstream) -> None:
    gw = start_gateway({"p": _policy("inline")})
    with httpx.Client(base_url=gw.url, timeout=10) as http:
        r = http.post("/v1/chat/completions", json={"model": "scripted-small",
                                                    "messages": ["hi"]})
        r2 = http.post("/v1/chat/completions", json={
            "model": "scripted-small", "messages": [{"role": "user", "content": 5}]})
    assert r.status_code == r2.status_code == 400
    assert r.json() == {"error": {
        "message": "Invalid type for 'messages[0]': expected an object, but got a string "
                   "instead.",
        "type": "invalid_request_error", "param": "messages[0]", "code": "invalid_type"}}
    assert "got an integer instead" in r2.json()["error"]["message"]
    assert _chat_requests(upstream) == []


# Valid for the OpenAI chat API (or for OpenAI-compatible servers): forwarded, verified.
VALID: list[dict[str, Any]] = [
    {"role": "developer", "content": "Answer briefly.", "name": "ops"},
    {"role": "system", "content": [{"type": "text", "text": "<context>Paris is in "
                                                            "France.</context>"}]},
    {"role": "user", "content": [
        {"type": "text", "text": "Where is Paris?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        {"type": "text"},  # no text: ignored
    ], "name": "alice", "x-vendor-extra": {"k": 1}},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "lookup", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": [
        {"type": "text", "text": "Paris: capital of France."}]},
    {"role": "assistant", "content": None,
     "function_call": {"name": "lookup", "arguments": "{}"}},
    {"role": "function", "name": "lookup", "content": "Paris has 2.1 million people."},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
    {"role": "assistant"},  # no content at all
    {"role": "user", "content": "", "tool_call_id": None},
    {"role": "user", "content": "Where is Paris, again?"},
]


@pytest.mark.parametrize("serving", list(SERVING))
def test_odd_but_valid_messages_are_forwarded_and_verified(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI], wait_until: Callable[..., Any],
        serving: str) -> None:
    mode, streaming, stream = SERVING[serving]
    gw: PolicyGateway = start_gateway({"p": _policy(mode, streaming)})
    client = make_client(gw.base_url)
    if stream:
        chunks = client.chat.completions.create(model="scripted-small", messages=VALID,
                                                stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        r = client.chat.completions.create(model="scripted-small",
                                           messages=VALID)
        text = r.choices[0].message.content or ""
    assert text == "You said: Where is Paris, again?"
    (sent,) = _chat_requests(upstream)
    assert sent["json"]["messages"] == VALID  # forwarded as sent
    rec = wait_until(lambda: next(iter(gw.audit()), None), message="audit record")
    assert (rec["mode"], rec["verdict"]) == (mode, "pass")
    assert rec.get("note") is None
