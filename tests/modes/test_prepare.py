"""Inline policies index the grounding context while the upstream answers
(``VerityEngine.prepare``), and that changes no verdict."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import openai
import pytest

from modes.conftest import StartGateway
from modes.support import verity_headers
from gateway.sources.context import Document, GroundingContext
from gateway.layers.citations import CitationsConfig, CitationsLayer
from gateway.layers.grounding import GroundingConfig, GroundingLayer
from gateway.testing.scripted import Rule
from gateway.text.index import INDEX_KEY
from gateway.layers.base import LayerResources, LayerResult, VerifyInput

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import ServedUpstream

CONTEXT = ("Andre Johnson was born on July 11, 1981. He played for the Houston Texans "
           "for twelve seasons and caught 1,062 passes.")
GOOD = "Andre Johnson was born in 1981 and played for the Houston Texans."
BAD = "Andre Johnson was born in 1975 and played for the Dallas Cowboys for 20 seasons."
POLICY = """
mode: inline
default: true
streaming: {streaming}
layers: [{{name: grounding}}, {{name: citations, config: {{require_citations: false}}}}]
actions: {{fail: {{type: block}}}}
"""


def _messages() -> list[dict[str, Any]]:
    return [{"role": "system", "content": CONTEXT},
            {"role": "user", "content": "Tell me about Andre Johnson."}]


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For every grounding verification: was the context index already built?"""
    got: list[bool] = []
    verify = GroundingLayer.verify

    async def spy(self: GroundingLayer, inp: VerifyInput) -> LayerResult:
        got.append(INDEX_KEY in inp.context._cache)
        return await verify(self, inp)

    monkeypatch.setattr(GroundingLayer, "verify", spy)
    return got


@pytest.mark.parametrize("mode", ["json", "buffer", "passthrough"])
def test_inline_context_is_indexed_before_verification(
        start_gateway: StartGateway, upstream: ServedUpstream, seen: list[bool],
        make_client: Callable[..., openai.OpenAI], mode: str) -> None:
    upstream.app.rules = [Rule("Andre Johnson", BAD)]
    streaming = "buffer" if mode == "buffer" else "passthrough"
    gw = start_gateway({"p": POLICY.format(streaming=streaming)})
    client = make_client(gw.base_url)
    if mode == "json":
        raw = client.chat.completions.with_raw_response.create(
            model="scripted-small", messages=_messages())
        assert verity_headers(raw.headers)["x-verity-verdict"] == "fail"
    else:  # what a blocked stream looks like is tested elsewhere: read it all
        stream = client.chat.completions.create(model="scripted-small", messages=_messages(),
                                                stream=True)
        for _ in stream:
            pass
    assert seen == [True]  # prepared while the upstream answered
    record = gw.audit(expect=1)[-1]
    assert record["verdict"] == "fail"
    assert {r["name"]: r["passed"] for r in record["layers"]}["grounding"] is False


def test_a_failing_preparation_leaves_verification_to_do_the_work(
        start_gateway: StartGateway, upstream: ServedUpstream, seen: list[bool],
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        make_client: Callable[..., openai.OpenAI]) -> None:
    def broken(self: GroundingLayer, context: GroundingContext) -> None:
        raise RuntimeError("prepare broke")

    monkeypatch.setattr(GroundingLayer, "prepare", broken)
    upstream.app.rules = [Rule("Andre Johnson", GOOD)]
    gw = start_gateway({"p": POLICY.format(streaming="buffer")})
    with caplog.at_level(logging.ERROR, logger="gateway.engine"):
        raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
            model="scripted-small", messages=_messages())
    assert raw.parse().choices[0].message.content == GOOD
    assert verity_headers(raw.headers)["x-verity-verdict"] == "pass"
    assert seen == [False]  # verification extracted and indexed the context itself
    assert "preparing the context failed" in caplog.text


@pytest.mark.parametrize("answer", [GOOD, BAD, "No idea [1]. Born 1981 [2]."])
def test_prepare_changes_no_result(answer: str) -> None:
    res = LayerResources()

    def run(prepared: bool) -> list[LayerResult]:
        layers = [GroundingLayer(GroundingConfig(), res), CitationsLayer(CitationsConfig(), res)]
        ctx = GroundingContext(documents=[Document(id="system-1", text=CONTEXT, kind="system")])
        if prepared:
            for layer in layers:
                layer.prepare(ctx)
            assert INDEX_KEY in ctx._cache
        inp = VerifyInput(messages=_messages(), response_text=answer, context=ctx)
        out = []
        for layer in layers:
            coro = layer.verify(inp)
            try:
                coro.send(None)
            except StopIteration as stop:
                out.append(stop.value)
        return out

    assert run(True) == run(False)
    GroundingLayer(GroundingConfig(), res).prepare(GroundingContext())  # nothing to do
