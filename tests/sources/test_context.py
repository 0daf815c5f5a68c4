"""gateway.sources.context: grounding documents from any message shape, never an exception."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.sources.context import ContextSpec, extract_context, message_text

SPEC = ContextSpec()


def _docs(messages: list[Any], spec: ContextSpec = SPEC) -> list[tuple[str, str, str]]:
    return [(d.kind, d.id, d.text) for d in extract_context(messages, spec).documents]


@pytest.mark.parametrize("message", [
    "hi", None, 5, 1.5, True, ["a"], {"role": 1, "content": "x"}, {"role": None},
    {"content": "no role"}, {"role": "user", "content": 5}, {"role": "user", "content": {}},
    {"role": "tool", "content": {"type": "text", "text": "x"}},
    {"role": "system", "content": [None, "plain", 3, {"type": "text", "text": None},
                                   {"type": "text", "text": {"nested": 1}}, {"type": 1}]},
    {"role": ["system"], "content": "x"},
])
def test_odd_shapes_never_raise(message: Any) -> None:
    before = {"role": "system", "content": "S."}
    after = {"role": "tool", "tool_call_id": "c9", "content": "T."}
    assert _docs([before, message, after]) == [("system", "system-1", "S."),
                                               ("tool", "c9", "T.")]
    assert isinstance(message_text(message), str)


def test_message_text_keeps_only_string_text_parts() -> None:
    message = {"role": "user", "content": [
        {"type": "text", "text": "one"}, {"type": "text", "text": 2}, {"type": "text"},
        {"type": "input_text", "text": "two"}, {"type": "image_url", "image_url": {"url": "u"}},
        {"type": "refusal", "refusal": "no"}, "bare",
    ]}
    assert message_text(message) == "one\ntwo"
    assert message_text({"role": "assistant", "content": None, "tool_calls": []}) == ""
    assert message_text({"role": "assistant"}) == ""


def test_function_results_are_tool_results() -> None:
    messages = [
        {"role": "user", "content": "How many people live in Paris?"},
        {"role": "assistant", "content": None,
         "function_call": {"name": "population", "arguments": "{\"city\": \"Paris\"}"}},
        {"role": "function", "name": "population", "content": "Paris: 2.1 million."},
        {"role": "function", "name": "population", "content": "Lyon: 0.5 million."},
        {"role": "function", "content": "Nameless."},
        {"role": "tool", "tool_call_id": "call_1", "content": "Tool says."},
    ]
    ctx = extract_context(messages, SPEC)
    assert [(d.kind, d.id, d.text, dict(d.attrs)) for d in ctx.documents] == [
        ("tool", "function-1", "Paris: 2.1 million.", {"name": "population"}),
        ("tool", "function-2", "Lyon: 0.5 million.", {"name": "population"}),
        ("tool", "function-3", "Nameless.", {}),
        ("tool", "call_1", "Tool says.", {}),
    ]
    assert "2.1 million" in ctx.text


def test_function_results_follow_the_tools_source() -> None:
    messages = [{"role": "function", "name": "f", "content": "F."},
                {"role": "tool", "tool_call_id": "t", "content": "T."}]
    assert _docs(messages, ContextSpec(sources=("system", "blocks"))) == []


def test_blocks_in_a_function_result_are_blocks() -> None:
    messages = [{"role": "function", "name": "search",
                 "content": '<document id="d1">Doc one.</document>'}]
    assert _docs(messages) == [("block", "d1", "Doc one.")]


def test_the_question_reads_a_message_as_the_context_does() -> None:
    """VerifyInput.question used its own reading: a null text part became 'None'."""
    from gateway.sources.context import GroundingContext
    from gateway.layers.base import VerifyInput

    user = {"role": "user", "content": [{"type": "text", "text": None},
                                        {"type": "input_text", "text": "When did it open?"},
                                        {"type": "image_url", "image_url": {"url": "x"}}]}
    inp = VerifyInput(messages=["odd", user, {"role": "assistant", "content": "hm"}],  # type: ignore[list-item]
                      response_text="", context=GroundingContext())
    assert inp.question == message_text(user) == "When did it open?"
