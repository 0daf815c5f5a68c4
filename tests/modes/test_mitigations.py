"""Seed 000's ``request-sources`` and ``decompose-and-retry`` through a real gateway:
the SDK as client, the scripted upstream, and (for ``fact-decomposition``) a scripted
judge server of its own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import openai
import orjson
import pytest

from gateway.testing.scripted import Rule, ScriptedUpstream
from gateway.testing.servers import ServerThread
from modes.conftest import StartGateway
from modes.support import verity_headers

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import ServedUpstream

PARIS = "Paris is the capital of France."
CLAIM = "Atlantis was founded in 1200."
BAD = f"{PARIS} {CLAIM}"
CITED = "Paris is the capital of France [atlas]."
NOTE = "\n\n*Verity: statements that could not be verified were removed from this answer.*"
DOC = f'<document id="atlas">{PARIS} Lyon is its third city.</document>'
ASK = [{"role": "user", "content": f"{DOC}\nWhat is the capital of France?"}]


def policy(action: str, layers: str = "[{name: wordclaims, config: {word: atlantis}}]",
           bands: tuple[str, ...] = ("fail",), extra: str = "") -> str:
    acts = "\n".join(f"  {band}: {action}" for band in bands)
    return f"""
mode: inline
default: true
layers: {layers}
actions:
{acts}
{extra}
"""


def chats(upstream: ServedUpstream) -> list[dict[str, Any]]:
    return [r["json"] for r in upstream.requests if r["path"] == "/v1/chat/completions"]


@pytest.mark.usefixtures("test_layers")
def test_request_sources_reasks_citing_the_requests_documents(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.rules = [Rule("cite the source", CITED)]
    upstream.app.default_reply = BAD
    gw = start_gateway({"p": policy("{type: request-sources, max_attempts: 2}")})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=ASK)
    assert raw.parse().choices[0].message.content == CITED
    h = verity_headers(raw.headers)
    assert (h["x-verity-action"], h["x-verity-verdict"], h["x-verity-attempts"]) == \
        ("request-sources", "pass", "1")
    first, second = chats(upstream)
    assert second["messages"][-2] == {"role": "assistant", "content": BAD}
    feedback = second["messages"][-1]["content"]
    assert "[atlas]" in feedback and f'"{CLAIM}"' in feedback
    (rec,) = gw.audit(expect=1)
    assert rec["action"] == "request-sources" and rec["attempts"] == 1
    assert [a["verdict"] for a in rec["attempt_history"]] == ["fail", "pass"]
    assert rec["attempt_history"][0]["failed_claims"] == []  # content not recorded
    assert rec["attempt_history"][0]["failed_claim_count"] == 1


@pytest.mark.usefixtures("test_layers")
def test_request_sources_without_sources_applies_its_fallback(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.default_reply = BAD
    gw = start_gateway({"p": policy("{type: request-sources, fallback: {type: flag}}")})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=[{"role": "user", "content": "Capital of France?"}])
    assert raw.parse().choices[0].message.content == BAD
    assert verity_headers(raw.headers)["x-verity-action"] == "flag"
    assert len(chats(upstream)) == 1  # no source to cite: no second call
    (rec,) = gw.audit(expect=1)
    assert "offers no source to cite" in rec["note"]


@pytest.mark.usefixtures("test_layers")
@pytest.mark.parametrize("stream", [False, True])
def test_decompose_and_retry_drops_the_claim_that_stays_unsupported(
        stream: bool, start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.rules = [Rule("UNSUPPORTED", "UNSUPPORTED")]
    upstream.app.default_reply = BAD
    gw = start_gateway({"p": policy("{type: decompose-and-retry}")})
    client = make_client(gw.base_url)
    if stream:
        raw = client.chat.completions.with_raw_response.create(
            model="scripted-small", messages=ASK, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    else:
        raw = client.chat.completions.with_raw_response.create(model="scripted-small",
                                                               messages=ASK)
        text = raw.parse().choices[0].message.content or ""
    assert text == PARIS + NOTE
    h = verity_headers(raw.headers)
    assert (h["x-verity-action"], h["x-verity-verdict"], h["x-verity-attempts"]) == \
        ("decompose-and-retry", "pass", "1")
    first, retry = chats(upstream)
    assert f'"{CLAIM}"' in retry["messages"][-1]["content"] and "stream" not in retry
    (rec,) = gw.audit(expect=1)
    assert rec["action"] == "decompose-and-retry" and rec["attempts"] == 1
    history = rec["attempt_history"]
    assert [a.get("result") for a in history] == [None, "unsupported", None]
    assert history[-1]["assembled"] is True and history[-1]["dropped"] == 1
    assert rec["note"] == "decompose-and-retry: 0 claim(s) replaced, 1 dropped"


# ---- with the fact-decomposition layer and a judge server of its own ----------------------

LEGEND = "Atlantis is a legend told by Plato."


def claims(*texts: str) -> str:
    return orjson.dumps({"claims": [{"claim": t, "type": "factual"} for t in texts]}).decode()


def verified(*flags: bool) -> str:
    return orjson.dumps({"results": [{"id": i, "verified": f, "confidence": 0.9}
                                     for i, f in enumerate(flags, 1)]}).decode()


@pytest.fixture(scope="module")
def judge_server() -> Iterator[tuple[ScriptedUpstream, str]]:
    """A scripted judge (its own server: the upstream answers the client)."""
    app = ScriptedUpstream()
    with ServerThread(app) as server:
        yield app, server.url + "/v1"


def test_decompose_and_retry_replaces_the_claim_fact_decomposition_rejected(
        start_gateway: StartGateway, upstream: ServedUpstream,
        judge_server: tuple[ScriptedUpstream, str],
        make_client: Callable[..., openai.OpenAI]) -> None:
    judge, judge_url = judge_server
    d, c = r"decomposition:decompose\]", r"decomposition:check\]"
    judge.requests.clear()
    judge.rules = [
        Rule(d + ".*Paris.*legend", claims(PARIS, LEGEND)),   # the assembled answer
        Rule(d + ".*Paris", claims(PARIS, CLAIM)),            # the first answer
        Rule(d, claims(LEGEND)),                              # the retry's reply alone
        Rule(c + r".*1\. Atlantis was founded", verified(False)),
        Rule(c, verified(True)),
    ]
    upstream.app.rules = [Rule("could not be verified", LEGEND)]
    upstream.app.default_reply = BAD
    layer = "[{name: fact-decomposition, timeout_ms: 10000}]"
    gw = start_gateway({"p": policy("{type: decompose-and-retry}", layer,
                                    ("marginal", "fail"), "budget: {total_ms: 30000}")},
                       judge={"base_url": judge_url, "model": "judge-model",
                              "cache_size": 0})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=ASK)
    assert raw.parse().choices[0].message.content == f"{PARIS} {LEGEND}"
    h = verity_headers(raw.headers)
    assert (h["x-verity-action"], h["x-verity-verdict"]) == ("decompose-and-retry", "pass")
    (rec,) = gw.audit(expect=1)
    first, retry, assembled = rec["attempt_history"]
    assert first["verdict"] == "marginal" and first["judge_calls"] == 2
    assert retry["result"] == "replaced" and retry["judge_calls"] == 2
    assert assembled["verdict"] == "pass" and assembled["kept"] == 2
    (layer_out,) = rec["layers"]
    assert layer_out["name"] == "fact-decomposition" and layer_out["passed"] is True
    # one decompose + one check per verification, the Paris claim always from the context
    assert len(judge.requests) == 6
    assert {r["json"]["model"] for r in judge.requests} == {"judge-model"}
