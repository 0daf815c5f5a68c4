"""Test-only layers, a byte-exact upstream, and helpers for the engine tests.

The test layers are in :data:`REGISTRY` (the shipped layers plus these), which the
engine fixtures pass to every gateway they start (``create_app(…, layers=…)``);
servers run in-thread, so the gateway under test sees the layers' module state.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import httpx
from pydantic import Field

from gateway.layers.registry import BUILTIN
from gateway.testing.scripted import read_all, serve_lifespan
from gateway.telemetry import Telemetry
from gateway.layers.base import LayerConfig, LayerResources, LayerResult, VerifyInput

# ---- layers ------------------------------------------------------------------------------


class BoomConfig(LayerConfig):
    message: str = "kaboom"


class BoomLayer:
    """Always raises."""

    name: ClassVar[str] = "boom"
    Config: ClassVar[type[LayerConfig]] = BoomConfig

    def __init__(self, config: BoomConfig, resources: LayerResources | None = None) -> None:
        self.config = config

    async def verify(self, inp: VerifyInput) -> LayerResult:
        raise RuntimeError(self.config.message)


class SleepConfig(LayerConfig):
    ms: float = Field(0.0, ge=0)
    score: float = 1.0


class SleepLayer:
    """Sleeps ``ms`` then passes with ``score`` (a layer of known latency)."""

    name: ClassVar[str] = "sleep"
    Config: ClassVar[type[LayerConfig]] = SleepConfig

    def __init__(self, config: SleepConfig, resources: LayerResources | None = None) -> None:
        self.config = config

    async def verify(self, inp: VerifyInput) -> LayerResult:
        if self.config.ms:
            await asyncio.sleep(self.config.ms / 1000)
        return LayerResult(score=self.config.score, passed=True, label="ok")


GATE = threading.Event()
"""Released by a test: ``gate`` layers wait for it (shadow queue back-pressure)."""
GATE_ENTERED: list[str] = []


class GateLayer:
    """Waits until :data:`GATE` is set, then passes."""

    name: ClassVar[str] = "gate"
    Config: ClassVar[type[LayerConfig]] = LayerConfig

    def __init__(self, config: LayerConfig, resources: LayerResources | None = None) -> None:
        pass

    async def verify(self, inp: VerifyInput) -> LayerResult:
        GATE_ENTERED.append(inp.response_text)
        while not GATE.is_set():
            await asyncio.sleep(0.005)
        return LayerResult(score=1.0, passed=True, label="ok")


class WordClaimsConfig(LayerConfig):
    word: str


class WordClaimsLayer:
    """Fails every sentence containing ``word``, reporting it as a failed claim."""

    name: ClassVar[str] = "wordclaims"
    Config: ClassVar[type[LayerConfig]] = WordClaimsConfig

    def __init__(self, config: WordClaimsConfig, resources: LayerResources | None = None) -> None:
        self.config = config

    async def verify(self, inp: VerifyInput) -> LayerResult:
        sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", inp.response_text) if s.strip()]
        bad = [s for s in sentences if self.config.word.lower() in s.lower()]
        return LayerResult(score=0.0 if bad else 1.0, passed=not bad, failed_claims=bad,
                           label="unsupported" if bad else "ok",
                           explanation=f"{len(bad)} unsupported claim(s)")


class CreditConfig(LayerConfig):
    credit: int = 5


class CreditLayer:
    """Passes with score 1.0 but reports a seed-002 credit score."""

    name: ClassVar[str] = "credit"
    Config: ClassVar[type[LayerConfig]] = CreditConfig

    def __init__(self, config: CreditConfig, resources: LayerResources | None = None) -> None:
        self.config = config

    async def verify(self, inp: VerifyInput) -> LayerResult:
        return LayerResult(score=1.0, passed=True, credit_score=self.config.credit)


class SkipLayer:
    name: ClassVar[str] = "skip"
    Config: ClassVar[type[LayerConfig]] = LayerConfig

    def __init__(self, config: LayerConfig, resources: LayerResources | None = None) -> None:
        pass

    async def verify(self, inp: VerifyInput) -> LayerResult:
        return LayerResult(score=0.0, passed=False, skipped=True)


TEST_LAYERS = {"boom": "BoomLayer", "sleep": "SleepLayer", "gate": "GateLayer",
               "wordclaims": "WordClaimsLayer", "credit": "CreditLayer", "skip": "SkipLayer"}
REGISTRY = BUILTIN.with_layers({name: f"{__name__}:{attr}" for name, attr in TEST_LAYERS.items()})
"""The shipped layers and the test layers."""


# ---- telemetry that remembers --------------------------------------------------------------


class RecordingTelemetry(Telemetry):
    """The no-op telemetry, but counters are kept (thread-safe enough for tests)."""

    def __init__(self) -> None:
        self.counts: list[tuple[str, int, dict[str, Any]]] = []

    def count(self, name: str, value: int = 1,
              attributes: Mapping[str, Any] | None = None) -> None:
        self.counts.append((name, value, dict(attributes or {})))

    def total(self, name: str) -> int:
        return sum(v for n, v, _ in list(self.counts) if n == name)


# ---- a byte-exact upstream ---------------------------------------------------------------

FIXED_JSON = (b'{"id":"chatcmpl-fixed",  "object":"chat.completion", "created":1700000000,'
              b'"model":"fixed-model","choices":[{"index":0,"message":{"role":"assistant",'
              b'"content":"Fixed   answer \\u00e9 forbidden"},"finish_reason":"stop"}],'
              b'"usage":{"prompt_tokens":1,"completion_tokens":4,"total_tokens":5},'
              b'"vendor_extra" : [1, 2.50, "x"]}\n')
FIXED_STREAM = [
    b": keep-alive comment\n\n",
    b'data:{"id":"c1","object":"chat.completion.chunk","created":1,"model":"fixed-model",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n',
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"fixed-model",'
    b'"choices":[{"index":0,"delta":{"content":"Fixed forbidden"},"finish_reason":null}]}\r\n\r\n',
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"fixed-model",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]


class FixedUpstream:
    """Answers every chat completion with the same bytes (JSON or SSE)."""

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await serve_lifespan(receive, send)
        body = await read_all(receive)
        extra = [(b"x-request-id", b"req_fixed"), (b"x-custom", b"kept")]
        if b'"stream":true' in body.replace(b" ", b""):
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"text/event-stream"), *extra]})
            for piece in FIXED_STREAM:
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(FIXED_JSON)).encode()), *extra]})
        await send({"type": "http.response.body", "body": FIXED_JSON, "more_body": False})


# ---- helpers -----------------------------------------------------------------------------


def write_policy(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def verity_headers(headers: httpx.Headers | Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith("x-verity-")}
