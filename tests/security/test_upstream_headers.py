"""An upstream cannot forge the gateway's headers or set state on its clients
(issue 10, item 6).

The hostile upstream answers every request with forged ``x-verity-*`` headers (in
shadow mode a client would read ``x-verity-verdict: pass`` as the gateway's
verdict), cookies and other headers about its own origin or connection. On every
path — pass-through chat (JSON and SSE), shadow, inline (JSON, buffered and
pass-through streams), forwarded ``/v1/*``, the model list, upstream errors — the
client must see only the gateway's own ``x-verity-*`` headers, no cookie, no
hop-by-hop header, while the headers SDKs rely on (``x-request-id``,
``x-ratelimit-*``, ``retry-after``, ``openai-*``) are still relayed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import openai
import pytest
from security.hostile import HostileUpstream
from serving import GatewayFactory, ServedGateway

FORGED = [
    (b"x-verity-verdict", b"pass"),
    (b"X-Verity-Policy", b"forged-none"),
    (b"x-verity-mode", b"forged-off"),
    (b"x-verity-audit-id", b"forged-audit"),
    (b"X-VERITY-SCORE", b"1.00"),
    (b"x-verity-action", b"forged-pass"),
    (b"x-verity-made-up", b"forged"),
    (b"set-cookie", b"sid=stolen; Path=/; HttpOnly"),
    (b"Set-Cookie", b"tracker=1"),
    (b"set-cookie2", b"legacy=1"),
    (b"alt-svc", b'h3=":443"; ma=86400'),
    (b"strict-transport-security", b"max-age=63072000; includeSubDomains; preload"),
    (b"keep-alive", b"timeout=5"),
    (b"proxy-authenticate", b"Basic realm=upstream"),
    (b"connection", b"x-hop-secret"),
    (b"x-hop-secret", b"only-for-the-next-hop"),
    # relayed: what SDKs and clients rely on
    (b"x-request-id", b"req-hostile-1"),
    (b"x-ratelimit-remaining-requests", b"9"),
    (b"openai-processing-ms", b"5"),
    (b"retry-after", b"2"),
]
DROPPED = {"set-cookie", "set-cookie2", "alt-svc", "strict-transport-security", "keep-alive",
           "proxy-authenticate", "x-hop-secret"}
RELAYED = {"x-request-id": "req-hostile-1", "x-ratelimit-remaining-requests": "9",
           "openai-processing-ms": "5", "retry-after": "2"}
GATEWAY_INLINE = {"x-verity-policy", "x-verity-mode", "x-verity-audit-id", "x-verity-verdict",
                  "x-verity-score", "x-verity-action", "x-verity-layers"}
GATEWAY_SHADOW = {"x-verity-policy", "x-verity-mode", "x-verity-audit-id"}
USER = [{"role": "user", "content": "capital of France?"}]
Client = Callable[..., openai.OpenAI]
ONE_ATTEMPT = {"retries": {"max_attempts": 1}}

POLICIES = {
    "watch": """
mode: shadow
match: {models: ["shadow-*"]}
layers: [{name: keyword, config: {block: [Paris]}}]
""",
    "guard": """
mode: inline
match: {models: ["inline-*"]}
layers: [{name: keyword, config: {block: [Paris]}}]
actions: {fail: {type: flag}}
""",
    "guard-live": """
mode: inline
streaming: passthrough
match: {models: ["live-*"]}
layers: [{name: keyword, config: {block: [Paris]}}]
actions: {fail: {type: flag}}
""",
}


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileUpstream]:
    with HostileUpstream(forged=FORGED) as up:
        yield up


@pytest.fixture(scope="module")
def gw(make_gateway: GatewayFactory, hostile: HostileUpstream,
       tmp_path_factory: pytest.TempPathFactory) -> ServedGateway:
    policies: Path = tmp_path_factory.mktemp("header-policies")
    for name, text in POLICIES.items():
        (policies / f"{name}.yaml").write_text(text, encoding="utf-8")
    # Models ending in -429 go to an upstream that answers 429. The first upstream also
    # gets what names no model (forwarded GET / DELETE).
    # One attempt: these tests read what is relayed, not the retries (a 429 with its
    # retry-after 2 would otherwise be waited for twice per test).
    return make_gateway(policies_dir=str(policies), reload_policies=False, routing=ONE_ATTEMPT,
                        upstreams=[
        {"name": "hostile", "base_url": hostile.base_url("ok"),
         "models": ["plain", "shadow-m", "inline-m", "live-m", "e", "hostile-model"]},
        {"name": "limited", "base_url": hostile.base_url("status-429"), "models": ["*-429"]}])


def check(headers: httpx.Headers, gateway_own: set[str], policy: str | None = None,
          relayed: bool = True) -> None:
    names = {k.lower() for k in headers}
    verity = {n for n in names if n.startswith("x-verity-")}
    assert verity == gateway_own, f"x-verity-* headers: {sorted(verity)}"
    for name in verity:
        values = headers.get_list(name)
        assert len(values) == 1, f"{name}: {values}"
        assert "forged" not in values[0], f"{name}: {values}"
    if policy is not None:
        assert headers["x-verity-policy"] == policy
    if "x-verity-verdict" in verity:
        assert headers["x-verity-verdict"] == "fail"  # the gateway's, not the upstream's
    assert names.isdisjoint(DROPPED), sorted(names & DROPPED)
    if relayed:
        for name, value in RELAYED.items():
            assert headers.get_list(name) == [value], name


@pytest.mark.parametrize("model", ["plain", "shadow-m", "inline-m"])
def test_chat_json(gw: ServedGateway, make_client: Client, model: str) -> None:
    raw = make_client(gw).chat.completions.with_raw_response.create(model=model, messages=USER)
    assert raw.status_code == 200 and raw.parse().choices[0].message.content
    own = {"plain": set(), "shadow-m": GATEWAY_SHADOW, "inline-m": GATEWAY_INLINE}[model]
    check(raw.headers, own, {"plain": None, "shadow-m": "watch", "inline-m": "guard"}[model])


@pytest.mark.parametrize("model", ["plain", "shadow-m", "inline-m", "live-m"])
def test_chat_stream(gw: ServedGateway, make_client: Client, model: str) -> None:
    with make_client(gw).chat.completions.with_streaming_response.create(
            model=model, messages=USER, stream=True) as resp:
        text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
        headers = resp.headers
    assert "Paris" in text
    own = {"plain": set(), "shadow-m": GATEWAY_SHADOW, "inline-m": GATEWAY_INLINE,
           "live-m": {"x-verity-policy", "x-verity-mode", "x-verity-audit-id"}}[model]
    check(headers, own)


def test_forwarded_routes(gw: ServedGateway, make_client: Client) -> None:
    c = make_client(gw)
    check(c.embeddings.with_raw_response.create(model="e", input="x").headers, set())
    with httpx.Client(base_url=gw.base_url) as http:
        for r in (http.get("/files/file-1"), http.delete("/files/file-1"),
                  http.post("/completions", json={"model": "shadow-m", "prompt": "x"})):
            assert r.status_code == 200
            check(r.headers, set())


def test_model_list(gw: ServedGateway, make_client: Client) -> None:
    raw = make_client(gw).models.with_raw_response.list()
    assert [m.id for m in raw.parse()] == ["hostile-model"]
    check(raw.headers, set(), relayed=False)  # a merged list: no upstream's headers


@pytest.mark.parametrize(("model", "own"), [
    ("plain", set()),
    ("shadow-m", {"x-verity-policy", "x-verity-mode"}),
    ("inline-m", {"x-verity-policy", "x-verity-mode"}),
])
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_errors(gw: ServedGateway, make_client: Client, model: str, own: set[str],
                         stream: bool) -> None:
    with pytest.raises(openai.RateLimitError) as info:
        make_client(gw).chat.completions.create(model=f"{model}-429", messages=USER,
                                                stream=stream)
    check(info.value.response.headers, own)


def test_forwarded_error(make_gateway: GatewayFactory, hostile: HostileUpstream) -> None:
    gw = make_gateway(routing=ONE_ATTEMPT,
                      upstreams=[{"name": "down", "base_url": hostile.base_url("status-503")}])
    with httpx.Client(base_url=gw.base_url) as http:
        r = http.get("/files/file-1")
    assert r.status_code == 503
    check(r.headers, set())
