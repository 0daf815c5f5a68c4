"""compliance.yaml end to end: a short, digit-free regulatory answer is assessed
``high`` (not ``low``), so ``citations-required`` runs and the uncited answer is
blocked (QA: it used to be delivered uncited)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import openai

from modes.conftest import StartGateway
from modes.support import verity_headers
from gateway.testing.scripted import Rule

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import ServedUpstream

COMPLIANCE = (Path(__file__).resolve().parents[2] / "policies" / "compliance.yaml") \
    .read_text(encoding="utf-8")
SHORT_ITAR = "Under ITAR, exporting defense articles requires a State Department license."
SHORT_PLAIN = "Sure, happy to help with that question."
ASK = [{"role": "user", "content": "Do I need a license to export defense articles?"}]
HEADERS = {"x-verity-profile": "compliance"}


def test_short_itar_answer_is_high_risk_and_blocked_uncited(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    assert len(SHORT_ITAR) < 100 and not any(c.isdigit() for c in SHORT_ITAR)
    upstream.app.rules = [Rule("license", SHORT_ITAR)]
    gw = start_gateway({"compliance": COMPLIANCE})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=ASK, extra_headers=HEADERS)
    r = raw.parse()
    h = verity_headers(raw.headers)
    assert h["x-verity-policy"] == "compliance"
    assert h["x-verity-verdict"] == "fail"
    assert h["x-verity-action"] == "block"
    content = r.choices[0].message.content or ""
    assert SHORT_ITAR not in content and "withheld" in content

    (rec,) = gw.audit(expect=1)
    assert rec["policy"] == "compliance"
    assert rec["risk_level"] == "high"
    assert rec["verdict"] == "fail"
    ran = {layer["key"] for layer in rec["layers"]}
    assert "citations-required" in ran


def test_short_plain_answer_stays_low_and_passes(
        start_gateway: StartGateway, upstream: ServedUpstream,
        make_client: Callable[..., openai.OpenAI]) -> None:
    upstream.app.rules = [Rule("license", SHORT_PLAIN)]
    gw = start_gateway({"compliance": COMPLIANCE})
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=ASK, extra_headers=HEADERS)
    assert raw.parse().choices[0].message.content == SHORT_PLAIN
    assert verity_headers(raw.headers)["x-verity-action"] == "pass"
    (rec,) = gw.audit(expect=1)
    assert rec["risk_level"] == "low"
    assert "citations-required" not in {layer["key"] for layer in rec["layers"]}

