"""Every registered layer keeps the layer contract (``gateway/layers/base.py``).

A generic check over the shipped registry, as NeMo-Guardrails checks every rail:
its registry name is its ``name``, its config is strict and builds with no keys,
it is built the way the runtime builds it, and whatever it returns scores in
``[0, 1]`` — or it says it cannot run (``LayerUnavailable``) or that its judge
failed (``JudgeError``). Fix the layer, not this test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from gateway.layers.base import (
    JudgeError,
    JudgeReply,
    Layer,
    LayerConfig,
    LayerResources,
    LayerResult,
    LayerUnavailable,
    VerifyInput,
)
from gateway.layers.registry import BUILTIN
from gateway.sources.context import ContextSpec, extract_context

NAMES = BUILTIN.known()

CONTEXT = ("The Eiffel Tower was completed in 1889 [1]. It is 330 metres tall and stands "
           "in Paris, France. Gustave Eiffel's company built it for the World's Fair.")
ANSWERS = ["", "Yes.", "The Eiffel Tower, completed in 1889, is 330 metres tall [1].",
           "The Eiffel Tower was completed in 1899 in Lyon and is 500 metres tall. "
           "I think it is the best tower. It may have been painted red."]


class EchoJudge:
    """A judge that answers every prompt with one reply (JSON a layer may or may not
    accept): the layer must score it, or say that its judge failed."""

    def __init__(self, reply: str) -> None:
        self.reply = reply

    async def complete(self, messages: Sequence[Mapping[str, Any]], *,
                       temperature: float = 0.0, max_tokens: int = 512, n: int = 1,
                       model: str | None = None, override: str | None = None) -> JudgeReply:
        return JudgeReply(texts=[self.reply] * n, model=model or "judge")


JUDGES = [None, EchoJudge("{}"), EchoJudge("not json"),
          EchoJudge('{"results": [{"id": 1, "label": "entailment", "confidence": 0.9}], '
                    '"verdicts": [], "errors": [], "facts": [], "reasoning": [], '
                    '"pairs": [], "clusters": [[1]], "claims": []}')]


def _inputs() -> list[VerifyInput]:
    out = []
    for system in (None, CONTEXT):
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": "Tell me about the Eiffel Tower."})
        context = extract_context(messages, ContextSpec())
        out += [VerifyInput(messages=messages, response_text=a, context=context, model="m")
                for a in ANSWERS]
    return out


@pytest.mark.parametrize("name", NAMES)
def test_name_matches_its_registry_key(name: str) -> None:
    cls = BUILTIN.resolve(name)
    assert cls.name == name
    assert isinstance(cls.Config, type) and issubclass(cls.Config, LayerConfig)


@pytest.mark.parametrize("name", NAMES)
def test_config_forbids_unknown_keys_and_builds_with_none(name: str) -> None:
    cls = BUILTIN.resolve(name)
    assert cls.Config.model_config.get("extra") == "forbid"
    cls.Config()  # a policy may name the layer without `config`
    with pytest.raises(ValidationError):
        cls.Config.model_validate({"no_such_key_anywhere": 1})


@pytest.mark.parametrize("name", NAMES)
def test_built_as_the_runtime_builds_it(name: str) -> None:
    cls = BUILTIN.resolve(name)
    layer = cls(cls.Config(), LayerResources())
    assert isinstance(layer, Layer)


@pytest.mark.parametrize("name", NAMES)
def test_scores_are_in_0_1_or_the_layer_says_why_not(name: str) -> None:
    cls = BUILTIN.resolve(name)

    async def run() -> list[LayerResult | str]:
        outcomes: list[LayerResult | str] = []
        for judge in JUDGES:
            layer = cls(cls.Config(), LayerResources(judge=judge))
            for inp in _inputs():
                try:
                    outcomes.append(await layer.verify(inp))
                except LayerUnavailable:
                    outcomes.append("unavailable")
                except JudgeError:
                    outcomes.append("judge error")
        return outcomes

    outcomes = asyncio.run(run())
    for result in outcomes:
        if isinstance(result, LayerResult):
            assert 0.0 <= result.score <= 1.0, (name, result)
            assert isinstance(result.passed, bool)
    # Without a judge a layer runs, or says it needs one: it never crashes (any other
    # exception fails above) and never reports a judge failure it cannot have had.
    without_judge = {o if isinstance(o, str) else "result" for o in outcomes[:len(_inputs())]}
    assert without_judge <= {"result", "unavailable"}, (name, without_judge)
