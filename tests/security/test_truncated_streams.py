"""A stream that just stops is not a complete answer; a timeout says which one fired.

The hostile upstream ends a chat completion stream cleanly on the wire (the chunked
body is terminated) but mid-answer: no finish reason, no ``[DONE]``. Relayed as a clean
end, the client would take a cut answer for a whole one, and inline verification would
pass it. In every stream mode the gateway now ends it with an ``upstream_stream_truncated``
error event (a 502 where nothing was sent yet), and a policy's record says
``not verified: upstream_stream_truncated``. A stream that has its finish reason but
omits ``[DONE]`` (some servers do) is complete.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest

from modes.conftest import StartGateway
from modes.support import verity_headers
from security.hostile import HostileUpstream

ASK: Any = [{"role": "user", "content": "Tell me something."}]
CODE = "upstream_stream_truncated"


def _policy(mode: str, streaming: str) -> str:
    return f"""
mode: {mode}
default: true
streaming: {streaming}
layers: [{{name: keyword, config: {{block: [zzz]}}}}]
"""


def _stream_error(stream: Any) -> tuple[str, openai.APIError]:
    text = ""
    with pytest.raises(openai.APIError) as info:
        for chunk in stream:
            text += (chunk.choices[0].delta.content or "") if chunk.choices else ""
    return text, info.value


@pytest.mark.parametrize("policy", [None, ("inline", "passthrough"), ("shadow", "buffer")],
                         ids=["relay", "inline-passthrough", "shadow"])
def test_a_stream_that_just_stops_ends_with_a_truncation_error(
        start_gateway: StartGateway, make_client: Callable[..., openai.OpenAI],
        capped: list[dict[str, Any]], policy: tuple[str, str] | None) -> None:
    gw = start_gateway({"p": _policy(*policy)} if policy else {}, upstreams=capped)
    raw = make_client(gw.base_url, timeout=60).chat.completions.with_raw_response.create(
        model="truncated-sse", messages=ASK, stream=True)
    text, err = _stream_error(raw.parse())
    assert text.startswith("word word")  # what came was relayed, then the error
    assert isinstance(err.body, dict)
    assert (err.body["type"], err.body["code"]) == ("upstream_error", CODE)
    assert "without a finish reason or [DONE]" in err.message
    if policy is None:
        assert gw.audit() == []
        return
    (rec,) = gw.audit(expect=1)
    assert rec["audit_id"] == verity_headers(raw.headers)["x-verity-audit-id"]
    assert (rec["note"], rec["verdict"], rec["upstream_status"]) == \
        (f"not verified: {CODE}", None, 200)


def test_a_buffered_stream_that_just_stops_is_a_502_not_a_verified_answer(
        start_gateway: StartGateway, make_client: Callable[..., openai.OpenAI],
        capped: list[dict[str, Any]]) -> None:
    gw = start_gateway({"p": _policy("inline", "buffer")}, upstreams=capped)
    with pytest.raises(openai.APIStatusError) as info:
        make_client(gw.base_url, timeout=60).chat.completions.create(
            model="truncated-sse", messages=ASK, stream=True)
    err = info.value
    assert (err.status_code, err.code) == (502, CODE)
    (rec,) = gw.audit(expect=1)
    assert rec["audit_id"] == verity_headers(err.response.headers)["x-verity-audit-id"]
    assert (rec["note"], rec["verdict"]) == (f"not verified: {CODE}", None)


@pytest.mark.parametrize("policy", [None, ("inline", "buffer"), ("inline", "passthrough"),
                                    ("shadow", "buffer")],
                         ids=["relay", "inline-buffer", "inline-passthrough", "shadow"])
def test_a_finished_stream_without_done_is_complete(
        start_gateway: StartGateway, make_client: Callable[..., openai.OpenAI],
        capped: list[dict[str, Any]], policy: tuple[str, str] | None) -> None:
    gw = start_gateway({"p": _policy(*policy)} if policy else {}, upstreams=capped)
    stream = make_client(gw.base_url, timeout=60).chat.completions.create(
        model="finish-no-done", messages=ASK, stream=True)
    chunks = list(stream)
    assert chunks[-1].choices[0].finish_reason == "stop"
    if policy is not None:
        (rec,) = gw.audit(expect=1)
        assert (rec["verdict"], rec["note"]) == ("pass", None)


# ---- which timeout fired -----------------------------------------------------------------

def test_the_total_timeout_is_named_as_such(
        start_gateway: StartGateway, make_client: Callable[..., openai.OpenAI],
        hostile: HostileUpstream) -> None:
    # Never silent for 100 ms, so the read timeout (30 s) cannot be what ends it.
    gw = start_gateway({}, upstreams=[{"name": "slow", "base_url": hostile.base_url("slow-sse"),
                                       "timeouts": {"read": 30, "total": 1}}])
    stream = make_client(gw.base_url, timeout=60).chat.completions.create(
        model="slow-sse", messages=ASK, stream=True)
    _, err = _stream_error(stream)
    assert isinstance(err.body, dict) and err.body["code"] == "upstream_timeout"
    assert "timeouts.total (1s)" in err.message
    assert "read" not in err.message


def test_the_read_timeout_is_named_as_such(
        start_gateway: StartGateway, make_client: Callable[..., openai.OpenAI],
        hostile: HostileUpstream) -> None:
    gw = start_gateway({}, upstreams=[{"name": "slow", "base_url": hostile.base_url("slow-sse"),
                                       "timeouts": {"read": 0.05}}])
    client = make_client(gw.base_url, timeout=60)
    with pytest.raises(openai.APIError) as info:  # mid-stream, or (a slow box) before it
        list(client.chat.completions.create(model="slow-sse", messages=ASK, stream=True))
    err = info.value
    assert isinstance(err.body, dict) and err.body["code"] == "upstream_timeout"
    assert "timeouts.read (0.05s)" in err.message
    assert "total" not in err.message
