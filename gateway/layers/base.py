"""The verification layer contract: what a layer is given, and what it returns.

A *layer* is one check run on one upstream answer. It receives a
:class:`VerifyInput` (request messages, the answer text, the grounding context)
and returns a :class:`LayerResult`. A layer never touches HTTP, policies or
telemetry: the pipeline (``gateway.verify.pipeline``) runs it under its timeout
and budget, calibrates and combines its score, and the telemetry module records
it.

Writing a layer
---------------
One file in ``gateway/layers/``, one line in ``gateway/layers/registry.py``
(``BUILTIN_LAYERS``), its tests. The class (see :class:`Layer`) has::

    class MyLayer:
        name: ClassVar[str] = "my-layer"                 # its registry name
        Config: ClassVar[type[LayerConfig]] = MyConfig   # strict pydantic model

        def __init__(self, config: MyConfig, resources: LayerResources) -> None: ...
        async def verify(self, inp: VerifyInput) -> LayerResult: ...

``Config()`` must build (every field has a default: a policy may name the layer
without ``config``). One instance serves every request of one policy version: keep
per-request state in ``verify``'s locals or in ``inp.context.memo``.
``tests/layers/test_conformance.py`` checks every registered layer against this
contract (name, strict config, default config, score in ``[0, 1]``).

Scores are in ``[0, 1]`` where **higher means more trustworthy** (less evidence
of hallucination). ``passed`` is the layer's own verdict at its own threshold;
for context-based layers it means "no evidence of error", never "verified".

CPU-only layers should be fast (about a millisecond); they run on the event
loop. A layer that needs a model uses ``resources.judge`` (may be ``None`` when
no judge is configured: then raise :class:`LayerUnavailable`).

Optionally, a model-free layer whose ``verify`` never awaits anything declares::

        cpu_only: ClassVar[bool] = True

When every layer a request runs says so, the pipeline runs them one after the
other in the calling task, without a task and an ``asyncio.timeout`` each (a
timeout cannot interrupt synchronous work anyway). Without it (the default) a
layer runs in its own task under its timeout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from gateway.sources.context import GroundingContext, message_text

__all__ = [
    "Evidence",
    "ForgetsReplies",
    "Judge",
    "JudgeError",
    "JudgeReply",
    "JudgeUsage",
    "Layer",
    "LayerConfig",
    "LayerResources",
    "LayerResult",
    "LayerUnavailable",
    "Preparing",
    "VerifyInput",
    "judge_usage",
    "metered",
    "reply_served",
    "uncache_on_error",
]


class LayerConfig(BaseModel):
    """Base for every layer's typed config: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True, slots=True)
class VerifyInput:
    """What a layer sees of one exchange."""

    messages: Sequence[Mapping[str, Any]]
    """The request's ``messages`` exactly as the client sent them."""
    response_text: str
    """The assistant's answer text (content of choice 0)."""
    context: GroundingContext
    """Grounding documents extracted per the policy's ``context`` setting."""
    model: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The request's ``metadata`` object, if any."""
    brief: bool = False
    """The caller reads only a result's verdict fields (``score``, ``passed``,
    ``label``, ``explanation``, ``failed_claims``, ``credit_score``, ``cost``,
    ``judge_calls``, ``cache_hit``, ``skipped``): a layer may then leave ``evidence``
    and ``details`` empty and skip the work only they need. The verification pipeline
    sets it (its :class:`~gateway.verify.outcome.LayerOutcome` keeps neither); a
    direct caller of a layer (the benches, the tests) gets the full result."""

    @property
    def question(self) -> str:
        """Text of the last user message ("" when there is none)."""
        for message in reversed(self.messages):
            if isinstance(message, (dict, Mapping)) and message.get("role") == "user":
                return message_text(message)  # the one reading of a message's text
        return ""


@dataclass(slots=True)
class Evidence:
    """One piece of evidence behind a layer's verdict (e.g. one answer sentence)."""

    text: str
    """The answer span this is about."""
    status: str
    """Layer-specific label, e.g. ``supported`` / ``unsupported`` / ``contradicted``."""
    source_id: str | None = None
    source_span: str | None = None
    """The context text that supports or contradicts it, when found."""
    score: float | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "status": self.status,
            "source_id": self.source_id,
            "source_span": self.source_span,
            "score": self.score,
            "reason": self.reason,
        }


@dataclass(slots=True)
class LayerResult:
    """What a layer returns. The pipeline adds name, latency, timeout and error."""

    score: float
    """In [0, 1]; higher = more trustworthy."""
    passed: bool
    explanation: str = ""
    label: str | None = None
    """Short verdict label for the evaluation event (e.g. ``supported``)."""
    evidence: list[Evidence] = field(default_factory=list)
    failed_claims: list[str] = field(default_factory=list)
    """Answer claims this layer found unsupported or contradicted; fed to regenerate."""
    credit_score: int | None = None
    """Seed 002 1–5 credit score, for layers that produce one."""
    cost: float = 0.0
    """Judge cost in USD, when a model was called."""
    judge_calls: int = 0
    cache_hit: bool = False
    skipped: bool = False
    """True when the layer had nothing to check (e.g. no context); score is neutral."""
    details: dict[str, Any] = field(default_factory=dict)


class LayerUnavailable(Exception):
    """The layer cannot run here (e.g. needs a judge and none is configured)."""


@runtime_checkable
class Judge(Protocol):
    """A model a layer may call. Implemented in ``gateway.upstream.judge``.

    The model called is ``override`` (a layer's own model setting, e.g. the audit
    layer's ``verify_model``), else the configured ``judge.model``, else ``model``
    (layers pass the request's model, ``inp.model``). Replies at
    temperature 0 may come from a cache (``JudgeReply.cached``). Failures raise
    :class:`JudgeError`; the pipeline treats them per the policy's ``on_error``.

    A judge that can ask its model for JSON by schema says so with a true class
    attribute ``accepts_schema``; its ``complete`` then also takes
    ``schema: Mapping[str, Any] | None`` (the JSON Schema the reply must follow) and
    ``schema_name: str`` (see ``gateway.upstream.judge``). Layers pass them only to
    such a judge (``gateway.layers._judged.JudgeTally``), so a judge without them
    keeps working: the prompt itself asks for the JSON.
    """

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], *, temperature: float = 0.0,
        max_tokens: int = 512, n: int = 1, model: str | None = None,
        override: str | None = None,
    ) -> JudgeReply: ...


class JudgeError(Exception):
    """A judge call failed (connect, timeout, HTTP error, unusable reply).

    The message is recorded whether or not the policy records content (audit,
    spans, a ``fail_closed`` block message): it names the failure ("judge reply is
    not JSON (412 chars)", "missing key 'verdict'") and never quotes the judge's
    reply or the answer (``gateway.redact.shape`` describes a bad value).
    """


@dataclass(slots=True)
class JudgeReply:
    texts: list[str]
    cost: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cached: bool = False
    model: str = ""
    truncated: bool = False
    """A reply stopped at ``max_tokens`` (``finish_reason: length``): its JSON may be cut."""


@dataclass(slots=True)
class JudgeUsage:
    """The judge calls one layer run made, counted as they are made: a layer that
    fails or times out after calling the judge still accounts for the calls (and
    the cost and tokens of the replies it got). See :func:`metered`."""

    calls: int = 0
    cost: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    allowance: float | None = None
    """Judge USD this layer run may spend (what the request's cost budget had left
    when it started); None: no limit. Optional calls (a repair retry) check it."""

    def over_budget(self) -> bool:
        return self.allowance is not None and self.cost >= self.allowance

    def called(self) -> None:
        self.calls += 1

    def replied(self, reply: JudgeReply) -> None:
        self.cost += reply.cost
        self.input_tokens += reply.input_tokens
        self.output_tokens += reply.output_tokens


_USAGE: ContextVar[JudgeUsage | None] = ContextVar("verity_judge_usage", default=None)


class _Metered:
    """The block :func:`metered` returns (a class: no generator per layer run)."""

    __slots__ = ("_token", "usage")

    def __init__(self, allowance: float | None) -> None:
        self.usage = JudgeUsage(allowance=allowance)

    def __enter__(self) -> JudgeUsage:
        self._token = _USAGE.set(self.usage)
        return self.usage

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _USAGE.reset(self._token)


def metered(allowance: float | None = None) -> AbstractContextManager[JudgeUsage]:
    """Count the judge calls made inside (by this task and the tasks it starts):
    the pipeline wraps each layer run in it; :func:`judge_usage` is where a layer's
    judge plumbing (``gateway.layers._judged.JudgeTally``) reports each call.
    ``allowance``: see :attr:`JudgeUsage.allowance`."""
    return _Metered(allowance)


def judge_usage() -> JudgeUsage | None:
    """The usage of the layer run in progress (None outside :func:`metered`)."""
    return _USAGE.get()


class ForgetsReplies(Protocol):
    """A judge with a reply cache (``gateway.upstream.judge``): it can drop one reply."""

    def forget(self, key: str) -> None: ...


_SERVED: ContextVar[list[tuple[ForgetsReplies, str]] | None] = ContextVar(
    "verity_judge_served", default=None)
"""Cache keys of the replies served or stored inside :func:`uncache_on_error`."""


def reply_served(judge: ForgetsReplies, key: str) -> None:
    """A caching judge reports each reply it served (or stored) under ``key``: if the
    layer run in progress fails, :func:`uncache_on_error` makes ``judge`` forget it."""
    served = _SERVED.get()
    if served is not None:
        served.append((judge, key))


class _Uncaching:
    """The block :func:`uncache_on_error` returns (a class: no generator per layer run)."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _SERVED.set([])

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if exc_type is not None:
                for judge, key in _SERVED.get() or ():
                    judge.forget(key)
        finally:
            _SERVED.reset(self._token)


def uncache_on_error() -> AbstractContextManager[None]:
    """Run a layer: if it raises, the temperature-0 replies it got (fresh or from the
    cache) leave the cache. A reply the layer could not use ("level": "contradicted")
    would otherwise come back for every identical request until evicted. The
    pipeline wraps every layer run in it, beside :func:`metered`."""
    return _Uncaching()


@dataclass(frozen=True, slots=True)
class LayerResources:
    """Shared, long-lived things a layer may use; created in the app lifespan."""

    judge: Judge | None = None
    corpus: Mapping[str, str] = field(default_factory=dict)
    """Configured source corpus: source id -> text."""


@runtime_checkable
class Layer(Protocol):
    """A verification layer (see the module docstring)."""

    name: ClassVar[str]
    """Its registry name (the ``name`` policies give it)."""
    Config: ClassVar[type[LayerConfig]]
    """Its typed config: strict (unknown keys are errors); ``Config()`` builds."""

    def __init__(self, config: Any, resources: LayerResources) -> None:
        """``config``: an instance of ``Config``; ``resources``: what the runtime shares
        (the judge, the policy's corpus). Built once per policy version."""

    async def verify(self, inp: VerifyInput) -> LayerResult:
        """Check ``inp.response_text``; the score is in ``[0, 1]``, higher = more
        trustworthy. Raise :class:`LayerUnavailable` when it cannot run here, or
        :class:`JudgeError` when its judge failed; any other exception is a bug,
        recorded by its type and place (never its message)."""
        ...


@runtime_checkable
class Preparing(Protocol):
    """A layer that can do its context-side work before the answer exists.

    For an inline policy the engine calls ``prepare`` once the request has gone
    upstream, so the work overlaps the upstream's generation instead of adding to
    the verification's latency; ``verify`` later gets the same
    :class:`~gateway.sources.context.GroundingContext` (whose ``memo`` holds what ``prepare``
    built). Synchronous, CPU-only, must not raise for any context, and must leave
    ``verify``'s result unchanged (only its cost may change).
    """

    def prepare(self, context: GroundingContext) -> None: ...
