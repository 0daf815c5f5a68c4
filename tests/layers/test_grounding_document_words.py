"""A summary's own couple of words carry no weak evidence (``document_free_words``).

A one-sentence summary of a long article gets almost no length allowance, so two
paraphrase words ("despite grumbling") were enough to flag it; a made-up summary
brings in many more."""

from __future__ import annotations

import asyncio

from gateway.layers.base import LayerResources, LayerResult, VerifyInput
from gateway.layers.grounding import GroundingConfig, GroundingLayer
from gateway.sources.context import Document, GroundingContext

ARTICLE = " ".join([
    "The county council approved the new bus depot on Monday after a long debate.",
    "The depot will cost £12 million and will be built on the old gasworks site.",
    "Work starts in May and should finish by the end of next year.",
    "It will house 80 electric buses and a workshop for the operator's engineers.",
    "Residents of the nearby streets had objected to the noise of night-time charging.",
    "The council said the site is shielded by a railway embankment on two sides.",
    "A second vote on the access road is due in June.",
    "The operator said the depot would cut its diesel use by a third.",
    "Councillors from the opposition abstained, citing the cost.",
    "The leader of the council called the decision a milestone for the town.",
])
ASK = "Summarize the article above."
CFG = {"shape_scale": {"passage": 1.302, "conversation": 0.10, "document": 0.50},
       "summary_context_sentences": 6}


def run(answer: str, **config: object) -> LayerResult:
    layer = GroundingLayer(GroundingConfig.model_validate({**CFG, **config}), LayerResources())
    msgs = [{"role": "system", "content": ARTICLE}, {"role": "user", "content": ASK}]
    inp = VerifyInput(messages=msgs, response_text=answer, context=GroundingContext(
        documents=[Document(id="ctx", text=ARTICLE, kind="system")]))
    return asyncio.run(layer.verify(inp))


PARAPHRASE = "The council approved a £12 million depot for 80 electric buses, despite grumbling."
MADE_UP = ("Councillors unanimously backed a lavish £12 million depot, praised by delighted "
           "commuters, featuring solar canopies, rooftop gardens and a visitor cafe.")


def test_a_summary_may_bring_in_a_couple_of_words() -> None:
    on, off = run(PARAPHRASE), run(PARAPHRASE, document_free_words=0)
    assert on.details["shape"] == "document"
    assert on.score > off.score
    assert on.passed, on.explanation
    assert not off.passed  # the two words alone flagged it before


def test_a_made_up_summary_is_still_flagged() -> None:
    res = run(MADE_UP)
    assert res.details["shape"] == "document"
    assert not res.passed, res.explanation


def test_only_in_the_document_shape() -> None:
    msgs_q = "How much will the depot cost?"
    layer = GroundingLayer(GroundingConfig.model_validate(CFG), LayerResources())
    other = GroundingLayer(GroundingConfig.model_validate({**CFG, "document_free_words": 0}),
                           LayerResources())
    short = "The depot will cost £12 million, despite grumbling residents."
    ctx = " ".join(ARTICLE.split(". ")[:3])
    msgs = [{"role": "system", "content": ctx}, {"role": "user", "content": msgs_q}]

    def inp() -> VerifyInput:
        return VerifyInput(messages=msgs, response_text=short, context=GroundingContext(
            documents=[Document(id="ctx", text=ctx, kind="system")]))

    a, b = asyncio.run(layer.verify(inp())), asyncio.run(other.verify(inp()))
    assert a.details["shape"] == "passage" and a.score == b.score


def test_on_by_default() -> None:
    assert GroundingConfig().document_free_words > 0
