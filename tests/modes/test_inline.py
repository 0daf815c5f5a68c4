"""Inline verification through a real gateway: regenerate with feedback, fallback,
fail-open / fail-closed, candidates, the detail body field, upstream errors."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import openai
import pytest

from modes import support
from modes.conftest import StartGateway
from modes.support import verity_headers
from gateway.testing.scripted import Rule

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import ServedUpstream

CLAIM = "Atlantis was founded in 1200."
BAD = f"Paris is the capital of France. {CLAIM}"
GOOD = "Paris is the capital of France."
ASK = [{"role": "user", "content": "What is the capital of France?"}]


def _regen_policy(extra: str = "", streaming: str = "buffer") -> str:
    return f"""
mode: inline
default: true
streaming: {streaming}
layers: [{{name: wordclaims, config: {{word: atlantis}}}}]
actions:
  fail: {{type: regenerate, {extra}}}
"""


def _chat_requests(upstream: ServedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r["path"] == "/v1/chat/completions"]


@pytest.mark.usefixtures("test_layers")
def test_regenerate_sends_repair_feedback_naming_failed_claims(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.rules = [Rule("could not be verified", GOOD), Rule("capital", BAD)]
    gw = start_gateway({"regen": _regen_policy("max_attempts: 2")})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=ASK, temperature=0.5)
    r = raw.parse()
    assert r.choices[0].message.content == GOOD
    h = verity_headers(raw.headers)
    assert (h["x-verity-action"], h["x-verity-verdict"], h["x-verity-attempts"]) == \
        ("regenerate", "pass", "1")
    assert r.usage is not None and r.usage.completion_tokens == len(GOOD.split())  # final's usage

    first, second = _chat_requests(upstream)
    sent = second["json"]
    assert sent["temperature"] == 0.5 and "stream" not in sent
    assert sent["messages"][:-2] == ASK
    assert sent["messages"][-2] == {"role": "assistant", "content": BAD}
    feedback = sent["messages"][-1]
    assert feedback["role"] == "user"
    assert f'1. "{CLAIM}"' in feedback["content"]  # seed 001's repair prompt names the claim
    assert "Paris is the capital" not in feedback["content"]  # only failed claims are listed

    (rec,) = gw.audit(expect=1)
    assert rec["action"] == "regenerate" and rec["attempts"] == 1
    assert [a["verdict"] for a in rec["attempt_history"]] == ["fail", "pass"]
    # failed claims are answer text: recorded only with telemetry.record_content
    assert rec["attempt_history"][0]["failed_claims"] == []
    assert rec["attempt_history"][0]["failed_claim_count"] == 1


@pytest.mark.usefixtures("test_layers")
def test_regenerate_in_buffered_stream_emits_the_new_answer(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.rules = [Rule("could not be verified", GOOD), Rule("capital", BAD)]
    gw = start_gateway({"regen": _regen_policy()})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=ASK, stream=True,
        stream_options={"include_usage": True})
    chunks = list(raw.parse())
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == GOOD
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6
    assert verity_headers(raw.headers)["x-verity-action"] == "regenerate"
    first, second = _chat_requests(upstream)
    assert first["json"]["stream_options"] == {"include_usage": True}  # as the client sent
    assert "stream" not in second["json"] and "stream_options" not in second["json"]


@pytest.mark.usefixtures("test_layers")
def test_regenerate_falls_back_after_max_attempts_and_fallback_model(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = BAD  # never repaired
    gw = start_gateway({"regen": _regen_policy(
        'max_attempts: 2, fallback_model: scripted-large, '
        'fallback: {type: block, message: "Could not verify: {failed_claims}"}')})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=ASK)
    r = raw.parse()
    assert r.choices[0].message.content == f"Could not verify: {CLAIM}"
    assert r.choices[0].finish_reason == "content_filter"
    h = verity_headers(raw.headers)
    assert (h["x-verity-action"], h["x-verity-attempts"]) == ("block", "3")
    models = [req["json"]["model"] for req in _chat_requests(upstream)]
    assert models == ["scripted-small", "scripted-small", "scripted-small", "scripted-large"]
    (rec,) = gw.audit(expect=1)
    assert rec["attempts"] == 3 and "fallback block" in rec["note"]


@pytest.mark.usefixtures("test_layers")
def test_regenerate_in_passthrough_stream_degrades_to_fallback(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.rules = [Rule("capital", BAD)]
    gw = start_gateway({"regen": _regen_policy(
        'fallback: {type: disclaimer, template: " [unverified]"}', streaming="passthrough")})
    stream = make_client(gw.base_url).chat.completions.create(
        model="scripted-small", messages=ASK, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == BAD + " [unverified]"
    assert len(_chat_requests(upstream)) == 1  # nothing was re-asked
    (rec,) = gw.audit(expect=1)
    assert rec["action"] == "disclaimer" and "passthrough" in rec["note"]


def _error_policy(on_error: str, failing: str) -> str:
    return f"""
mode: inline
default: true
on_error: {on_error}
layers:
  - {{name: keyword, config: {{block: [forbidden]}}}}
  - {failing}
actions: {{fail: {{type: block, message: "blocked"}}}}
"""


FAILING = {
    # By type and origin, never by message (it may quote model text).
    "raises": ("{name: boom, config: {message: judge down}}", "boom",
               "RuntimeError raised at support.py:"
               f"{inspect.getsourcelines(support.BoomLayer.verify)[1] + 1}"),
    "times_out": ("{name: sleep, config: {ms: 5000}, timeout_ms: 50}", "sleep",
                  "timeout after 50 ms"),
}


@pytest.mark.usefixtures("test_layers")
@pytest.mark.parametrize("failure", list(FAILING))
@pytest.mark.parametrize("on_error", ["fail_open", "fail_closed"])
def test_layer_errors_fail_open_or_closed(start_gateway: StartGateway, upstream: ServedUpstream,
                                          make_client: Callable[..., openai.OpenAI],
                                          on_error: str, failure: str) -> None:
    spec, key, error = FAILING[failure]
    gw = start_gateway({"p": _error_policy(on_error, spec)})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=[{"role": "user", "content": "hello"}])
    r = raw.parse()
    h = verity_headers(raw.headers)
    assert h["x-verity-layers"] == f"keyword=1.0000:pass,{key}=error"
    (rec,) = gw.audit(expect=1)
    layer = rec["layers"][1]
    assert layer["key"] == key and layer["error"] == error and layer["score"] is None
    if on_error == "fail_open":
        assert r.choices[0].message.content == "You said: hello"
        assert h["x-verity-verdict"] == "pass" and h["x-verity-score"] == "1.0000"
        assert gw.telemetry.total("fail_open") == 1 and gw.telemetry.total("fail_closed") == 0
    else:
        assert r.choices[0].message.content == "blocked"
        assert h["x-verity-verdict"] == "fail" and h["x-verity-action"] == "block"
        assert any(error in reason for reason in rec["reasons"])
        assert gw.telemetry.total("fail_closed") == 1 and gw.telemetry.total("fail_open") == 0


@pytest.mark.parametrize("mode", ["inline", "shadow"])
def test_candidates_are_recorded_without_affecting_the_response(
        start_gateway: StartGateway, upstream: ServedUpstream, mode: str,
        make_client: Callable[..., openai.OpenAI], wait_until: Callable[..., Any]) -> None:
    gw = start_gateway({
        "live": f"""
mode: {mode}
default: true
candidates: [strict]
layers: [{{name: keyword, config: {{block: [zzz]}}}}]
""",
        "strict": """
mode: inline
match: {models: ["never-*"]}
layers: [{name: length, config: {max_chars: 5}}]
actions: {fail: {type: block}}
""",
    })
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=[{"role": "user", "content": "hello"}])
    assert raw.parse().choices[0].message.content == "You said: hello"
    h = verity_headers(raw.headers)
    assert h["x-verity-policy"] == "live"
    if mode == "inline":
        assert h["x-verity-verdict"] == "pass" and h["x-verity-action"] == "pass"
    rec = wait_until(lambda: next(iter(gw.audit()), None), message="audit record")
    assert rec["policy"] == "live" and rec["verdict"] == "pass"
    (cand,) = rec["candidates"]
    assert cand["name"] == "strict" and cand["verdict"] == "fail" and cand["action"] == "block"
    assert cand["layers"][0]["key"] == "length" and cand["error"] is None


def test_detail_field_only_when_exposed_and_asked(start_gateway: StartGateway,
                                                  upstream: ServedUpstream,
                                                  make_client: Callable[..., openai.OpenAI]
                                                  ) -> None:
    gw = start_gateway({"p": """
mode: inline
default: true
expose_detail: true
layers: [{name: keyword, config: {block: [zzz]}}, {name: length, config: {min_chars: 1}}]
"""})
    client = make_client(gw.base_url)
    r = client.chat.completions.create(model="scripted-small", messages=ASK,
                                       extra_headers={"x-verity-detail": "true"})
    detail = (r.model_extra or {})["verity"]
    assert detail["verdict"] == "pass" and detail["policy"] == "p"
    assert [layer["key"] for layer in detail["layers"]] == ["keyword", "length"]
    plain = client.chat.completions.create(model="scripted-small", messages=ASK)
    assert "verity" not in (plain.model_extra or {})


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("streaming", ["buffer", "passthrough"])
def test_upstream_errors_pass_through_unverified(start_gateway: StartGateway,
                                                 upstream: ServedUpstream,
                                                 make_client: Callable[..., openai.OpenAI],
                                                 stream: bool, streaming: str) -> None:
    gw = start_gateway({"p": f"""
mode: inline
default: true
streaming: {streaming}
layers: [{{name: keyword, config: {{block: [zzz]}}}}]
"""})
    with pytest.raises(openai.InternalServerError) as info:
        make_client(gw.base_url).chat.completions.create(
            model="scripted-small", messages=ASK, stream=stream,
            extra_headers={"x-mock-status": "500"})
    assert info.value.body == {"message": "scripted error 500", "type": "scripted_error",
                               "param": None, "code": "scripted_500"}
    assert info.value.response.headers["x-verity-policy"] == "p"
    assert "x-verity-verdict" not in info.value.response.headers
    assert gw.audit() == []


def test_bad_policy_header_is_an_openai_error(start_gateway: StartGateway,
                                              upstream: ServedUpstream,
                                              make_client: Callable[..., openai.OpenAI]) -> None:
    gw = start_gateway({"open": """
mode: inline
allow_header_selection: true
layers: [{name: length}]
""", "closed": """
mode: inline
match: {models: ["never-*"]}
layers: [{name: length}]
"""})
    client = make_client(gw.base_url)
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="scripted-small", messages=ASK,
                                       extra_headers={"x-verity-policy": "nope"})
    assert bad.value.body["param"] == "x-verity-policy"  # type: ignore[index]
    with pytest.raises(openai.PermissionDeniedError):
        client.chat.completions.create(model="scripted-small", messages=ASK,
                                       extra_headers={"x-verity-policy": "closed"})
    raw = client.chat.completions.with_raw_response.create(
        model="scripted-small", messages=ASK, extra_headers={"x-verity-policy": "open"})
    assert raw.headers["x-verity-policy"] == "open"
    assert upstream.last("/v1/chat/completions")["headers"].get("x-verity-policy") is None
