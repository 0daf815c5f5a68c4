"""The shadow sample's metrics, exported over OTLP: how jobs ended, how long they waited
in the queue, and the verified share (a gateway whose jobs run in a worker process)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from otlp_receiver import OTLPReceiver

from gateway.telemetry import create_telemetry
from serving import GatewayFactory

SHADOW = """\
mode: shadow
default: true
layers: [{name: keyword, config: {block: [nothing-matches-this]}}]
"""


@pytest.fixture
def otlp_receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as receiver:
        yield receiver


def test_settled_jobs_queue_wait_and_verified_share_are_exported(
        make_gateway: GatewayFactory, otlp_receiver: OTLPReceiver, tmp_path: Path,
        make_client: Callable[..., openai.OpenAI], wait_until: Callable[..., Any]) -> None:
    (tmp_path / "shadow.yaml").write_text(SHADOW, encoding="utf-8")
    gw = make_gateway(policies_dir=str(tmp_path), reload_policies=False,
                      readyz_detail="public", pool={"workers": 1},
                      audit={"path": str(tmp_path / "audit.jsonl")},
                      app_kwargs={"telemetry": create_telemetry(otlp_receiver.environ())})
    client = make_client(gw)
    for _ in range(2):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    wait_until(lambda: len((tmp_path / "audit.jsonl").read_text().splitlines()) == 2
               if (tmp_path / "audit.jsonl").exists() else False, timeout=60.0,
               message="two shadow records")
    gw.stop()  # the lifespan's shutdown flushes the metrics

    settled = otlp_receiver.last_metric("verity.shadow.settled")
    by_result = {p.attributes["verity.shadow.result"]: p.value for p in settled.points}
    assert by_result == {"verified": 2}
    assert {p.attributes["verity.shadow.kind"] for p in settled.points} == {"shadow"}
    wait = otlp_receiver.last_metric("verity.shadow.queue.wait")
    assert wait.kind == "histogram" and wait.unit == "s"
    assert sum(p.count or 0 for p in wait.points) == 2
    ratio = otlp_receiver.last_metric("verity.shadow.verified_ratio")
    assert [p.value for p in ratio.points] == [1.0]
    workers = otlp_receiver.last_metric("verity.workers")
    assert [p.value for p in workers.points] == [1.0]
