"""A dialogue reply that corrects the conversation with what the knowledge lacks
(``_grounding_correction``): a disclaimer; a correction the knowledge backs passes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.layers.base import LayerResources, LayerResult, VerifyInput
from gateway.layers.grounding import GroundingConfig, GroundingLayer
from gateway.sources.context import Document, GroundingContext


def _shipped() -> dict[str, Any]:
    policy = yaml.safe_load((Path(__file__).parents[2] / "policies" / "grounding.yaml")
                            .read_text(encoding="utf-8"))
    return dict(next(la["config"] for la in policy["layers"] if la["name"] == "grounding"))


SHIPPED = _shipped()


def chat(answer: str, knowledge: str, dialogue: str, **config: object) -> LayerResult:
    layer = GroundingLayer(GroundingConfig.model_validate({**SHIPPED, **config}),
                           LayerResources())
    msgs = [{"role": "system", "content": knowledge}, {"role": "user", "content": dialogue}]
    inp = VerifyInput(messages=msgs, response_text=answer, context=GroundingContext(
        documents=[Document(id="ctx", text=knowledge, kind="system")]))
    return asyncio.run(layer.verify(inp))


FILM = "Cedar Hollow is directed by Ines Marlow. Cedar Hollow has genre War film"
FILM_CHAT = "[Human]: I liked Cedar Hollow. [Assistant]: Nice. [Human]: Is it a war film?"
PLAN = ("The Basic plan includes 20 GB of storage. The Basic plan costs 4 euros a month. "
        "Support is by email only")
PLAN_CHAT = ("[Human]: Hi, I am on the Basic plan. [Assistant]: Welcome! "
             "[Human]: I think it has phone support, right?")
DOSE = "Amoxil is taken three times a day. Amoxil comes as 500 mg capsules"
DOSE_CHAT = ("[Human]: My doctor gave me Amoxil. [Assistant]: I see. "
             "[Human]: So I take it once a day?")
CLUB = "Riverside Rovers : `Stadium`: Millbrook Park. Riverside Rovers : `Division`: Northern League"
CLUB_CHAT = ("[Human]: Do you follow the Riverside Rovers? [Assistant]: A little. "
             "[Human]: They play at Kingsway Arena, don't they?")

WRONG = [
    ("Actually, Cedar Hollow is a romantic comedy filmed in Portugal.", FILM, FILM_CHAT),
    ("Actually, Basic includes a dedicated phone line staffed around the clock.", PLAN, PLAN_CHAT),
    ("No, actually it is a slow release tablet you crush into juice.", DOSE, DOSE_CHAT),
    ("Actually, they moved to Kingsway Arena after the 2019 renovation.", CLUB, CLUB_CHAT),
    ("Actually, no. Basic support comes through live chat and phone.", PLAN, PLAN_CHAT),
]
RIGHT = [
    ("Yes, Cedar Hollow is a war film by Ines Marlow.", FILM, FILM_CHAT),
    ("Actually, support on the Basic plan is by email only.", PLAN, PLAN_CHAT),
    ("Actually, Amoxil is taken three times a day.", DOSE, DOSE_CHAT),
    ("Actually, no. They play at Millbrook Park.", CLUB, CLUB_CHAT),
    ("I actually don't know, sorry!", PLAN, PLAN_CHAT),
    ("Did you know it is actually one of the cheapest plans around?", PLAN, PLAN_CHAT),
    # Paraphrased corrections: one or two words of their own are no assertion.
    ("Actually, Basic gives you 20 GB for 4 euros a month, with help by email.", PLAN, PLAN_CHAT),
    ("In fact, support comes only through email on Basic.", PLAN, PLAN_CHAT),
    ("Actually you take Amoxil three times daily, one capsule each time.", DOSE, DOSE_CHAT),
]


@pytest.mark.parametrize(("answer", "knowledge", "dialogue"), WRONG)
def test_a_correction_the_knowledge_lacks_is_flagged(answer: str, knowledge: str,
                                                     dialogue: str) -> None:
    res = chat(answer, knowledge, dialogue)
    assert res.details["shape"] == "conversation"
    assert not res.passed, res.explanation
    assert res.score >= 0.3  # a disclaimer, not a block, on its own
    assert any("corrects the conversation" in ev.reason for ev in res.evidence)
    assert chat(answer, knowledge, dialogue, corrections=False).passed  # the check's own


@pytest.mark.parametrize(("answer", "knowledge", "dialogue"), RIGHT)
def test_a_correction_the_knowledge_backs_passes(answer: str, knowledge: str,
                                                 dialogue: str) -> None:
    res = chat(answer, knowledge, dialogue)
    assert res.passed, res.explanation


def test_only_in_a_conversation() -> None:
    answer = "Actually, Basic includes a dedicated phone line staffed around the clock."
    res = chat(answer, PLAN, "Does the Basic plan have phone support?")
    assert res.details["shape"] == "passage"
    assert not any("corrects the conversation" in ev.reason for ev in res.evidence)


def test_on_by_default() -> None:
    assert GroundingConfig().corrections
