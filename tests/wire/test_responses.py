"""gateway.wire.responses: what verification reads of a Responses request and response,
and the action shapes — checked against the official SDK's models."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gateway.sources.context import ContextSpec, extract_context
from gateway.errors import InvalidRequest
from gateway.wire.chat import answer_text
from gateway.layers.base import VerifyInput
from gateway.wire.chat import calls_only, is_completion
from gateway.wire.responses import (
    as_chat_completion,
    check_input,
    read_request,
    read_response,
)
from gateway.wire.responses_actions import blocked_response, regenerate_body, with_disclaimer
from wire import samples as S

# ---- the request --------------------------------------------------------------------------


def test_string_input_and_instructions_are_a_system_and_a_user_message() -> None:
    view = read_request({"model": "m", "instructions": "Be brief.", "input": "Hi?"})
    assert view.messages == [{"role": "system", "content": "Be brief."},
                             {"role": "user", "content": "Hi?"}]
    assert view.unseen == () and view.skipped == {} and not view.structured


def test_item_list_maps_to_chat_messages() -> None:
    body = {"model": "m", "input": [
        {"role": "developer", "content": "Use the tools."},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "Weather in Paris?"},
                     {"type": "input_image", "image_url": "https://x/y.png", "detail": "low"}]},
        S.reasoning(),
        S.message("Let me check. "),
        S.function_call(call_id="call_1"),
        S.function_call(name="get_time", arguments="{}", call_id="call_2", item_id="fc_2"),
        {"type": "function_call_output", "call_id": "call_1", "output": "18C, sunny"},
        {"type": "function_call_output", "call_id": "call_2",
         "output": [{"type": "input_text", "text": "09:00"}]},
    ]}
    view = read_request(body)
    assert view.messages == [
        {"role": "developer", "content": "Use the tools."},
        {"role": "user", "content": [
            {"type": "text", "text": "Weather in Paris?"},
            {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}]},
        {"role": "assistant", "content": "Let me check. ", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "get_time", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "09:00"}]},
    ]
    assert view.skipped == {"reasoning item": 1}


def test_a_call_after_a_user_message_starts_an_assistant_message() -> None:
    view = read_request({"input": [{"role": "user", "content": "x"}, S.function_call()]})
    assert view.messages[1] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]}


def test_assistant_refusal_parts_become_the_refusal_field() -> None:
    view = read_request({"input": [S.message(refusal="No.")]})
    assert view.messages == [{"role": "assistant", "content": None, "refusal": "No."}]


def test_server_side_state_is_named_unseen_and_other_items_counted() -> None:
    view = read_request({
        "previous_response_id": "resp_0", "prompt": {"id": "pmpt_1"},
        "input": [{"type": "item_reference", "id": "msg_0"},
                  {"type": "web_search_call", "id": "ws_1", "status": "completed"},
                  {"role": "user", "content": [{"type": "input_file", "file_id": "f"}]},
                  {"type": "compaction", "encrypted_content": "…"}]})
    assert view.unseen == ("previous_response_id", "prompt", "compaction", "item_reference")
    assert view.skipped == {"web_search_call item": 1, "input_file part": 1}


def test_built_in_tool_results_sent_back_are_tool_messages() -> None:
    view = read_request({"input": [
        {"type": "mcp_call", "id": "mcp_1", "server_label": "docs", "name": "lookup",
         "arguments": "{}", "output": "The bridge opened in 1932."},
        {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["q"],
         "results": [{"file_id": "file-9", "text": "Chapter 1 says X."}]},
        {"type": "custom_tool_call", "call_id": "c1", "name": "grep", "input": "x"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "x found"}]})
    tools = [(m["tool_call_id"], m["content"]) for m in view.messages if m["role"] == "tool"]
    assert tools == [("mcp_1", "The bridge opened in 1932."), ("file-9", "Chapter 1 says X."),
                     ("c1", "x found")]


@pytest.mark.parametrize(("fmt", "structured"), [
    ({"type": "json_schema", "name": "x", "schema": {}}, True), ({"type": "json_object"}, True),
    ({"type": "text"}, False)])
def test_structured_output_is_flagged(fmt: dict[str, Any], structured: bool) -> None:
    assert read_request({"input": "x", "text": {"format": fmt}}).structured is structured


def test_read_request_never_raises_on_odd_shapes() -> None:
    for body in ({"input": 3}, {"input": [3, None, {"type": 5}]}, {"instructions": ["x"]},
                 {"input": [{"role": "wizard", "content": "x"}]},
                 {"input": [{"role": "user", "content": [None, {"type": "input_text"}]}]}):
        read_request(body)


CHAT = [{"role": "system", "content": "Answer from the context.\n<context id=\"c1\">Paris is "
                                      "the capital of France.</context>"},
        {"role": "user", "content": "<document id=\"d2\">Lyon is in France.</document>\nWhat "
                                    "is the capital?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_9", "type": "function",
             "function": {"name": "search", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_9", "content": "Paris has 2.1M inhabitants."}]
RESPONSES = {"instructions": CHAT[0]["content"], "input": [
    {"role": "user", "content": [{"type": "input_text", "text": CHAT[1]["content"]}]},
    {"type": "function_call", "call_id": "call_9", "name": "search", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_9", "output": CHAT[3]["content"]}]}


@pytest.mark.parametrize("sources", [("system", "blocks", "tools"), ("blocks",), ("tools",),
                                     ("system",)])
def test_context_extraction_reads_a_responses_request_as_its_chat_twin(
        sources: tuple[Any, ...]) -> None:
    spec = ContextSpec(sources=sources)
    chat = extract_context(CHAT, spec)
    responses = extract_context(read_request(RESPONSES).messages, spec)
    assert responses.documents == chat.documents
    assert chat.documents  # not vacuous
    question = VerifyInput(messages=read_request(RESPONSES).messages, response_text="",
                           context=responses).question
    assert question == VerifyInput(messages=CHAT, response_text="", context=chat).question


def test_check_input_accepts_what_servers_accept() -> None:
    for body in ({"input": "x"}, {}, {"input": []}, {"instructions": None, "input": [
            {"role": "user", "content": []}, {"type": "reasoning", "summary": []},
            {"type": "future_item", "x": 1}, S.function_call()]}):
        check_input(body)


@pytest.mark.parametrize(("body", "param", "code"), [
    ({"instructions": 3}, "instructions", "invalid_type"),
    ({"input": {"role": "user"}}, "input", "invalid_type"),
    ({"input": ["hi"]}, "input[0]", "invalid_type"),
    ({"input": [{"type": 3}]}, "input[0].type", "invalid_type"),
    ({"input": [{"type": "message", "content": "x"}]}, "input[0].role",
     "missing_required_parameter"),
    ({"input": [{"role": 1, "content": "x"}]}, "input[0].role", "invalid_type"),
    ({"input": [{"role": "user", "content": 5}]}, "input[0].content", "invalid_type"),
    ({"input": [{"role": "user"}]}, "input[0].content", "invalid_type")])
def test_check_input_rejects_shapes_no_server_accepts(body: dict[str, Any], param: str,
                                                      code: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        check_input(body)
    assert info.value.status == 400 and info.value.param == param and info.value.code == code


# ---- the response -------------------------------------------------------------------------


def test_answer_text_is_the_sdks_output_text() -> None:
    obj = S.response([S.reasoning(), S.message("Paris is ", "the capital."), S.function_call(),
                      S.message("Second item.", item_id="msg_2", refusal="no")])
    view = read_response(obj)
    assert view.text == S.validate(obj).output_text == "Paris is the capital.Second item."
    assert view.refusal == "no" and view.calls == 1
    assert (view.id, view.model, view.status) == ("resp_abc123", "gpt-4o-2024-08-06",
                                                  "completed")
    assert view.unverified() is None


@pytest.mark.parametrize(("obj", "note"), [
    (S.response([S.function_call()]), "not verified: the answer is tool calls only"),
    (S.response([], status="failed"), "not verified: the response failed"),
    (S.response([], status="queued"), "not verified: the response is queued (background)"),
    (S.response([S.message("cut sh")], status="incomplete",
                incomplete_details={"reason": "max_output_tokens"}), None),
    (S.response([S.message(refusal="I can't.")]), None),
    (S.response([]), None)])
def test_what_is_not_verified(obj: dict[str, Any], note: str | None) -> None:
    assert read_response(obj).unverified() == note


@pytest.mark.parametrize(("obj", "problem"), [
    ([1], "not a JSON object"), ({"object": "chat.completion", "output": []},
                                 "object is not 'response'"),
    ({"output": None}, "no output array"), ({"output": [3]}, "output[0] is not a typed object"),
    ({"output": [{"type": "message", "content": "x"}]}, "output[0].content is not an array"),
    ({"output": [{"type": "message", "content": [{"type": "output_audio"}]}]},
     "output[0].content[0] is not an output_text or refusal part"),
    ({"output": [{"type": "message", "content": [{"type": "output_text", "text": 3}]}]},
     "output[0].content[0] is not an output_text or refusal part")])
def test_unreadable_responses_say_why(obj: Any, problem: str) -> None:
    view = read_response(obj)
    assert view.problem == problem
    assert view.unverified() == f"not verified: the upstream answer is not a response ({problem})"
    assert as_chat_completion(obj)["choices"] == []


def test_as_chat_completion_is_what_the_engine_reads() -> None:
    obj = S.response([S.message("Paris."), S.function_call()])
    chat = as_chat_completion(obj)
    assert is_completion(chat) and answer_text(chat) == "Paris." and not calls_only(chat)
    assert chat["id"] == "resp_abc123" and chat["created"] == 1751642570
    assert chat["choices"][0]["finish_reason"] == "tool_calls"
    assert chat["choices"][0]["message"]["tool_calls"] == [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]
    assert chat["usage"] == {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19,
                             "prompt_tokens_details": {"cached_tokens": 2},
                             "completion_tokens_details": {"reasoning_tokens": 3}}
    only_calls = as_chat_completion(S.response([S.reasoning(), S.function_call()]))
    assert calls_only(only_calls)


@pytest.mark.parametrize(("status", "reason", "finish"), [
    ("completed", None, "stop"), ("incomplete", "max_output_tokens", "length"),
    ("incomplete", "content_filter", "content_filter"), ("failed", None, None)])
def test_finish_reasons(status: str, reason: str | None, finish: str | None) -> None:
    obj = S.response([S.message("x")], status=status,
                     incomplete_details={"reason": reason} if reason else None)
    assert as_chat_completion(obj)["choices"][0]["finish_reason"] == finish


# ---- actions ------------------------------------------------------------------------------

NOTE = "\n\n---\n*Verity: unverified.*"


def test_disclaimer_goes_to_the_last_text_part_every_reader_sees() -> None:
    obj = S.response([S.message("Paris is the capital.")])
    original = copy.deepcopy(obj)
    out = S.validate(with_disclaimer(obj, NOTE))
    assert obj == original  # not changed in place
    assert out.output_text == "Paris is the capital." + NOTE
    assert out.output[0].content[0].text == "Paris is the capital." + NOTE  # type: ignore[union-attr]
    assert len(out.output[0].content) == 1  # type: ignore[union-attr]


def test_disclaimer_after_tool_calls_and_several_messages() -> None:
    obj = S.response([S.message("A.", item_id="msg_1"), S.function_call(),
                      S.message("B1 ", "B2", item_id="msg_2", refusal="r")])
    out = S.validate(with_disclaimer(obj, NOTE))
    assert out.output_text == "A.B1 B2" + NOTE
    assert out.output[2].content[1].text == "B2" + NOTE  # type: ignore[union-attr]


def test_disclaimer_without_text_adds_a_message_item() -> None:
    obj = S.response([S.message(refusal="No.")])
    out = S.validate(with_disclaimer(obj, NOTE))
    assert out.output_text == NOTE and len(out.output) == 2
    assert out.output[1].id == "msg_abc123_verity"  # type: ignore[union-attr]


def test_block_is_a_refusal_message_keeping_id_and_usage() -> None:
    obj = S.response([S.reasoning(), S.message("Wrong."), S.function_call()], status="incomplete",
                     incomplete_details={"reason": "max_output_tokens"})
    out = S.validate(blocked_response(obj, "Blocked: it failed verification."))
    assert out.status == "completed" and out.incomplete_details is None
    assert out.id == "resp_abc123" and out.usage is not None and out.usage.total_tokens == 19
    assert len(out.output) == 1 and out.output[0].id == "msg_1"  # type: ignore[union-attr]
    part = out.output[0].content[0]  # type: ignore[union-attr]
    assert part.type == "refusal" and part.refusal == "Blocked: it failed verification."
    assert out.output_text == ""
    as_text = S.validate(blocked_response(obj, "Blocked.", refusal=False))
    assert as_text.output_text == "Blocked."
    assert read_response(blocked_response(obj, "x")).refusal == "x"


@pytest.mark.parametrize("given", ["Capital of France?",
                                   [{"role": "user", "content": "Capital of France?"}]])
def test_regenerate_appends_the_failed_answer_and_the_feedback(given: Any) -> None:
    body = {"model": "m", "instructions": "Be exact.", "input": given, "stream": True,
            "stream_options": {"include_obfuscation": False}, "previous_response_id": "r0"}
    out = regenerate_body(body, "Lyon.", "Fix: Lyon is not supported.", model="big")
    assert out == {"model": "big", "instructions": "Be exact.", "previous_response_id": "r0",
                   "input": [{"role": "user", "content": "Capital of France?"},
                             {"role": "assistant", "content": "Lyon."},
                             {"role": "user", "content": "Fix: Lyon is not supported."}]}
    assert body["input"] == given  # not changed in place
    check_input(out)
    assert read_request(out).messages[-2:] == out["input"][-2:]
