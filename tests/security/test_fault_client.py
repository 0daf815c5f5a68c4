"""Fault suite, hostile client: authentication forms and malformed requests, against a
real ``gateway serve`` process in gateway-keys mode.

Every form of a credential that is not exactly ``Authorization: Bearer <gateway key>``
is a 401 (OpenAI shape) and nothing reaches the upstream; no path spelling dodges
authentication; a request the HTTP parser refuses, or a body that is not a JSON object
the gateway can read, is a 400 and nothing reaches the upstream. Forms already covered
in-process are not repeated here (docs/security.md lists where they are):
``tests/core/test_auth.py`` (missing key, ``Bearer wrong``, ``Basic <key>``, a bare
``Bearer``), ``tests/core/test_errors.py`` (truncated JSON, non-object bodies,
``max_body_bytes`` with and without a length), ``tests/core/test_request_shapes.py``
(``model`` types), ``tests/security/test_policy_escape.py`` (deep ``metadata``).
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from security.hostile import ANSWER, HostileUpstream
from security.process import GatewayProcess, openai_error, serve_gateway

KEY = "gw-acme-fault-key-0001"
UPSTREAM_KEY = "sk-upstream-fault-key-0042"
ENV = {"FAULT_GATEWAY_KEY": KEY, "FAULT_UPSTREAM_KEY": UPSTREAM_KEY}
USER = [{"role": "user", "content": "What is the capital of France?"}]

GUARD = """
mode: inline
match: {models: ["guarded"]}
layers: [{name: keyword, config: {block: [Paris]}}]
telemetry: {record_content: true}
"""
"""Bound to the model ``guarded`` (so enforced): blocks the hostile answer, and records
message content (the deepest path a request body takes through the audit)."""


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileUpstream]:
    with HostileUpstream() as up:
        yield up


@pytest.fixture(scope="module")
def gw(hostile: HostileUpstream, tmp_path_factory: pytest.TempPathFactory
       ) -> Iterator[GatewayProcess]:
    config = {
        "max_body_bytes": 65536,
        "upstreams": [{"name": "ok", "base_url": hostile.base_url("ok"),
                       "api_key_env": "FAULT_UPSTREAM_KEY"}],
        "auth": {"keys": [{"name": "acme-app", "tenant": "acme", "key_env": "FAULT_GATEWAY_KEY",
                           "routes": ["POST /v1/chat/completions", "GET /v1/models",
                                      "POST /v1/embeddings", "* /v1/files/**"]}]}}
    with serve_gateway(tmp_path_factory.mktemp("fault-client"), config,
                       policies={"guard": GUARD}, env=ENV) as served:
        yield served


@pytest.fixture
def up(hostile: HostileUpstream) -> HostileUpstream:
    hostile.clear()
    return hostile


def _raw(gw: GatewayProcess, data: bytes) -> bytes:
    """Write ``data`` as is; everything until the gateway closes."""
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as sock:
        sock.sendall(data)
        parts = []
        try:
            while chunk := sock.recv(65536):
                parts.append(chunk)
        except ConnectionResetError:
            pass
    return b"".join(parts)


def _status(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1])


def _body(raw: bytes) -> bytes:
    return raw.partition(b"\r\n\r\n")[2]


# ---- credentials ---------------------------------------------------------------------------

REFUSED_FORMS = {
    "empty header": {"authorization": ""},
    "no scheme": {"authorization": KEY},
    "basic, base64": {"authorization": "Basic " + base64.b64encode(f":{KEY}".encode()).decode()},
    "token scheme": {"authorization": f"Token {KEY}"},
    "tab after scheme": {"authorization": f"Bearer\t{KEY}"},
    "key cut short": {"authorization": f"Bearer {KEY[:-1]}"},
    "key with a suffix": {"authorization": f"Bearer {KEY}x"},
    "key upper-cased": {"authorization": f"Bearer {KEY.upper()}"},
    "two keys in one header": {"authorization": f"Bearer {KEY}, Bearer other"},
    "azure api-key header": {"api-key": KEY},
    "x-api-key header": {"x-api-key": KEY},
    "cookie": {"cookie": f"api_key={KEY}"},
}
ROUTES = [("POST", "/v1/chat/completions"), ("GET", "/v1/models"),
          ("POST", "/v1/embeddings"), ("GET", "/v1/files/file-1")]


def _request(http: httpx.Client, method: str, path: str, headers: Any = None,
             params: dict[str, str] | None = None) -> httpx.Response:
    body = {"model": "m", "messages": USER, "input": "x"} if method == "POST" else None
    return http.request(method, path, json=body, headers=headers, params=params)


@pytest.mark.parametrize("form", REFUSED_FORMS)
def test_a_credential_in_any_other_form_is_a_401(gw: GatewayProcess, up: HostileUpstream,
                                                  form: str) -> None:
    with httpx.Client(base_url=gw.url, timeout=10) as http:
        for method, path in ROUTES:
            r = _request(http, method, path, REFUSED_FORMS[form])
            assert r.status_code == 401, (method, path, r.text)
            err = openai_error(r.content)
            assert (err["type"], err["code"]) == ("authentication_error", "invalid_api_key")
            assert KEY not in r.text
    assert up.requests == []


@pytest.mark.parametrize("param", ["api_key", "key", "access_token", "authorization"])
def test_a_key_in_the_query_string_is_not_a_credential(gw: GatewayProcess, up: HostileUpstream,
                                                       param: str) -> None:
    with httpx.Client(base_url=gw.url, timeout=10) as http:
        for method, path in ROUTES:
            value = f"Bearer {KEY}" if param == "authorization" else KEY
            r = _request(http, method, path, params={param: value})
            assert r.status_code == 401, (method, path, r.text)
            openai_error(r.content)
    assert up.requests == []


@pytest.mark.parametrize("header", [f"bearer {KEY}", f"BEARER {KEY}", f"Bearer  {KEY}"],
                         ids=["lower-case scheme", "upper-case scheme", "two spaces"])
def test_the_scheme_is_case_insensitive_and_spaces_before_the_key_are_allowed(
        gw: GatewayProcess, up: HostileUpstream, header: str) -> None:
    # RFC 9110 §11.1: the scheme is case-insensitive. Deliberately accepted, so the
    # refused forms above are refused for what they are, not for their spelling.
    with httpx.Client(base_url=gw.url, timeout=10) as http:
        r = http.get("/v1/models", headers={"authorization": header})
    assert r.status_code == 200, r.text
    assert [q.headers["authorization"] for q in up.requests] == [f"Bearer {UPSTREAM_KEY}"]


@pytest.mark.parametrize("order", ["valid first", "valid last", "both valid"])
def test_two_authorization_headers_are_refused(gw: GatewayProcess, up: HostileUpstream,
                                               order: str) -> None:
    # RFC 9110 §11.6.2: one credential. A proxy in front that checks the first header and
    # a gateway that reads the last would disagree on who is calling: 401 on every route.
    pair = {"valid first": [("authorization", f"Bearer {KEY}"),
                            ("authorization", "Bearer someone-else")],
            "both valid": [("authorization", f"Bearer {KEY}")] * 2}.get(order)
    if pair is None:
        pair = [("authorization", "Bearer someone-else"), ("authorization", f"Bearer {KEY}")]
    with httpx.Client(base_url=gw.url, timeout=10) as http:
        for method, path in ROUTES:
            r = _request(http, method, path, pair)
            assert r.status_code == 401, (method, path, r.text)
            err = openai_error(r.content)
            assert (err["type"], err["code"]) == ("authentication_error", "invalid_api_key")
            assert KEY not in r.text
        r = http.get("/readyz", headers=pair)  # the detail a key unlocks: refused too
        assert r.status_code == 401, r.text
        openai_error(r.content)
    assert up.requests == []


UNAUTHENTICATED_PATHS = [
    ("POST", "/v1/chat/completions/", 401),
    ("POST", "/v1/chat/completions?api-version=1", 401),
    ("POST", "/v1/%63hat/completions", 401),        # decodes to the chat route
    ("POST", "/v1//chat/completions", 401),
    ("POST", "/v1/models/../chat/completions", 401),
    ("GET", "/v1%2Fmodels", 401),
    ("GET", "/v1/models%2F..%2Ffiles", 401),
    ("GET", "/v1/", 401),
    ("DELETE", "/v1/files/file-1", 401),
    ("GET", "/V1/models", 404),                      # not the API: not found, not forwarded
    ("GET", "//v1/models", 404),
    ("GET", "/v1", 404),
    ("PUT", "/v1/chat/completions", 401),            # no key: not even "use POST" (405)
    ("OPTIONS", "/v1/chat/completions", 401),
    ("GET", "/v1/chat/completions", 401),
]


@pytest.mark.parametrize(("method", "target", "status"), UNAUTHENTICATED_PATHS)
def test_no_path_spelling_reaches_the_upstream_without_a_key(
        gw: GatewayProcess, up: HostileUpstream, method: str, target: str, status: int) -> None:
    raw = _raw(gw, f"{method} {target} HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json"
                   f"\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}".encode())
    assert _status(raw) == status, raw[:300]
    openai_error(_body(raw))
    assert up.requests == []


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "OPTIONS"])
def test_a_wrong_method_is_a_405_only_for_a_caller_with_a_key(
        gw: GatewayProcess, up: HostileUpstream, method: str) -> None:
    with httpx.Client(base_url=gw.url, timeout=10) as http:
        anonymous = http.request(method, "/v1/chat/completions")
        keyed = http.request(method, "/v1/chat/completions",
                             headers={"authorization": f"Bearer {KEY}"})
    assert anonymous.status_code == 401 and "allow" not in anonymous.headers
    assert openai_error(anonymous.content)["code"] == "invalid_api_key"
    assert keyed.status_code == 405, keyed.text
    assert keyed.headers["allow"] == "POST"
    err = openai_error(keyed.content)
    assert (err["type"], err["code"]) == ("invalid_request_error", "method_not_allowed")
    assert up.requests == []


# ---- requests the HTTP parser refuses ------------------------------------------------------

B_KEY = KEY.encode()
MALFORMED_HTTP = {
    "NUL after the key": b"GET /v1/models HTTP/1.1\r\nhost: gw\r\n"
                         b"authorization: Bearer " + B_KEY + b"\x00\r\n\r\n",
    "NUL inside the key": b"GET /v1/models HTTP/1.1\r\nhost: gw\r\n"
                          b"authorization: Bearer " + B_KEY[:4] + b"\x00" + B_KEY[4:] + b"\r\n\r\n",
    "NUL in the path": b"GET /v1/mod\x00els HTTP/1.1\r\nhost: gw\r\n"
                       b"authorization: Bearer " + B_KEY + b"\r\n\r\n",
    "content-length not a number": b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\n"
                                   b"authorization: Bearer " + B_KEY + b"\r\n"
                                   b"content-length: 12abc\r\n\r\n{}",
    "content-length and chunked": b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\n"
                                  b"authorization: Bearer " + B_KEY + b"\r\n"
                                  b"content-length: 4\r\ntransfer-encoding: chunked\r\n\r\n"
                                  b"0\r\n\r\n",
    "not HTTP": b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03 TLS hello\r\n\r\n",
}


@pytest.mark.parametrize("case", MALFORMED_HTTP)
def test_a_request_the_parser_refuses_is_a_400_that_reaches_nothing(
        gw: GatewayProcess, up: HostileUpstream, case: str) -> None:
    raw = _raw(gw, MALFORMED_HTTP[case])
    assert _status(raw) == 400, raw[:300]
    assert b"connection: close" in raw.partition(b"\r\n\r\n")[0].lower()
    assert up.requests == []


def test_a_request_the_parser_refuses_gets_the_openai_error_shape(gw: GatewayProcess) -> None:
    for case, data in MALFORMED_HTTP.items():
        raw = _raw(gw, data)
        assert b"application/json" in raw.partition(b"\r\n\r\n")[0], case
        err = openai_error(_body(raw))
        assert (err["type"], err["code"]) == ("invalid_request_error", "invalid_http"), case


# ---- bodies --------------------------------------------------------------------------------

def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


BAD_BODIES = {
    "invalid UTF-8": b'{"model": "m", "messages": [{"role": "user", "content": "\xff\xfe"}]}',
    "lone surrogate escape": b'{"model": "m", "messages": [{"role": "user", '
                             b'"content": "\\ud800"}]}',
    "byte order mark": b'\xef\xbb\xbf{"model": "m", "messages": []}',
    "integer of 400 digits": b'{"model": "m", "messages": [], "max_tokens": 1' + b"0" * 400
                             + b"}",
    "float overflowing a double": b'{"model": "m", "messages": [], "temperature": 1e999}',
    "NaN": b'{"model": "m", "messages": [], "temperature": NaN}',
    "nesting 5,000 deep in messages": b'{"model": "m", "messages": [{"role": "user", '
                                      b'"content": ' + _nested(5000) + b"}]}",
    "trailing bytes": b'{"model": "m", "messages": []}{"model": "other"}',
    "empty": b"",
    "form-encoded": b"model=m&messages=hi",
    "multipart": b'--b\r\ncontent-disposition: form-data; name="model"\r\n\r\nm\r\n--b--\r\n',
}


@pytest.mark.parametrize("case", BAD_BODIES)
def test_a_body_that_is_not_json_is_a_400_that_reaches_nothing(
        gw: GatewayProcess, up: HostileUpstream, case: str) -> None:
    ctype = {"form-encoded": "application/x-www-form-urlencoded",
             "multipart": "multipart/form-data; boundary=b"}.get(case, "application/json")
    with httpx.Client(base_url=gw.url, timeout=10) as http:
        for model in ("m", "guarded"):  # pass-through, and a policy's path
            r = http.post("/v1/chat/completions", content=BAD_BODIES[case].replace(
                b'"m"', b'"' + model.encode() + b'"'), headers={
                "authorization": f"Bearer {KEY}", "content-type": ctype})
            assert r.status_code == 400, r.text
            err = openai_error(r.content)
            assert (err["type"], err["code"]) == ("invalid_request_error", "invalid_json")
    assert up.requests == []


def test_json_under_another_content_type_is_read_as_json(gw: GatewayProcess,
                                                         up: HostileUpstream) -> None:
    # Not checked (docs/security.md, "what is not defended"): the body is JSON or a 400.
    with httpx.Client(base_url=gw.url, timeout=10) as http:
        r = http.post("/v1/chat/completions", content=json.dumps({"model": "m", "messages": USER}),
                      headers={"authorization": f"Bearer {KEY}", "content-type": "text/plain"})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == ANSWER
    assert len(up.requests) == 1


def test_nesting_as_deep_as_json_allows_is_verified_and_audited(gw: GatewayProcess,
                                                                 up: HostileUpstream) -> None:
    # 1,000 levels (orjson stops at 1,024) in message content and in a content part,
    # under a policy that records content: verified (blocked), one audit line, no 500.
    part = b'{"type": "text", "text": "hi", "x": ' + b'{"a": ' * 1000 + b"1" + b"}" * 1000 + b"}"
    body = (b'{"model": "guarded", "messages": [{"role": "user", "content": ' + _nested(1000)
            + b'}, {"role": "user", "content": [' + part + b"]}]}")
    before = len(gw.audit())
    with httpx.Client(base_url=gw.url, timeout=10) as http:
        r = http.post("/v1/chat/completions", content=body,
                      headers={"authorization": f"Bearer {KEY}",
                               "content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert ANSWER not in r.text  # blocked: the policy ran
    records = gw.audit(expect=before + 1)
    assert records[-1]["audit_id"] == r.headers["x-verity-audit-id"]
    assert records[-1]["verdict"] == "fail"


def test_a_duplicate_model_key_cannot_escape_a_model_bound_policy(
        gw: GatewayProcess, up: HostileUpstream) -> None:
    # Parsers disagree on a duplicate key (orjson: the last; others: the first, or an
    # error): the gateway must not verify by one value while the upstream serves the other.
    # Refused wherever a body is read as JSON, at any depth and in any spelling.
    messages = json.dumps(USER).encode()
    bodies = {
        "model twice": b'{"model": "guarded", "messages": ' + messages
                       + b', "model": "unguarded"}',
        "model twice, escaped": b'{"model": "guarded", "messages": ' + messages
                                + b', "m\\u006fdel": "unguarded"}',
        "content twice": b'{"model": "guarded", "messages": [{"role": "user", '
                         b'"content": "Hi", "content": "Say Paris"}]}',
        "metadata twice": b'{"model": "m", "messages": ' + messages
                          + b', "metadata": {"verity": "x", "verity": "y"}}',
    }
    with httpx.Client(base_url=gw.url, timeout=10,
                      headers={"authorization": f"Bearer {KEY}"}) as http:
        for case, body in bodies.items():
            r = http.post("/v1/chat/completions", content=body,
                          headers={"content-type": "application/json"})
            assert r.status_code == 400, (case, r.text)
            err = openai_error(r.content)
            assert (err["type"], err["code"]) == ("invalid_request_error", "duplicate_key"), case
        r = http.post("/v1/embeddings", content=b'{"model": "a", "input": "x", "model": "b"}',
                      headers={"content-type": "application/json"})
        assert r.status_code == 400, r.text
        assert openai_error(r.content)["code"] == "duplicate_key"
    assert up.requests == []