"""Model-based layers on a gateway with no judge, under ``on_error: fail_closed``.

An answer with nothing for a layer to check is ``skipped`` before the layer asks for
its judge, so it is delivered; an answer with something to check still makes the
layer unavailable, which fails the request closed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import openai
import pytest

from modes.conftest import StartGateway
from modes.support import verity_headers
from gateway.testing.scripted import Rule
from gateway import runtime

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import ServedUpstream

ASK: Any = [{"role": "user", "content": "What is the capital of France?"}]
SYSTEM_ONLY: Any = [{"role": "system", "content": "Greet the user."}]
GREETING = "Hi there!"
CLAIM = "Paris is the capital of France."


def _policy(layer: str) -> str:
    return f"""
mode: inline
default: true
layers: [{{name: {layer}}}]
on_error: fail_closed
actions:
  fail: {{type: block, message: blocked}}
"""


@pytest.fixture
def no_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gateways started in this test get no judge (as with nothing to call)."""
    monkeypatch.setattr(runtime, "create_judge", lambda settings, telemetry=None: None)


# (layer, request messages, upstream answer): nothing for that layer to check.
NOTHING_TO_CHECK = {
    "nli-no-context": ("nli", ASK, CLAIM),
    "nli-empty-answer": ("nli", [{"role": "system", "content": CLAIM}, *ASK], ""),
    "self-consistency-no-checkable-sentence": ("self-consistency", ASK, GREETING),
    "semantic-entropy-no-question": ("semantic-entropy", SYSTEM_ONLY, CLAIM),
    "audit-no-context": ("audit", ASK, CLAIM),
    "fact-check-no-claim": ("fact-check", ASK, GREETING),
}


@pytest.mark.usefixtures("no_judge")
@pytest.mark.parametrize("case", list(NOTHING_TO_CHECK))
def test_nothing_to_check_passes_fail_closed_without_a_judge(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI], case: str) -> None:
    layer, messages, answer = NOTHING_TO_CHECK[case]
    upstream.app.default_reply = answer
    gw = start_gateway({"p": _policy(layer)})
    assert gw.engine.judge is None
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=messages)
    assert raw.parse().choices[0].message.content == answer
    h = verity_headers(raw.headers)
    assert h["x-verity-layers"] == f"{layer}=skipped"
    assert (h["x-verity-verdict"], h["x-verity-action"]) == ("pass", "pass")
    (rec,) = gw.audit(expect=1)
    assert rec["layers"][0]["skipped"] and rec["layers"][0]["error"] is None
    assert gw.telemetry.total("fail_closed") == 0
    assert [r["path"] for r in upstream.requests] == ["/v1/chat/completions"]  # no judge call


@pytest.mark.usefixtures("no_judge")
@pytest.mark.parametrize("layer", ["nli", "self-consistency", "semantic-entropy"])
def test_something_to_check_without_a_judge_still_fails_closed(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI], layer: str) -> None:
    upstream.app.rules = [Rule("capital", CLAIM)]
    gw = start_gateway({"p": _policy(layer)})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=[{"role": "system", "content": CLAIM}, *ASK])
    assert raw.parse().choices[0].message.content == "blocked"
    h = verity_headers(raw.headers)
    assert h["x-verity-layers"] == f"{layer}=error"
    assert (h["x-verity-verdict"], h["x-verity-action"]) == ("fail", "block")
    (rec,) = gw.audit(expect=1)
    assert rec["layers"][0]["error"].startswith("unavailable: needs a judge")
    assert gw.telemetry.total("fail_closed") == 1
