"""A regenerate fallback_model is routed by its own name, possibly to another upstream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from serving import GatewayFactory, ServedUpstream

from gateway.testing.scripted import ScriptedUpstream
from gateway.testing.servers import ServerThread

POLICY = """
default: true
mode: inline
layers:
  - {name: keyword, config: {block: [moon cheese]}}
actions:
  fail:
    type: regenerate
    max_attempts: 1
    fallback_model: big-model
    fallback: {type: block, message: "blocked"}
"""


@pytest.fixture(scope="module")
def big_upstream() -> Iterator[tuple[ScriptedUpstream, ServerThread]]:
    app = ScriptedUpstream(default_reply="The moon is rock.", models=("big-model",))
    with ServerThread(app) as server:
        yield app, server


def test_fallback_model_goes_to_the_upstream_that_serves_it(
        make_gateway: GatewayFactory, upstream: ServedUpstream, tmp_path: Path,
        big_upstream: tuple[ScriptedUpstream, ServerThread]) -> None:
    big, big_server = big_upstream
    big.requests.clear()
    upstream.app.default_reply = "The moon is made of moon cheese."
    (tmp_path / "p.yaml").write_text(POLICY)
    gw = make_gateway(policies_dir=str(tmp_path), reload_policies=False, upstreams=[
        {"name": "big", "base_url": big_server.url + "/v1", "models": ["big-*"]},
        {"name": "small", "base_url": upstream.base_url, "models": ["*"]}])
    client = openai.OpenAI(base_url=gw.base_url, api_key="k", max_retries=0)
    try:
        raw = client.chat.completions.with_raw_response.create(
            model="scripted-small", messages=[{"role": "user", "content": "What is the moon?"}])
    finally:
        client.close()
    assert raw.parse().choices[0].message.content == "The moon is rock."
    assert raw.headers["x-verity-verdict"] == "pass"
    small_models = [r["json"]["model"] for r in upstream.requests
                    if r["path"] == "/v1/chat/completions"]
    assert small_models == ["scripted-small", "scripted-small"]  # the answer + one attempt
    assert [r["json"]["model"] for r in big.requests] == ["big-model"]
