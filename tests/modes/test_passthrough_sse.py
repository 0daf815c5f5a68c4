"""``streaming: passthrough`` against exact upstream SSE shapes, through a real gateway
and the openai SDK: n>1 choices each with their own finish chunk, multi-line ``data:``
events, content sent after a finish chunk.

The upstream below writes raw bytes (not re-serialized events), so each test controls
the wire shape exactly. The ``keyword`` layer fails answers containing "BAD".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import openai
import orjson
import pytest

from modes.conftest import StartGateway
from gateway.testing.scripted import read_all, serve_lifespan
from gateway.testing.servers import ServerThread

POLICY = """
mode: inline
default: true
streaming: {streaming}
layers: [{{name: keyword, config: {{block: [BAD]}}}}]
actions: {{fail: {action}}}
"""
BLOCK = '{type: block, message: "Blocked."}'
DISCLAIMER = '{type: disclaimer, template: " [unverified]"}'
USAGE_TOTAL = 9


def _event(choices: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": choices, **more}


def _choice(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}


def sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def sse_multiline(obj: dict[str, Any]) -> bytes:
    """One event whose JSON spans two ``data:`` lines (joined by "\\n" per the SSE spec)."""
    text = orjson.dumps(obj)
    cut = text.index(b'"choices"')
    return b"data: " + text[:cut] + b"\ndata: " + text[cut:] + b"\n\n"


USAGE = sse(_event([], usage={"prompt_tokens": 3, "completion_tokens": 6,
                              "total_tokens": USAGE_TOTAL}))
DONE = b"data: [DONE]\n\n"


class RawUpstream:
    """Streams ``pieces`` (raw bytes, one write each) to every streaming request."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await serve_lifespan(receive, send)
        await read_all(receive)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        for piece in self.pieces:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@pytest.fixture(scope="module")
def raw_server() -> Iterator[tuple[RawUpstream, ServerThread]]:
    app = RawUpstream()
    with ServerThread(app) as server:
        yield app, server


@pytest.fixture
def raw(raw_server: tuple[RawUpstream, ServerThread]
        ) -> tuple[RawUpstream, list[dict[str, str]]]:
    app, server = raw_server
    app.pieces = []
    return app, [{"name": "raw", "base_url": server.url + "/v1"}]


class Read:
    """What the SDK client saw: every chunk, per-choice text and finish reasons."""

    def __init__(self, chunks: list[Any]) -> None:
        self.chunks = chunks
        self.text: dict[int, str] = {}
        self.finish: dict[int, list[str]] = {}
        self.events: list[tuple[str, int, Any]] = []  # (kind, index, value) in order
        for chunk in chunks:
            if chunk.usage is not None:
                self.events.append(("usage", -1, chunk.usage.total_tokens))
            for c in chunk.choices:
                self.text[c.index] = self.text.get(c.index, "") + (c.delta.content or "")
                if c.delta.content:
                    self.events.append(("content", c.index, c.delta.content))
                if c.finish_reason:
                    self.finish.setdefault(c.index, []).append(c.finish_reason)
                    self.events.append(("finish", c.index, c.finish_reason))

    def verity(self) -> list[dict[str, Any]]:
        return [c.model_extra["verity"] for c in self.chunks
                if c.model_extra and "verity" in c.model_extra]


def _read(gw: Any, make_client: Callable[..., openai.OpenAI], n: int = 1) -> Read:
    stream = make_client(gw.base_url).chat.completions.create(
        model="m", n=n, messages=[{"role": "user", "content": "x"}], stream=True,
        stream_options={"include_usage": True})
    return Read(list(stream))


def _gateway(start_gateway: StartGateway, upstreams: list[dict[str, str]], action: str,
             streaming: str = "passthrough") -> Any:
    return start_gateway({"p": POLICY.format(streaming=streaming, action=action)},
                         upstreams=upstreams)


# ---- n > 1: every choice ends with a finish reason ----------------------------------------

N3 = [
    sse(_event([_choice(i, {"role": "assistant", "content": ""})])) for i in range(3)
] + [
    sse(_event([_choice(0, {"content": "This is "})])),
    sse(_event([_choice(1, {"content": "Choice one"})])),
    sse(_event([_choice(2, {"content": "Choice "})])),
    sse(_event([_choice(0, {"content": "BAD"})])),
    sse(_event([_choice(0, {}, "stop")])),          # choice 0 finishes first
    sse(_event([_choice(2, {"content": "two"})])),  # choice 2 still streaming
    sse(_event([_choice(1, {}, "stop")])),
    sse(_event([_choice(2, {}, "length")])),
    USAGE, DONE,
]
N3_TEXT = {0: "This is BAD", 1: "Choice one", 2: "Choice two"}


def test_n3_block_in_passthrough_finishes_every_choice_with_content_filter(
        start_gateway: StartGateway, raw: tuple[RawUpstream, list[dict[str, str]]],
        make_client: Callable[..., openai.OpenAI]) -> None:
    app, upstreams = raw
    app.pieces = list(N3)
    gw = _gateway(start_gateway, upstreams, BLOCK)
    got = _read(gw, make_client, n=3)
    # The verdict applies to the response: every choice ends content_filter, once.
    assert got.finish == {0: ["content_filter"], 1: ["content_filter"], 2: ["content_filter"]}
    assert got.text == {0: "This is BAD\n\nBlocked.", 1: "Choice one", 2: "Choice two"}
    # All upstream content first, then the block chunk(s), then usage.
    kinds = [k for k, _, _ in got.events]
    last_upstream = max(i for i, (k, _, v) in enumerate(got.events)
                        if k == "content" and v != "\n\nBlocked.")
    assert got.events[last_upstream + 1] == ("content", 0, "\n\nBlocked.")
    assert kinds[last_upstream + 2:] == ["finish"] * 3 + ["usage"]
    assert got.events[-1] == ("usage", -1, USAGE_TOTAL)
    signals = got.verity()
    assert signals and all(s["action"] == "block" and s["verdict"] == "fail" for s in signals)
    (rec,) = gw.audit(expect=1)
    assert rec["action"] == "block" and rec["note"].startswith("only choice 0 verified")


def test_n3_block_in_buffer_mode_is_one_refusal_choice(
        start_gateway: StartGateway, raw: tuple[RawUpstream, list[dict[str, str]]],
        make_client: Callable[..., openai.OpenAI]) -> None:
    # The buffer-mode counterpart (nothing was sent yet): one choice, content_filter.
    app, upstreams = raw
    app.pieces = list(N3)
    got = _read(_gateway(start_gateway, upstreams, BLOCK, streaming="buffer"), make_client, n=3)
    assert got.finish == {0: ["content_filter"]}
    assert got.text == {0: "Blocked."}


def test_n3_disclaimer_in_passthrough_keeps_each_choice_finish(
        start_gateway: StartGateway, raw: tuple[RawUpstream, list[dict[str, str]]],
        make_client: Callable[..., openai.OpenAI]) -> None:
    app, upstreams = raw
    app.pieces = list(N3)
    got = _read(_gateway(start_gateway, upstreams, DISCLAIMER), make_client, n=3)
    assert got.finish == {0: ["stop"], 1: ["stop"], 2: ["length"]}
    assert got.text == {**N3_TEXT, 0: "This is BAD [unverified]"}
    # The disclaimer immediately precedes choice 0's finish, and follows all its content.
    i = got.events.index(("content", 0, " [unverified]"))
    assert got.events[i + 1] == ("finish", 0, "stop")
    assert got.events[-1] == ("usage", -1, USAGE_TOTAL)


# ---- multi-line data events --------------------------------------------------------------

MULTILINE = [
    sse(_event([_choice(0, {"role": "assistant", "content": ""})])),
    sse_multiline(_event([_choice(0, {"content": "Split "})])),  # relayed as it arrives
    sse(_event([_choice(0, {"content": "event"})])),
    sse_multiline(_event([_choice(0, {"content": "!"}, "stop")])),  # held (the tail)
    sse_multiline(_event([], usage={"prompt_tokens": 3, "completion_tokens": 6,
                                    "total_tokens": USAGE_TOTAL})),
    DONE,
]


@pytest.mark.parametrize("action", ["pass", "disclaimer", "block"])
def test_multiline_data_events_are_relayed_intact(
        start_gateway: StartGateway, raw: tuple[RawUpstream, list[dict[str, str]]],
        make_client: Callable[..., openai.OpenAI], action: str) -> None:
    app, upstreams = raw
    bad = action != "pass"
    pieces = list(MULTILINE)
    if bad:  # make the keyword layer fail
        pieces[2] = sse_multiline(_event([_choice(0, {"content": "BAD event"})]))
    app.pieces = pieces
    policy = DISCLAIMER if action == "disclaimer" else BLOCK
    got = _read(_gateway(start_gateway, upstreams, policy), make_client)
    body = "Split BAD event!" if bad else "Split event!"
    expected = {"pass": (body, "stop"), "disclaimer": (body + " [unverified]", "stop"),
                "block": (body + "\n\nBlocked.", "content_filter")}[action]
    assert (got.text[0], got.finish[0]) == (expected[0], [expected[1]])
    assert got.events[-1] == ("usage", -1, USAGE_TOTAL)


# ---- content after the finish chunk ------------------------------------------------------

LATE = [
    sse(_event([_choice(0, {"role": "assistant", "content": ""})])),
    sse(_event([_choice(0, {"content": "This is "})])),
    sse(_event([_choice(0, {}, "stop")])),
    sse(_event([_choice(0, {"content": "BAD"})])),  # after the finish: still verified
    USAGE, DONE,
]


@pytest.mark.parametrize("action", ["block", "disclaimer"])
def test_content_after_the_finish_chunk_is_verified_and_precedes_the_verdict(
        start_gateway: StartGateway, raw: tuple[RawUpstream, list[dict[str, str]]],
        make_client: Callable[..., openai.OpenAI], action: str) -> None:
    app, upstreams = raw
    app.pieces = list(LATE)
    gw = _gateway(start_gateway, upstreams, BLOCK if action == "block" else DISCLAIMER)
    got = _read(gw, make_client)
    added, finish = ("\n\nBlocked.", "content_filter") if action == "block" \
        else (" [unverified]", "stop")
    assert got.events == [("content", 0, "This is "), ("content", 0, "BAD"),
                          ("content", 0, added), ("finish", 0, finish),
                          ("usage", -1, USAGE_TOTAL)]
    assert got.verity()[0]["action"] == action
    (rec,) = gw.audit(expect=1)
    assert rec["verdict"] == "fail" and rec["action"] == action


def test_content_after_the_finish_chunk_passes_through_unchanged_on_pass(
        start_gateway: StartGateway, raw: tuple[RawUpstream, list[dict[str, str]]],
        make_client: Callable[..., openai.OpenAI]) -> None:
    # Nothing is added on pass: the upstream's order is kept (as shadow would relay it).
    app, upstreams = raw
    app.pieces = [p.replace(b"BAD", b"fine") for p in LATE]
    got = _read(_gateway(start_gateway, upstreams, BLOCK), make_client)
    assert got.events == [("content", 0, "This is "), ("finish", 0, "stop"),
                          ("content", 0, "fine"), ("usage", -1, USAGE_TOTAL)]
