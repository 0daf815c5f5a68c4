"""A client that disconnects still gets its request audited, in every mode; after a
regenerate the record names the response id the client got.

Real gateway (uvicorn) + scripted upstream + the official openai SDK. The client goes
away by closing its stream or cancelling its call; the tests wait (bounded) for the
events — upstream cancelled, record written — and never time anything.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
import httpx
import openai
import pytest

from modes.conftest import PolicyGateway, StartGateway
from modes import support
from modes.support import verity_headers
from gateway.testing.scripted import Rule
from gateway.layers.registry import LayerRegistry
from gateway.layers.base import LayerConfig, LayerResources, LayerResult, VerifyInput

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import ServedUpstream

USER = [{"role": "user", "content": "one two three four five"}]
GONE = "not verified: client disconnected"
SLOW_CHUNKS = {"x-mock-chunk-delay-ms": "300"}
SLOW_ANSWER = {"x-mock-delay-ms": "30000"}


def _policy(mode: str, streaming: str = "buffer") -> str:
    return f"""
mode: {mode}
default: true
streaming: {streaming}
layers: [{{name: keyword, config: {{block: [forbidden]}}}}]
actions: {{fail: {{type: block}}}}
"""


# ---- a layer that holds the verification until the test releases it ------------------------

ENTERED = threading.Event()
RELEASE = threading.Event()


class HoldConfig(LayerConfig):
    word: str


class HoldLayer:
    """Passes, but first waits for :data:`RELEASE` on an answer containing ``word``."""

    name: ClassVar[str] = "hold"
    Config: ClassVar[type[LayerConfig]] = HoldConfig

    def __init__(self, config: HoldConfig, resources: LayerResources | None = None) -> None:
        self.config = config

    async def verify(self, inp: VerifyInput) -> LayerResult:
        if self.config.word.lower() in inp.response_text.lower():
            ENTERED.set()
            while not RELEASE.is_set():
                await asyncio.sleep(0.005)
        return LayerResult(score=1.0, passed=True, label="ok")


HOLD_LAYERS: LayerRegistry = support.REGISTRY.with_layers({"hold": f"{__name__}:HoldLayer"})


@pytest.fixture
def hold_layer() -> Iterator[None]:
    ENTERED.clear()
    RELEASE.clear()
    yield
    RELEASE.set()


# ---- helpers -----------------------------------------------------------------------------


def _gone_record(gw: PolicyGateway) -> dict[str, Any]:
    """The one record there is (bounded wait for it), which must be a disconnect's."""
    records = gw.audit(expect=1)
    assert len(records) == 1, records
    rec = records[0]
    assert str(rec["note"]).startswith(GONE), rec["note"]
    assert rec["verdict"] is None and rec["score"] is None and rec["layers"] == []
    assert rec["finished_at"] is not None
    return rec


async def _until(predicate: Callable[[], Any], message: str) -> None:
    with anyio.fail_after(10):
        while not predicate():
            await anyio.sleep(0.02)


def _read_until_text(stream: Any) -> tuple[str, str]:
    """Read a stream up to its first chunk with text: (that chunk's id, the text so far)."""
    text = ""
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
            return chunk.id, text
    raise AssertionError("the stream ended before any text")


# ---- mid-stream: passthrough and shadow --------------------------------------------------


@pytest.mark.parametrize("mode", ["inline", "shadow"])
def test_closing_a_stream_midway_is_audited(start_gateway: StartGateway,
                                            upstream: ServedUpstream,
                                            make_client: Callable[..., openai.OpenAI],
                                            wait_until: Callable[..., Any], mode: str) -> None:
    gw = start_gateway({"p": _policy(mode, "passthrough")})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=USER, stream=True, extra_headers=SLOW_CHUNKS)
    headers = verity_headers(raw.headers)
    stream = raw.parse()
    response_id, text = _read_until_text(stream)
    stream.close()
    wait_until(lambda: upstream.cancelled >= 1, message="upstream cancellation")

    rec = _gone_record(gw)
    assert rec["audit_id"] == headers["x-verity-audit-id"]  # the id the client was given
    assert (rec["policy"], rec["mode"], rec["stream"], rec["upstream_status"]) == \
        ("p", mode, True, 200)
    if mode == "inline":  # unverified text was shown: how much, and which response
        m = re.fullmatch(GONE + r" after (\d+) characters of the answer were sent", rec["note"])
        assert m is not None, rec["note"]
        assert len(text) <= int(m[1]) < len("You said: one two three four five")
        assert rec["response_id"] == response_id
        assert rec["streaming"] == "passthrough" and rec["applied"] is False
    else:
        m = re.fullmatch(GONE + r" after (\d+) characters of the answer were relayed",
                         rec["note"])
        assert m is not None, rec["note"]
        assert len(text) <= int(m[1]) < len("You said: one two three four five")
        assert rec["response_id"] == response_id


def test_a_shadow_stream_closed_after_its_last_event_is_still_verified(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    # The client has the whole answer and closes at once, while the upstream has not
    # yet ended its body: the answer is complete, so shadow verifies it (the record is
    # the verification's, not a disconnect's).
    gw = start_gateway({"p": _policy("shadow")})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=USER, stream=True,
        extra_headers={"x-mock-end-delay-ms": "5000"})
    audit_id = verity_headers(raw.headers)["x-verity-audit-id"]
    stream = raw.parse()
    text, finish = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        if finish is not None:
            break
    stream.close()
    assert finish == "stop" and text == "You said: one two three four five"

    records = gw.audit(expect=1)
    assert len(records) == 1, records
    rec = records[0]
    assert rec["audit_id"] == audit_id
    assert rec["verdict"] == "pass" and rec["layers"] != [], rec
    assert not str(rec["note"] or "").startswith(GONE), rec["note"]


# ---- before the response: the upstream is still answering ------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "stream"), [("inline", True), ("inline", False),
                                              ("shadow", False), ("shadow", True)])
async def test_cancelling_a_pending_call_is_audited(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_async_client: Callable[..., openai.AsyncOpenAI], mode: str, stream: bool) -> None:
    gw = start_gateway({"p": _policy(mode, "buffer")})
    client = make_async_client(gw.base_url)
    call = asyncio.ensure_future(client.chat.completions.create(
        model="scripted-small", messages=USER, stream=stream, extra_headers=SLOW_ANSWER))
    await _until(lambda: upstream.requests, "the upstream receiving the request")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await _until(lambda: upstream.cancelled >= 1, "upstream cancellation")

    rec = await asyncio.to_thread(_gone_record, gw)
    assert rec["note"] == f"{GONE} before the response was sent"
    assert (rec["policy"], rec["mode"], rec["stream"]) == ("p", mode, stream)
    assert rec["upstream_status"] is None and rec["response_id"] is None
    assert re.fullmatch(r"[0-9a-f-]{8,}", rec["audit_id"])


# ---- regenerate ------------------------------------------------------------------------

CLAIM = "Atlantis was founded in 1200."
BAD = f"Paris is the capital of France. {CLAIM}"
GOOD = "Paris is the capital of France."
ASK = [{"role": "user", "content": "What is the capital of France?"}]
REGEN = """
mode: inline
default: true
streaming: buffer
layers: [{name: wordclaims, config: {word: atlantis}}]
actions: {fail: {type: regenerate, max_attempts: 2}}
"""


@pytest.mark.usefixtures("test_layers")
@pytest.mark.parametrize("stream", [False, True])
def test_regenerate_records_the_delivered_response_id(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI], stream: bool) -> None:
    upstream.app.rules = [Rule("could not be verified", GOOD), Rule("capital", BAD)]
    gw = start_gateway({"regen": REGEN})
    client = make_client(gw.base_url)
    if stream:
        raw = client.chat.completions.with_raw_response.create(
            model="scripted-small", messages=ASK, stream=True)
        chunks = list(raw.parse())
        ids = {c.id for c in chunks}
        assert len(ids) == 1
        (delivered,) = ids
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        raw = client.chat.completions.with_raw_response.create(model="scripted-small",
                                                              messages=ASK)
        r = raw.parse()
        delivered, text = r.id, r.choices[0].message.content
    assert text == GOOD
    assert verity_headers(raw.headers)["x-verity-action"] == "regenerate"

    (rec,) = gw.audit(expect=1)
    assert rec["action"] == "regenerate" and rec["attempts"] == 1
    assert rec["response_id"] == delivered  # the client's id joins its record
    first, second = rec["attempt_history"]
    assert (first["verdict"], second["verdict"]) == ("fail", "pass")
    assert second["response_id"] == delivered
    assert first["response_id"].startswith("chatcmpl-") and first["response_id"] != delivered


REGEN_HELD = """
mode: inline
default: true
layers:
  - {name: hold, config: {word: atlantis}, timeout_ms: 60000, weight: 0}
  - {name: wordclaims, config: {word: atlantis}}
budget: {total_ms: 60000}
actions: {fail: {type: regenerate, max_attempts: 2}}
"""


@pytest.mark.anyio
@pytest.mark.usefixtures("test_layers", "hold_layer")
async def test_cancelling_during_a_regenerate_call_is_audited(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_async_client: Callable[..., openai.AsyncOpenAI]) -> None:
    upstream.app.rules = [Rule("could not be verified", GOOD), Rule("capital", BAD)]
    gw = start_gateway({"regen": REGEN_HELD}, layers=HOLD_LAYERS)
    client = make_async_client(gw.base_url)
    call = asyncio.ensure_future(client.chat.completions.create(model="scripted-small",
                                                                messages=ASK))
    await _until(ENTERED.is_set, "the first answer's verification")
    upstream.app.latency_ms = 30000  # the regenerate call is the one left pending
    RELEASE.set()
    await _until(lambda: len(upstream.requests) >= 2, "the regenerate call")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await _until(lambda: upstream.cancelled >= 1, "upstream cancellation")

    rec = await asyncio.to_thread(_gone_record, gw)
    assert rec["note"] == (f"{GONE} before the response was sent, while verifying the "
                           "answer (regenerate attempt 1)")
    assert (rec["policy"], rec["mode"], rec["upstream_status"], rec["attempts"]) == \
        ("regen", "inline", 200, 1)
    first = upstream.requests[0]
    assert first["json"]["messages"] == ASK
    assert str(rec["response_id"]).startswith("chatcmpl-")  # the answer being regenerated


def test_closing_a_stream_whose_job_was_shed_on_arrival_is_audited(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI], wait_until: Callable[..., Any]) -> None:
    # A saturated relay with no hand-off budget sheds the job as the request arrives
    # (gateway.modes.shadow.relay_shed: a ShedRecord, no Outcome); the client leaving
    # mid-stream still gets the disconnect record, with the id it was given, and the
    # job is not counted as shed (there was no whole answer to verify).
    from gateway.layers.registry import BUILTIN

    gw = start_gateway({"p": _policy("shadow", "passthrough")}, layers=BUILTIN,
                       readyz_detail="public",
                       pool={"workers": 1, "relay_busy": 1e-9, "busy_jobs_per_second": 0})

    def shadow() -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(gw.url + "/readyz", timeout=30).json()["shadow"]
        return data

    wait_until(lambda: shadow()["relay"]["saturated"], timeout=60.0, message="saturation")
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=USER, stream=True, extra_headers=SLOW_CHUNKS)
    headers = verity_headers(raw.headers)
    stream = raw.parse()
    _read_until_text(stream)
    stream.close()
    wait_until(lambda: upstream.cancelled >= 1, message="upstream cancellation")

    rec = _gone_record(gw)
    assert rec["audit_id"] == headers["x-verity-audit-id"]
    assert (rec["policy"], rec["mode"], rec["stream"], rec["upstream_status"]) == \
        ("p", "shadow", True, 200)
    assert rec["note"] == (GONE + " while the answer was relayed (its verification "
                           "already shed: relay_busy)")
    assert rec["response_id"] is None and rec["candidates"] == [] and "shadow" not in rec
    assert rec["started_at"] <= rec["finished_at"]
    status = shadow()
    assert status["dropped"] == 0 and status["relay"]["shed"] == 0
