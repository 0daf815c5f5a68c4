"""Edge cases of the inline and shadow runtime, through a real gateway and the openai
SDK: tool-call answers, ..."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import openai
import pytest

from engine.conftest import StartGateway
from engine.support import verity_headers

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import ServedUpstream

TOOLS = [{"type": "function", "function": {
    "name": "weather", "parameters": {"type": "object",
                                      "properties": {"city": {"type": "string"}}}}}]


def _policy(streaming: str = "buffer", layers: str = "[{name: length, config: {min_chars: 1}}]",
            extra: str = "") -> str:
    return f"""
mode: inline
default: true
streaming: {streaming}
layers: {layers}
actions: {{fail: {{type: block, message: "blocked"}}}}
{extra}
"""


@pytest.mark.parametrize("delivery", ["nonstream", "buffer", "passthrough"])
def test_tool_call_answer_is_delivered_unverified(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI], delivery: str) -> None:
    # `length: {min_chars: 1}` fails any empty text: a tool call has none to check.
    gw = start_gateway({"p": _policy("passthrough" if delivery == "passthrough" else "buffer")})
    kwargs: dict[str, Any] = {"model": "scripted-small", "tools": TOOLS,
                              "messages": [{"role": "user", "content": "weather in Paris?"}],
                              "extra_headers": {"x-mock-tool-call": "1"}}
    client = make_client(gw.base_url)
    if delivery == "nonstream":
        raw = client.chat.completions.with_raw_response.create(**kwargs)
        choice = raw.parse().choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        (call,) = choice.message.tool_calls or []
        assert (call.id, call.function.name, call.function.arguments) == \
            ("call_scripted", "weather", '{"city": "Paris"}')
    else:
        raw = client.chat.completions.with_raw_response.create(stream=True, **kwargs)
        chunks = list(raw.parse())
        deltas = [c.choices[0] for c in chunks if c.choices]
        assert "".join(d.delta.content or "" for d in deltas) == ""
        assert [d.finish_reason for d in deltas if d.finish_reason] == ["tool_calls"]
        args = "".join(t.function.arguments or "" for d in deltas
                       for t in d.delta.tool_calls or () if t.function)
        assert args == '{"city": "Paris"}'
    h = verity_headers(raw.headers)
    if delivery != "passthrough":
        assert (h["x-verity-verdict"], h["x-verity-action"], h["x-verity-score"]) == \
            ("pass", "pass", "n/a")
    (rec,) = gw.audit(expect=1)
    assert rec["verdict"] == "pass" and rec["layers"] == []
    assert rec["note"] == "not verified: the answer is tool calls only"
