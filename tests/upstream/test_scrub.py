"""gateway.upstream.scrub: configured secrets kept out of upstream headers and error bodies.

The end-to-end cases (an upstream echoing its key in a JSON error, an HTML page, a
header; every route) are in ``tests/security/test_fault_upstream.py``; these pin the
pieces: which spellings are found, that JSON is searched after decoding, that no depth
breaks it, and what is left alone.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.settings import Settings
from gateway.upstream.scrub import (
    MAX_ERROR_BYTES,
    REDACTED,
    Secrets,
    configured_secrets,
    relayable_error,
)

KEY = "sk-upstream-0123456789/abc+def"
OTHER = "gw-tenant-key-0042"
SECRETS = Secrets([KEY, OTHER, None, ""])


def test_short_or_missing_secrets_are_not_searched_for() -> None:
    assert len(Secrets(["EMPTY", "short", None, ""])) == 0
    assert not Secrets(["EMPTY"])
    assert Secrets(["EMPTY"]).scrub_body(b'{"error": "EMPTY key"}') == b'{"error": "EMPTY key"}'
    assert len(SECRETS) == 2


def test_headers_without_a_secret_are_the_same_list() -> None:
    headers = [(b"content-type", b"application/json"), (b"x-request-id", b"req-1")]
    assert SECRETS.scrub_headers(headers) is headers


@pytest.mark.parametrize("value", [
    f"Bearer {KEY}".encode(),
    f"https://up.example/auth?key={KEY.replace('/', '%2F').replace('+', '%2B')}".encode(),
    OTHER.encode() + b", " + KEY.encode(),
])
def test_a_secret_in_a_header_value_is_redacted(value: bytes) -> None:
    out = SECRETS.scrub_headers([(b"x-debug", value), (b"x-request-id", b"req-1")])
    assert out[1] == (b"x-request-id", b"req-1")
    assert KEY.encode() not in out[0][1] and OTHER.encode() not in out[0][1]
    assert REDACTED.encode() in out[0][1]


def test_a_json_error_is_searched_after_decoding_so_escapes_do_not_hide_a_key() -> None:
    escaped = "".join(f"\\u{ord(c):04x}" for c in KEY)  # every character escaped
    body = ('{"error": {"message": "Incorrect API key provided: ' + escaped + '", '
            '"type": "invalid_request_error", "code": "invalid_api_key"}}').encode()
    out = SECRETS.scrub_body(body)
    assert out is not None
    parsed = orjson.loads(out)
    assert parsed["error"]["message"] == f"Incorrect API key provided: {REDACTED}"
    assert parsed["error"]["code"] == "invalid_api_key"  # the rest is kept


def test_secrets_in_keys_lists_and_a_bare_string_are_redacted() -> None:
    value: Any = {KEY: [1, {"echo": [f"x {OTHER} y"]}], "ok": "kept"}
    out, changed = SECRETS.scrub_json(value)
    assert changed
    assert out == {REDACTED: [1, {"echo": [f"x {REDACTED} y"]}], "ok": "kept"}
    assert SECRETS.scrub_json(KEY) == (REDACTED, True)
    assert SECRETS.scrub_json({"clean": ["a"]}) == ({"clean": ["a"]}, False)


def test_a_clean_json_error_is_relayed_byte_for_byte() -> None:
    body = b'{"error": {"message": "Rate limit reached",   "type": "x"}}'
    assert SECRETS.scrub_body(body) == body


def test_nesting_as_deep_as_the_parser_allows_does_not_break_the_search() -> None:
    deep = b'{"a": ' * 1000 + orjson.dumps(KEY) + b"}" * 1000
    # Found at depth 1,000 without recursion; too deep to re-encode: nothing relayed.
    assert SECRETS.scrub_body(deep) is None
    clean = b"[" * 1000 + b"]" * 1000
    assert SECRETS.scrub_body(clean) == clean


def test_a_body_that_is_not_json_has_its_secrets_replaced() -> None:
    page = f"<tr><td>Authorization</td><td>Bearer {KEY}</td></tr>".encode()
    out = SECRETS.scrub_body(page)
    assert out is not None and KEY.encode() not in out and REDACTED.encode() in out


def test_an_error_body_over_the_cap_or_unencodable_is_replaced_by_the_gateways() -> None:
    body, replaced = relayable_error("up", 500, None, "application/json", SECRETS)
    err = orjson.loads(body)["error"]
    assert replaced and err["code"] == "upstream_error" and str(MAX_ERROR_BYTES) in err["message"]
    deep = b'{"a": ' * 300 + orjson.dumps(KEY) + b"}" * 300
    body, replaced = relayable_error("up", 401, deep, "application/json", SECRETS)
    assert replaced and KEY.encode() not in body
    assert relayable_error("up", 429, b'{"error": {}}', "application/json", SECRETS) == \
        (b'{"error": {}}', False)


@pytest.mark.parametrize(("data", "ctype", "named"), [
    (b"<html><title>502 Bad Gateway</title></html>", "text/html; charset=utf-8",
     "a text/html body, not a JSON error"),
    (b"upstream connect error or disconnect/reset before headers", "text/plain",
     "a text/plain body, not a JSON error"),
    (b"", "", "an empty body"),
    (b'"Unauthorized"', "application/json", "a body that is not a JSON error object"),
    (b"[1, 2]", "application/json", "a body that is not a JSON error object"),
    (b"<x>", "text/html<script>alert(1)</script>", "a body that is not a JSON error object"),
])
def test_an_error_body_that_is_not_a_json_object_is_named_never_quoted(
        data: bytes, ctype: str, named: str) -> None:
    body, replaced = relayable_error("lb", 502, data, ctype, SECRETS)
    assert replaced
    err = orjson.loads(body)["error"]
    assert err == {"message": f"upstream 'lb' answered HTTP 502 with {named} (not relayed)",
                   "type": "upstream_error", "param": None, "code": "upstream_error"}
    assert not data or data not in body


def test_an_openai_shaped_or_other_json_object_error_is_relayed() -> None:
    vllm = b'{"object": "error", "message": "model not found", "type": "NotFoundError"}'
    assert relayable_error("up", 404, vllm, "application/json", SECRETS) == (vllm, False)


def test_the_configured_secrets_are_every_upstream_judge_and_gateway_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRUB_UP_A", "sk-aaaaaaaaaaaa")
    monkeypatch.setenv("SCRUB_UP_B", "sk-bbbbbbbbbbbb")
    monkeypatch.setenv("SCRUB_JUDGE", "sk-jjjjjjjjjjjj")
    monkeypatch.setenv("SCRUB_GW", "gw-gggggggggggg")
    settings = Settings.model_validate({
        "upstreams": [{"name": "a", "base_url": "http://a/v1", "api_key_env": "SCRUB_UP_A"},
                      {"name": "b", "base_url": "http://b/v1", "api_key_env": "SCRUB_UP_B"},
                      {"name": "c", "base_url": "http://c/v1"}],
        "judge": {"base_url": "http://j/v1", "api_key_env": "SCRUB_JUDGE"},
        "auth": {"keys": [{"name": "k", "tenant": "t", "key_env": "SCRUB_GW"},
                          {"name": "i", "tenant": "t", "key": "gw-inline-key-123"}]}})
    secrets = configured_secrets(settings)
    text = "sk-aaaaaaaaaaaa sk-bbbbbbbbbbbb sk-jjjjjjjjjjjj gw-gggggggggggg gw-inline-key-123"
    assert secrets.scrub_text(text) == " ".join([REDACTED] * 5)
