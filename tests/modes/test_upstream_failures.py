"""An upstream that fails on a policy path (connect error, timeout, a stream cut before
the gateway answered): the error response still names the policy and mode, carries
the audit id, and an audit record with a note accounts for the request — as shadow
and ``streaming: passthrough`` already did for a stream cut mid-relay. Upstream HTTP
errors (status >= 400 answered by the upstream) stay unrecorded."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import openai
import pytest

from modes.conftest import StartGateway
from modes.support import verity_headers
from gateway.testing.servers import free_port

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import ServedUpstream

ASK: Any = [{"role": "user", "content": "hello"}]


def _policy(mode: str, streaming: str) -> str:
    return f"""
mode: {mode}
default: true
streaming: {streaming}
layers: [{{name: keyword, config: {{block: [zzz]}}}}]
"""


# (policy mode, stream, streaming)
DELIVERIES = [("inline", False, "buffer"), ("inline", True, "buffer"),
              ("inline", True, "passthrough"), ("shadow", False, "buffer"),
              ("shadow", True, "buffer")]
IDS = ["inline", "inline-buffer", "inline-passthrough", "shadow", "shadow-stream"]


def _fail(client: openai.OpenAI, stream: bool, headers: dict[str, str] | None = None
          ) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="scripted-small", messages=ASK, stream=stream,
                                       extra_headers=headers or {})
    return info.value


def _assert_accounted(gw: Any, err: openai.APIStatusError, *, mode: str, stream: bool,
                      status: int, code: str, upstream_status: int | None) -> None:
    assert (err.status_code, err.code) == (status, code)
    h = verity_headers(err.response.headers)
    assert (h.get("x-verity-policy"), h.get("x-verity-mode")) == ("p", mode)
    assert "x-verity-verdict" not in h
    (rec,) = gw.audit(expect=1)
    assert rec["audit_id"] == h.get("x-verity-audit-id")
    assert (rec["policy"], rec["mode"], rec["stream"]) == ("p", mode, stream)
    assert rec["note"] == f"not verified: {code}"
    assert (rec["verdict"], rec["action"], rec["layers"]) == (None, None, [])
    assert rec["upstream_status"] == upstream_status


@pytest.mark.parametrize(("mode", "stream", "streaming"), DELIVERIES, ids=IDS)
def test_a_connect_error_names_the_policy_and_is_audited(
        start_gateway: StartGateway, make_client: Callable[..., openai.OpenAI],
        mode: str, stream: bool, streaming: str) -> None:
    down = [{"name": "down", "base_url": f"http://127.0.0.1:{free_port()}/v1"}]
    gw = start_gateway({"p": _policy(mode, streaming)}, upstreams=down)
    err = _fail(make_client(gw.base_url), stream)
    _assert_accounted(gw, err, mode=mode, stream=stream, status=502,
                      code="upstream_connect_error", upstream_status=None)


@pytest.mark.parametrize(("mode", "stream", "streaming"), DELIVERIES, ids=IDS)
def test_an_upstream_timeout_names_the_policy_and_is_audited(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI], mode: str, stream: bool,
        streaming: str) -> None:
    slow = [{"name": "slow", "base_url": upstream.base_url, "timeouts": {"read": 0.3}}]
    gw = start_gateway({"p": _policy(mode, streaming)}, upstreams=slow)
    err = _fail(make_client(gw.base_url), stream, {"x-mock-delay-ms": "3000"})
    _assert_accounted(gw, err, mode=mode, stream=stream, status=504,
                      code="upstream_timeout", upstream_status=None)


def test_a_cut_stream_in_buffer_mode_names_the_policy_and_is_audited(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    gw = start_gateway({"p": _policy("inline", "buffer")})
    err = _fail(make_client(gw.base_url), True, {"x-mock-cut-after": "2"})
    _assert_accounted(gw, err, mode="inline", stream=True, status=502,
                      code="upstream_stream_error", upstream_status=200)


def test_a_stalled_stream_in_buffer_mode_names_the_policy_and_is_audited(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    slow = [{"name": "slow", "base_url": upstream.base_url, "timeouts": {"read": 0.3}}]
    gw = start_gateway({"p": _policy("inline", "buffer")}, upstreams=slow)
    err = _fail(make_client(gw.base_url), True, {"x-mock-chunk-delay-ms": "3000"})
    _assert_accounted(gw, err, mode="inline", stream=True, status=504,
                      code="upstream_timeout", upstream_status=200)


@pytest.mark.parametrize(("mode", "streaming", "note"), [
    ("inline", "passthrough", "not verified: the upstream stream failed"),
    ("shadow", "buffer", "not verified: the upstream stream was cut")])
def test_a_stream_cut_after_the_body_started_ends_in_band_and_is_audited(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI], mode: str, streaming: str,
        note: str) -> None:
    # The behaviour the error paths above are made consistent with.
    gw = start_gateway({"p": _policy(mode, streaming)})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=ASK, stream=True,
        extra_headers={"x-mock-cut-after": "2"})
    with pytest.raises(openai.APIError) as info:
        list(raw.parse())
    assert isinstance(info.value.body, dict)
    assert info.value.body["code"] == "upstream_stream_error"
    h = verity_headers(raw.headers)
    (rec,) = gw.audit(expect=1)
    assert (h["x-verity-policy"], h["x-verity-mode"], h["x-verity-audit-id"]) == \
        ("p", mode, rec["audit_id"])
    assert (rec["note"], rec["upstream_status"]) == (note, 200)


@pytest.mark.parametrize(("mode", "stream", "streaming"), DELIVERIES, ids=IDS)
def test_an_upstream_http_error_passes_through_without_a_record(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI], mode: str, stream: bool,
        streaming: str) -> None:
    gw = start_gateway({"p": _policy(mode, streaming)})
    err = _fail(make_client(gw.base_url), stream, {"x-mock-status": "503"})
    assert (err.status_code, err.code) == (503, "scripted_503")
    assert verity_headers(err.response.headers) == {"x-verity-policy": "p",
                                                    "x-verity-mode": mode}
    assert gw.audit() == []
