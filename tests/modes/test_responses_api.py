"""``POST /v1/responses`` verified like chat completions, through a real gateway and
the official SDK (``responses.create``, ``responses.stream``): actions in the
Responses shape, buffer and passthrough streams, shadow, the audit, the context the
layers read, and upstreams without the Responses API (translated to chat)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import openai
import pytest

from modes.conftest import StartGateway
from modes.support import verity_headers
from gateway.testing.scripted import Rule

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import ServedUpstream

GOOD = "Paris is the capital of France."
BAD = "Paris is the capital of France. Atlantis was founded in 1200."
NOTE = "Unverified answer."


def _policy(action: str, *, mode: str = "inline", streaming: str = "buffer") -> str:
    return f"""
mode: {mode}
default: true
streaming: {streaming}
layers: [{{name: wordclaims, config: {{word: atlantis}}}}]
actions:
  fail: {action}
"""


DISCLAIMER = f'{{type: disclaimer, template: "\\n\\n{NOTE}"}}'
BLOCK = '{type: block, message: "Blocked by policy."}'
BLOCK_ERROR = '{type: block, style: error, message: "Blocked by policy.", status: 422}'


def _responses(upstream: ServedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r["path"] == "/v1/responses"]


@pytest.fixture
def client_for(make_client: Callable[..., openai.OpenAI]) -> Callable[..., openai.OpenAI]:
    return lambda gw: make_client(gw.base_url)


# ---- non-stream ------------------------------------------------------------------------


@pytest.mark.usefixtures("test_layers")
def test_pass_is_the_upstream_response_with_verdict_headers_and_audit(
        start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = GOOD
    gw = start_gateway({"p": _policy(DISCLAIMER)})
    raw = client_for(gw).responses.with_raw_response.create(
        model="scripted-small", input="What is the capital of France?")
    r = raw.parse()
    assert r.output_text == GOOD
    h = verity_headers(raw.headers)
    assert (h["x-verity-verdict"], h["x-verity-action"], h["x-verity-mode"]) == \
        ("pass", "pass", "inline")
    (rec,) = gw.audit(expect=1)
    assert rec["verdict"] == "pass"
    assert rec["response_id"] == r.id
    assert _responses(upstream)[0]["json"]["input"] == "What is the capital of France?"


@pytest.mark.usefixtures("test_layers")
def test_disclaimer_is_appended_to_the_last_output_text_part(
        start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = BAD
    gw = start_gateway({"p": _policy(DISCLAIMER)})
    raw = client_for(gw).responses.with_raw_response.create(model="scripted-small",
                                                            input="Tell me about Paris.")
    r = raw.parse()
    assert r.output_text == f"{BAD}\n\n{NOTE}"
    assert verity_headers(raw.headers)["x-verity-action"] == "disclaimer"
    (rec,) = gw.audit(expect=1)
    assert (rec["verdict"], rec["action"]) == ("fail", "disclaimer")


@pytest.mark.usefixtures("test_layers")
def test_block_is_a_refusal_item_or_an_error(
        start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = BAD
    gw = start_gateway({"p": _policy(BLOCK)})
    r = client_for(gw).responses.create(model="scripted-small", input="Tell me about Paris.")
    assert r.output_text == "" and r.status == "completed"
    (item,) = r.output
    assert item.type == "message"
    assert [(p.type, getattr(p, "refusal", None)) for p in item.content] == \
        [("refusal", "Blocked by policy.")]

    gw2 = start_gateway({"p": _policy(BLOCK_ERROR)})
    with pytest.raises(openai.APIStatusError) as err:
        client_for(gw2).responses.create(model="scripted-small", input="Tell me about Paris.")
    assert err.value.status_code == 422
    assert isinstance(err.value.body, dict) and err.value.body["message"] == "Blocked by policy."


@pytest.mark.usefixtures("test_layers")
def test_regenerate_resends_the_input_with_the_failed_answer_and_feedback(
        start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.rules = [Rule("could not be verified", GOOD), Rule("capital", BAD)]
    gw = start_gateway({"p": _policy("{type: regenerate, max_attempts: 2}")})
    raw = client_for(gw).responses.with_raw_response.create(
        model="scripted-small", instructions="Be brief.",
        input=[{"role": "user", "content": "What is the capital of France?"}],
        temperature=0.5)
    assert raw.parse().output_text == GOOD
    h = verity_headers(raw.headers)
    assert (h["x-verity-action"], h["x-verity-verdict"], h["x-verity-attempts"]) == \
        ("regenerate", "pass", "1")
    first, second = _responses(upstream)
    sent = second["json"]
    assert sent["instructions"] == "Be brief." and sent["temperature"] == 0.5
    assert "stream" not in sent or sent["stream"] is False
    assert sent["input"][0] == {"role": "user", "content": "What is the capital of France?"}
    assert sent["input"][-2]["role"] == "assistant"
    assert BAD in str(sent["input"][-2]["content"])
    assert sent["input"][-1]["role"] == "user"
    assert "Atlantis was founded in 1200." in str(sent["input"][-1]["content"])


# ---- streams ----------------------------------------------------------------------------


@pytest.mark.usefixtures("test_layers")
@pytest.mark.parametrize("streaming", ["buffer", "passthrough"])
def test_stream_with_a_disclaimer_through_the_sdk_stream_helper(
        streaming: str, start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = BAD
    gw = start_gateway({"p": _policy(DISCLAIMER, streaming=streaming)})
    deltas: list[str] = []
    with client_for(gw).responses.stream(model="scripted-small",
                                         input="Tell me about Paris.") as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert final.output_text == f"{BAD}\n\n{NOTE}"
    assert "".join(deltas) == final.output_text
    assert final.model_extra is not None
    if streaming == "passthrough":  # the verdict rides on the terminal response
        assert final.model_extra["verity"]["verdict"] == "fail"
    (rec,) = gw.audit(expect=1)
    assert (rec["verdict"], rec["action"], rec["streaming"]) == ("fail", "disclaimer", streaming)


@pytest.mark.usefixtures("test_layers")
@pytest.mark.parametrize("streaming", ["buffer", "passthrough"])
def test_stream_pass_is_delivered_whole(
        streaming: str, start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = GOOD
    gw = start_gateway({"p": _policy(DISCLAIMER, streaming=streaming)})
    events = list(client_for(gw).responses.create(model="scripted-small", input="Hi.",
                                                  stream=True))
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == GOOD
    assert [e.sequence_number for e in events] == list(range(len(events)))
    (rec,) = gw.audit(expect=1)
    assert rec["verdict"] == "pass"


@pytest.mark.usefixtures("test_layers")
def test_passthrough_block_error_ends_the_stream_with_an_error_event(
        start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = BAD
    gw = start_gateway({"p": _policy(BLOCK_ERROR, streaming="passthrough")})
    seen: list[str] = []
    with pytest.raises(openai.APIError) as err:
        for event in client_for(gw).responses.create(model="scripted-small", input="Hi.",
                                                     stream=True):
            seen.append(event.type)
    assert "Blocked by policy." in err.value.message
    assert "response.output_text.delta" in seen and "response.completed" not in seen


@pytest.mark.usefixtures("test_layers")
def test_buffered_block_streams_the_refusal(
        start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = BAD
    gw = start_gateway({"p": _policy(BLOCK)})
    with client_for(gw).responses.stream(model="scripted-small", input="Hi.") as stream:
        final = stream.get_final_response()
    assert final.output_text == ""
    assert final.output[0].content[0].type == "refusal"  # type: ignore[union-attr]
    assert "Atlantis" not in str(final.to_dict())


# ---- shadow -----------------------------------------------------------------------------


@pytest.mark.usefixtures("test_layers")
@pytest.mark.parametrize("stream", [False, True])
def test_shadow_relays_the_upstream_bytes_and_audits_in_the_background(
        stream: bool, start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = BAD
    gw = start_gateway({"p": _policy(DISCLAIMER, mode="shadow")})
    direct = openai.OpenAI(base_url=upstream.base_url, api_key="x", max_retries=0)
    with direct:
        if stream:
            via = client_for(gw).responses.create(model="scripted-small", input="Hi.",
                                                  stream=True)
            events = list(via)
            assert events[-1].type == "response.completed"
            text = events[-1].response.output_text
        else:
            raw = client_for(gw).responses.with_raw_response.create(model="scripted-small",
                                                                    input="Hi.")
            assert verity_headers(raw.headers)["x-verity-mode"] == "shadow"
            text = raw.parse().output_text
    assert text == BAD  # untouched: no disclaimer in shadow
    (rec,) = gw.audit(expect=1)
    assert (rec["mode"], rec["verdict"]) == ("shadow", "fail")


# ---- what the layers read ---------------------------------------------------------------


@pytest.mark.usefixtures("test_layers")
def test_previous_response_id_is_named_in_the_audit_note(
        start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = GOOD
    gw = start_gateway({"p": _policy(DISCLAIMER)})
    client_for(gw).responses.create(model="scripted-small", input="And Italy?",
                                    previous_response_id="resp_earlier")
    (rec,) = gw.audit(expect=1)
    assert rec["verdict"] == "pass"
    assert "previous_response_id" in (rec["note"] or "")
    assert _responses(upstream)[0]["json"]["previous_response_id"] == "resp_earlier"


def test_no_policy_is_pure_pass_through(
        start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = BAD
    gw = start_gateway({})
    raw = client_for(gw).responses.with_raw_response.create(model="scripted-small",
                                                            input="Hi.")
    assert raw.parse().output_text == BAD
    assert "x-verity-verdict" not in raw.headers
    events = list(client_for(gw).responses.create(model="scripted-small", input="Hi.",
                                                  stream=True))
    assert events[-1].type == "response.completed"
    with pytest.raises(openai.APIError):  # a cut stream ends with an error event
        list(client_for(gw).responses.create(model="scripted-small", input="Hi.", stream=True,
                                             extra_headers={"x-mock-cut-after": "5"}))
    assert gw.audit() == []


@pytest.mark.usefixtures("test_layers")
def test_a_shape_no_server_accepts_is_a_400_before_the_upstream_is_called(
        start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    gw = start_gateway({"p": _policy(DISCLAIMER)})
    with pytest.raises(openai.BadRequestError) as err:
        client_for(gw).responses.create(model="scripted-small",
                                        input=[{"role": "user", "content": 42}])  # type: ignore[list-item]
    assert isinstance(err.value.body, dict) and err.value.body["type"] == "invalid_request_error"
    assert _responses(upstream) == []


# ---- upstreams without the Responses API ------------------------------------------------


@pytest.mark.usefixtures("test_layers")
@pytest.mark.parametrize("stream,streaming", [(False, "buffer"), (True, "buffer"),
                                              (True, "passthrough")])
def test_an_upstream_without_the_responses_api_is_sent_chat_completions(
        stream: bool, streaming: str, start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.responses_api = False
    upstream.app.default_reply = BAD
    gw = start_gateway({"p": _policy(DISCLAIMER, streaming=streaming)}, upstreams=[
        {"name": "chat-only", "base_url": upstream.base_url, "responses_api": False}])
    client = client_for(gw)
    if stream:
        with client.responses.stream(model="scripted-small", instructions="Be brief.",
                                     input="Tell me about Paris.") as s:
            final = s.get_final_response()
    else:
        final = client.responses.create(model="scripted-small", instructions="Be brief.",
                                        input="Tell me about Paris.")
    assert final.output_text == f"{BAD}\n\n{NOTE}"
    assert _responses(upstream) == []
    sent = upstream.last("/v1/chat/completions")["json"]
    assert sent["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Tell me about Paris."}]
    (rec,) = gw.audit(expect=1)
    assert (rec["verdict"], rec["action"]) == ("fail", "disclaimer")


def test_an_untranslatable_field_is_a_clear_400(
        start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.responses_api = False
    gw = start_gateway({}, upstreams=[
        {"name": "chat-only", "base_url": upstream.base_url, "responses_api": False}])
    with pytest.raises(openai.BadRequestError) as err:
        client_for(gw).responses.create(model="scripted-small", input="Hi.",
                                        tools=[{"type": "web_search"}])
    body = err.value.body
    assert isinstance(body, dict) and body["type"] == "invalid_request_error"
    assert "tools" in str(body.get("param")) + body["message"]
    assert upstream.requests == []


@pytest.mark.usefixtures("test_layers")
def test_passthrough_block_appends_the_message_and_the_verdict(
        start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = BAD
    gw = start_gateway({"p": _policy(BLOCK, streaming="passthrough")})
    with client_for(gw).responses.stream(model="scripted-small", input="Hi.") as stream:
        final = stream.get_final_response()
    assert final.output_text == f"{BAD}\n\nBlocked by policy."  # sent text cannot be taken back
    assert final.model_extra is not None
    assert final.model_extra["verity"]["action"] == "block"
    (rec,) = gw.audit(expect=1)
    assert (rec["verdict"], rec["action"]) == ("fail", "block")


@pytest.mark.usefixtures("test_layers")
@pytest.mark.parametrize("stream", [False, True])
def test_structured_output_is_flagged_not_disclaimed(
        stream: bool, start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = '{"city": "Atlantis was founded in 1200."}'
    gw = start_gateway({"p": _policy(DISCLAIMER)})
    text_format: Any = {"format": {"type": "json_object"}}
    client = client_for(gw)
    if stream:
        with client.responses.stream(model="scripted-small", input="Hi, in JSON.",
                                     text=text_format) as s:
            out = s.get_final_response().output_text
    else:
        raw = client.responses.with_raw_response.create(model="scripted-small",
                                                        input="Hi, in JSON.", text=text_format)
        out = raw.parse().output_text
        assert verity_headers(raw.headers)["x-verity-action"] == "flag"
    assert out == upstream.app.default_reply  # still parseable JSON
    chat = client.chat.completions.create(model="scripted-small",
                                          messages=[{"role": "user", "content": "Hi, in JSON."}],
                                          response_format={"type": "json_object"})
    assert chat.choices[0].message.content == upstream.app.default_reply
    records = gw.audit(expect=2)
    assert [(r["verdict"], r["action"]) for r in records] == [("fail", "flag")] * 2
    assert all("structured" in (r["note"] or "") for r in records)


@pytest.mark.usefixtures("test_layers")
def test_upstream_errors_and_cut_streams_reach_the_sdk_as_errors(
        start_gateway: StartGateway, upstream: ServedUpstream,
        client_for: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = GOOD
    gw = start_gateway({"p": _policy(DISCLAIMER, streaming="passthrough")})
    client = client_for(gw)
    with pytest.raises(openai.RateLimitError):
        client.responses.create(model="scripted-small", input="Hi.",
                                extra_headers={"x-mock-status": "429"})
    with pytest.raises(openai.APIError) as err:
        list(client.responses.create(model="scripted-small", input="Hi.", stream=True,
                                     extra_headers={"x-mock-cut-after": "4"}))
    assert "upstream" in err.value.message
    (rec,) = gw.audit(expect=1)  # the 429 was the upstream's own answer: no record
    assert (rec["note"] or "").startswith("not verified")


def test_gateway_keys_must_be_granted_the_responses_route(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = GOOD
    keys = [{"name": "plain", "tenant": "t1", "key": "sk-gw-plain-000000000001"},
            {"name": "granted", "tenant": "t1", "key": "sk-gw-granted-0000000002",
             "routes": ["POST /v1/chat/completions", "POST /v1/responses"]}]
    gw = start_gateway({}, auth={"keys": keys})
    with pytest.raises(openai.PermissionDeniedError):
        make_client(gw.base_url, api_key=keys[0]["key"]).responses.create(
            model="scripted-small", input="Hi.")
    assert _responses(upstream) == []
    r = make_client(gw.base_url, api_key=keys[1]["key"]).responses.create(
        model="scripted-small", input="Hi.")
    assert r.output_text == GOOD
