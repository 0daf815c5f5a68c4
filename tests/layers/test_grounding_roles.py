"""A work credited to someone the context never names, in a role the context gives
another person (``role_credits``): a disclaimer, in a passage and in a conversation."""

from __future__ import annotations

import asyncio

from gateway.layers.base import LayerResources, LayerResult, VerifyInput
from gateway.layers.grounding import GroundingConfig, GroundingLayer
from gateway.sources.context import Document, GroundingContext

CFG = {"shape_scale": {"passage": 1.302, "conversation": 0.10, "document": 0.50},
       "negation_scope": True}
TOWER = ("The Harbour Tower was designed by Lena Okafor and opened in 2019. "
         "It has 41 floors and a public viewing deck.")
KG = "Road to Perdition is directed by Sam Mendes. Road to Perdition is starring Tom Hanks"
CHAT = ("[Human]: I loved Road to Perdition. [Assistant]: A great film. "
        "[Human]: Who made it?")


def run(answer: str, context: str, question: str, **config: object) -> LayerResult:
    layer = GroundingLayer(GroundingConfig.model_validate({**CFG, **config}), LayerResources())
    msgs = [{"role": "system", "content": context}, {"role": "user", "content": question}]
    inp = VerifyInput(messages=msgs, response_text=answer, context=GroundingContext(
        documents=[Document(id="ctx", text=context, kind="system")]))
    return asyncio.run(layer.verify(inp))


def test_a_swapped_credit_in_a_conversation_is_flagged() -> None:
    wrong = "Road to Perdition was directed by Martin Scorsese, with Tom Hanks in the lead."
    res = run(wrong, KG, CHAT)
    assert res.details["shape"] == "conversation"
    assert not res.passed and res.score >= 0.3, res.explanation
    assert any("credits Sam Mendes" in ev.reason for ev in res.evidence)
    assert run(wrong, KG, CHAT, role_credits=False).passed
    right = "Road to Perdition was directed by Sam Mendes, with Tom Hanks in the lead."
    assert run(right, KG, CHAT).passed


def test_a_swapped_credit_in_a_passage_is_a_disclaimer() -> None:
    # A copied sentence ("… was designed by Norman Reyes and opened in 2019") is a
    # substituted name already (a block); this one shares too few words around the name.
    wrong = "The Harbour Tower has 41 floors; it is a landmark designed by Norman Reyes."
    res = run(wrong, TOWER, "Tell me about the Harbour Tower.")
    assert res.details["shape"] == "passage"
    assert not res.passed and res.score >= 0.3, res.explanation
    assert any("credits Lena Okafor" in ev.reason for ev in res.evidence)
    assert run(wrong, TOWER, "Tell me about the Harbour Tower.", role_credits=False).passed
    right = run("It was designed by Lena Okafor and opened in 2019.", TOWER,
                "Who designed the Harbour Tower, and when did it open?")
    assert right.passed, right.explanation


def test_on_by_default() -> None:
    assert GroundingConfig().role_credits
