"""Every action × delivery (non-stream, stream buffer, stream passthrough) × mode
(inline, shadow), through a real gateway and the openai SDK.

The scripted upstream echoes the user ("You said: …"); the ``keyword`` layer fails
answers containing "forbidden", so the ``fail`` band's action is the one tested.
Policies are picked per request with ``x-verity-policy`` (header selection).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai
import pytest

from modes.conftest import PolicyGateway
from modes.support import RecordingTelemetry, verity_headers, write_policy

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import GatewayFactory, ServedGateway

ACTIONS = {
    "pass": "{type: pass}",
    "flag": "{type: flag}",
    "disclaimer": '{type: disclaimer, template: "\\n[unverified ({verdict}, {score}): {reasons}]"}',
    "block": '{type: block, message: "Blocked by {policy}."}',
}
QUESTION = "tell me the forbidden thing"
ORIGINAL = f"You said: {QUESTION}"
DISCLAIMER = '\n[unverified (fail, 0.0000): keyword: blocked by block[0] (1 match)]'


def _policy(mode: str, streaming: str, action: str) -> str:
    return f"""
mode: {mode}
allow_header_selection: true
streaming: {streaming}
layers:
  - name: keyword
    config: {{block: ["forbidden"]}}
actions:
  fail: {ACTIONS[action]}
"""


@pytest.fixture(scope="module")
def matrix_gateway(make_gateway: GatewayFactory,
                   tmp_path_factory: pytest.TempPathFactory) -> PolicyGateway:
    directory = tmp_path_factory.mktemp("matrix-policies")
    for mode in ("inline", "shadow"):
        for streaming in ("buffer", "passthrough"):
            for action in ACTIONS:
                write_policy(directory, f"{mode}-{streaming}-{action}",
                             _policy(mode, streaming, action))
    telemetry = RecordingTelemetry()
    audit = tmp_path_factory.mktemp("matrix-audit") / "audit.jsonl"
    served: ServedGateway = make_gateway(policies_dir=str(directory), reload_policies=False,
                                         audit={"path": str(audit)},
                                         app_kwargs={"telemetry": telemetry})
    return PolicyGateway(served, directory, telemetry)


def _ask(client: openai.OpenAI, policy: str, delivery: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"model": "scripted-small",
                              "messages": [{"role": "user", "content": QUESTION}],
                              "extra_headers": {"x-verity-policy": policy}}
    if delivery == "nonstream":
        raw = client.chat.completions.with_raw_response.create(**kwargs)
        r = raw.parse()
        return {"headers": verity_headers(raw.headers), "content": r.choices[0].message.content,
                "finish": r.choices[0].finish_reason, "usage": r.usage, "extra": r.model_extra}
    raw = client.chat.completions.with_raw_response.create(
        stream=True, stream_options={"include_usage": True}, **kwargs)
    content, finish, usage, extra = "", None, None, {}
    for chunk in raw.parse():
        if chunk.usage is not None:
            usage = chunk.usage
        extra.update(chunk.model_extra or {})
        for choice in chunk.choices:
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return {"headers": verity_headers(raw.headers), "content": content, "finish": finish,
            "usage": usage, "extra": extra}


def _expected(mode: str, delivery: str, action: str, policy: str) -> tuple[str, str]:
    if mode == "shadow" or action in ("pass", "flag"):
        return ORIGINAL, "stop"
    if action == "disclaimer":
        return ORIGINAL + DISCLAIMER, "stop"
    if delivery == "passthrough":  # already streamed: the block is signalled after the text
        return f"{ORIGINAL}\n\nBlocked by {policy}.", "content_filter"
    return f"Blocked by {policy}.", "content_filter"


@pytest.mark.parametrize("action", list(ACTIONS))
@pytest.mark.parametrize("delivery", ["nonstream", "buffer", "passthrough"])
@pytest.mark.parametrize("mode", ["inline", "shadow"])
def test_action_delivery_mode(matrix_gateway: PolicyGateway, make_client: Callable[..., Any],
                              upstream: Any, wait_until: Callable[..., Any],
                              mode: str, delivery: str, action: str) -> None:
    streaming = "passthrough" if delivery == "passthrough" else "buffer"
    policy = f"{mode}-{streaming}-{action}"
    got = _ask(make_client(matrix_gateway.base_url), policy, delivery)

    content, finish = _expected(mode, delivery, action, policy)
    assert got["content"] == content
    assert got["finish"] == finish
    assert got["usage"] is not None and got["usage"].total_tokens > 0  # usage passes through

    h = got["headers"]
    assert h["x-verity-policy"] == policy and h["x-verity-mode"] == mode
    audit_id = h["x-verity-audit-id"]
    if mode == "inline" and delivery != "passthrough":
        assert h["x-verity-verdict"] == "fail"
        assert h["x-verity-action"] == action
        assert h["x-verity-score"] == "0.0000"
        assert h["x-verity-layers"] == "keyword=0.0000:fail"
    else:  # the body started before the verdict existed (or shadow): no verdict headers
        assert set(h) == {"x-verity-policy", "x-verity-mode", "x-verity-audit-id"}
    if mode == "inline" and delivery == "passthrough" and action in ("disclaimer", "block"):
        assert got["extra"]["verity"]["action"] == action
        assert got["extra"]["verity"]["audit_id"] == audit_id

    def record() -> dict[str, Any] | None:
        return next((r for r in matrix_gateway.audit() if r["audit_id"] == audit_id), None)

    rec = wait_until(record, message="audit record")
    assert rec["policy"] == policy and rec["mode"] == mode
    assert rec["verdict"] == "fail" and rec["action"] == action
    assert rec["applied"] is (mode == "inline")
    assert rec["stream"] is (delivery != "nonstream")
    assert rec["layers"][0]["key"] == "keyword" and rec["layers"][0]["passed"] is False


@pytest.mark.parametrize("delivery", ["nonstream", "buffer", "passthrough"])
def test_passing_answer_is_untouched(matrix_gateway: PolicyGateway,
                                     make_client: Callable[..., Any], upstream: Any,
                                     delivery: str) -> None:
    streaming = "passthrough" if delivery == "passthrough" else "buffer"
    client = make_client(matrix_gateway.base_url)
    kwargs: dict[str, Any] = {"model": "scripted-small",
                              "messages": [{"role": "user", "content": "a fine question"}],
                              "extra_headers": {"x-verity-policy": f"inline-{streaming}-block"}}
    if delivery == "nonstream":
        raw = client.chat.completions.with_raw_response.create(**kwargs)
        assert raw.parse().choices[0].message.content == "You said: a fine question"
        assert raw.parse().model_extra == {"x_scripted": {"note": "unknown fields survive the proxy"}}
    else:
        raw = client.chat.completions.with_raw_response.create(stream=True, **kwargs)
        chunks = list(raw.parse())
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == \
            "You said: a fine question"
        assert all(c.usage is None for c in chunks)  # no include_usage asked: none sent
    h = verity_headers(raw.headers)
    if delivery != "passthrough":
        assert h["x-verity-verdict"] == "pass" and h["x-verity-action"] == "pass"
        assert h["x-verity-layers"] == "keyword=1.0000:pass"


def test_block_error_style(make_gateway: GatewayFactory, tmp_path: Path,
                           make_client: Callable[..., Any], upstream: Any) -> None:
    write_policy(tmp_path, "strict", """
mode: inline
default: true
layers: [{name: keyword, config: {block: [forbidden]}}]
actions: {fail: {type: block, style: error, status: 451, message: "No ({reasons})."}}
""")
    gw = make_gateway(policies_dir=str(tmp_path), reload_policies=False)
    client = make_client(gw.base_url)
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="scripted-small",
                                       messages=[{"role": "user", "content": QUESTION}])
    err = info.value
    assert err.status_code == 451
    assert err.body == {"message": 'No (keyword: blocked by block[0] (1 match)).',
                        "type": "content_filter",
                        "param": None, "code": "content_filter"}
    assert err.response.headers["x-verity-action"] == "block"
    # streaming (buffer): the same error before any byte of the stream
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="scripted-small", stream=True,
                                       messages=[{"role": "user", "content": QUESTION}])
    assert info.value.status_code == 451
    gw.stop()


def test_block_error_style_in_passthrough_stream_raises_mid_stream(
        make_gateway: GatewayFactory, tmp_path: Path, make_client: Callable[..., Any],
        upstream: Any) -> None:
    write_policy(tmp_path, "strict", """
mode: inline
default: true
streaming: passthrough
layers: [{name: keyword, config: {block: [forbidden]}}]
actions: {fail: {type: block, style: error}}
""")
    gw = make_gateway(policies_dir=str(tmp_path), reload_policies=False)
    stream = make_client(gw.base_url).chat.completions.create(
        model="scripted-small", stream=True, messages=[{"role": "user", "content": QUESTION}])
    seen = ""
    with pytest.raises(openai.APIError, match="failed verification"):
        for chunk in stream:
            seen += chunk.choices[0].delta.content or ""
    assert seen == ORIGINAL  # the text was already delivered; the error ends the stream
    gw.stop()
