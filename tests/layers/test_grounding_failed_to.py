""""failed to" negates like "not": a restated negation is no flip, an assertion is.

Before, the context's "Oscar has failed to complete 90 minutes" read as an assertion, so
the faithful "Oscar has not completed 90 minutes" was a negation flip (a block), while
"Oscar has completed 90 minutes" passed."""

from __future__ import annotations

import asyncio

from gateway.layers.base import LayerResources, LayerResult, VerifyInput
from gateway.layers.grounding import GroundingConfig, GroundingLayer
from gateway.sources.context import Document, GroundingContext
from gateway.text.tokens import has_negation

SPORT = ("Oscar has failed to complete 90 minutes in any of Chelsea's last 11 games. "
         "Chelsea visit QPR on Sunday.")
CONTRACT = ("The supplier failed to deliver the second batch by 30 June. "
            "The buyer may terminate the agreement.")


def run(answer: str, context: str) -> LayerResult:
    layer = GroundingLayer(GroundingConfig(negation_scope=True), LayerResources())
    msgs = [{"role": "system", "content": context}, {"role": "user", "content": "Tell me."}]
    inp = VerifyInput(messages=msgs, response_text=answer, context=GroundingContext(
        documents=[Document(id="ctx", text=context, kind="system")]))
    return asyncio.run(layer.verify(inp))


def test_failed_to_is_a_negation_cue() -> None:
    assert has_negation("The supplier failed to deliver.")
    assert has_negation("It fails to start.")
    assert not has_negation("The failed delivery was refunded.")  # no "to": an adjective


def test_a_restated_failure_is_no_flip() -> None:
    for answer, context in [
        ("Oscar has not completed 90 minutes in Chelsea's last 11 games.", SPORT),
        ("The supplier did not deliver the second batch by 30 June.", CONTRACT),
    ]:
        res = run(answer, context)
        assert res.label != "contradicted", res.evidence[0].reason


def test_asserting_what_failed_is_a_flip() -> None:
    res = run("Oscar has completed 90 minutes in each of Chelsea's last 11 games.", SPORT)
    assert res.label == "contradicted" and not res.passed
    assert "negation differs" in res.evidence[0].reason
