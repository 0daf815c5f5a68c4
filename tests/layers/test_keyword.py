"""The keyword layer: literal words on word boundaries, /regex/ entries, require."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from gateway.sources.context import GroundingContext
from gateway.layers.keyword import KeywordConfig, KeywordLayer
from gateway.layers.base import LayerResources, LayerResult, VerifyInput
from gateway.layers.registry import resolve


def run(answer: str, **config: object) -> LayerResult:
    layer = KeywordLayer(KeywordConfig.model_validate(config), LayerResources())
    inp = VerifyInput(messages=[], response_text=answer, context=GroundingContext())
    return asyncio.run(layer.verify(inp))


def test_registry_resolves_keyword() -> None:
    assert resolve("keyword") is KeywordLayer


def test_blocked_word_fails_with_evidence() -> None:
    r = run("Your SSN is on file.", block=["ssn"])
    assert not r.passed and r.score == 0.0 and r.label == "blocked"
    assert [e.text for e in r.evidence] == ["SSN"]
    assert r.details["blocked"] == ['block[0]'] and r.details["matches"] == [1]


def test_literal_matches_on_word_boundaries_only() -> None:
    assert run("This lesson is fine.", block=["ssn"]).passed


def test_phrase_tolerates_whitespace_runs() -> None:
    assert not run("Please do not\nshare that.", block=["do not share"]).passed


def test_case_sensitive_flag() -> None:
    assert run("Secret sauce", block=["secret"], case_sensitive=True).passed
    assert not run("Secret sauce", block=["secret"]).passed


def test_regex_entry() -> None:
    r = run("key AKIAABCDEFGHIJKLMNOP here", block=[r"/\bAKIA[0-9A-Z]{16}\b/"],
            case_sensitive=True)
    assert not r.passed and r.evidence[0].text == "AKIAABCDEFGHIJKLMNOP"


def test_require_missing_and_present() -> None:
    r = run("Hello there.", require=["disclaimer", "hello"])
    assert not r.passed and r.label == "missing"
    assert r.details["missing"] == ['require[0] "disclaimer"']
    assert run("Hello. Disclaimer: none.", require=["disclaimer", "hello"]).passed


def test_no_entries_is_skipped_and_neutral() -> None:
    r = run("anything")
    assert r.skipped and r.passed and r.score == 0.5


def test_bad_regex_and_unknown_key_rejected_at_load() -> None:
    with pytest.raises(ValidationError, match="invalid regex"):
        KeywordConfig.model_validate({"block": ["/([/"]})
    with pytest.raises(ValidationError):
        KeywordConfig.model_validate({"blocks": ["x"]})


def test_explanation_names_the_rule_never_the_matched_text() -> None:
    """The explanation reaches the client ({reasons}), traces and the audit: it names
    the rule as the policy wrote it; the matched text stays in the evidence only."""
    answer = "Use key AKIAQWERTYUIOPASDFGH with password: Hunter2xyz, again AKIAQWERTYUIOPASDFGZ"
    r = run(answer, block=[r"/\bAKIA[0-9A-Z]{16}\b/", r"/password: \S+/", "nothing"],
            case_sensitive=True)
    assert not r.passed and r.label == "blocked" and r.failed_claims == []
    assert r.explanation == (r"blocked by block[0] (2 matches), "
                             r"block[1] (1 match)")
    exported = repr((r.explanation, r.label, r.details, r.failed_claims))
    for secret in ("AKIAQWERTYUIOPASDFGH", "AKIAQWERTYUIOPASDFGZ", "Hunter2xyz"):
        assert secret not in exported
    assert [e.text for e in r.evidence] == ["AKIAQWERTYUIOPASDFGH", "AKIAQWERTYUIOPASDFGZ",
                                            "password: Hunter2xyz,"]


def test_a_literal_block_entry_is_named_by_position_not_by_its_text() -> None:
    """A literal entry is the very text it blocks: naming the rule "as written" put
    'Project Falcon' into the client's 422 through {reasons} (review)."""
    r = run("The Project Falcon budget is final.",
            block=["Project Falcon", r"/\bF-\d{3}\b/"], require=["budget"])
    assert r.explanation == "blocked by block[0] (1 match)"
    assert "Falcon" not in r.explanation + str(r.details) + (r.label or "")
    missing = run("Nothing here.", require=["budget"])
    assert 'require[0] "budget"' in missing.explanation  # what is missing may be named
