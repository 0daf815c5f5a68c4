"""The claims layer and seed 001's claim detector.

Recall per claim type is measured on ``tests/data/claims_corpus.jsonl`` (written for
this layer: entities, dates/durations, quantities, regulations, opinions, hedges and
tricky negatives) against seed 001's acceptance thresholds CA-13…CA-16.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from gateway.sources.context import GroundingContext
from gateway.layers.claims import ClaimsConfig, ClaimsLayer
from gateway.text.claims import classify, detect_claims, extract_entities
from gateway.layers.base import LayerResources, LayerResult, VerifyInput
from gateway.layers.registry import resolve

CORPUS = Path(__file__).resolve().parents[1] / "data" / "claims_corpus.jsonl"
GROUPS = {
    "named_entity": {"PERSON", "ORG", "LOCATION", "MISC"},
    "temporal": {"DATE"},
    "quantitative": {"NUMBER"},
    "regulatory": {"REGULATION"},
}
THRESHOLDS = {  # seed 001: CA-13, CA-14, CA-15, CA-16
    "named_entity": 0.95, "temporal": 0.90, "quantitative": 0.90, "regulatory": 1.0,
}


def corpus() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line]


def group_of(entity_type: str) -> str:
    return next(g for g, types in GROUPS.items() if entity_type in types)


def recall_by_group() -> dict[str, tuple[int, int, list[str]]]:
    stats: dict[str, tuple[int, int, list[str]]] = {g: (0, 0, []) for g in GROUPS}
    for row in corpus():
        found = extract_entities(row["text"])
        for ann in row["entities"]:
            group = group_of(ann["type"])
            hit = any(
                e.type in GROUPS[group]
                and (ann["text"].lower() in e.text.lower() or e.text.lower() in ann["text"].lower())
                for e in found
            )
            n, k, missed = stats[group]
            stats[group] = (n + 1, k + hit, missed if hit else [*missed, ann["text"]])
    return stats


def test_corpus_is_big_enough_and_covers_every_type() -> None:
    rows = corpus()
    assert len(rows) >= 60
    counts = {g: n for g, (n, _, _) in recall_by_group().items()}
    assert all(n >= 10 for n in counts.values()), counts
    assert sum(1 for r in rows if r["classification"] is None) >= 5  # negatives


@pytest.mark.parametrize("group", list(GROUPS))
def test_recall_meets_seed_thresholds(group: str) -> None:
    n, hits, missed = recall_by_group()[group]
    assert hits / n >= THRESHOLDS[group], f"{group}: {hits}/{n}, missed {missed}"


def test_negatives_yield_no_entities() -> None:
    for row in corpus():
        if row["classification"] is None:
            assert extract_entities(row["text"]) == [], row["text"]
            assert [c for c in detect_claims(row["text"]) if c.types] == [], row["text"]


def test_classification_accuracy() -> None:
    rows = [r for r in corpus() if r["classification"] is not None]
    wrong = [r["text"] for r in rows if classify(r["text"]) != r["classification"]]
    assert len(wrong) / len(rows) <= 0.10, wrong


def test_entity_types_for_clear_cases() -> None:
    types = {e.text: e.type for e in extract_entities(
        "Dr. Jane Goodall met officials of the European Central Bank in Paris on 3 May 2001 "
        "and cited DFARS 252.204-7012 and 12% growth.")}
    assert types == {
        "Dr. Jane Goodall": "PERSON", "European Central Bank": "ORG", "Paris": "LOCATION",
        "3 May 2001": "DATE", "DFARS 252.204-7012": "REGULATION", "12%": "NUMBER",
    }


def test_far_and_ear_words_are_not_regulations() -> None:
    assert extract_entities("It is far from the ear.") == []
    assert [e.type for e in extract_entities("See FAR 52.204-21.")] == ["REGULATION"]


def test_detect_claims_reports_types_and_classification() -> None:
    [c1, c2, c3] = detect_claims(
        "DFARS 252.204-7012 requires NIST SP 800-171. The merger could close in 2025. "
        "In my opinion, the new requirements are too strict.")
    assert c1.type == "regulatory" and c1.classification == "verifiable"
    assert c1.requires_verification
    assert c2.types == ("temporal",) and c2.classification == "hedged"
    assert not c2.requires_verification
    assert c3.type == "opinion" and c3.types == () and c3.classification == "opinion"


def run(answer: str, **config: object) -> LayerResult:
    layer = ClaimsLayer(ClaimsConfig.model_validate(config), LayerResources())
    return asyncio.run(layer.verify(VerifyInput(messages=[], response_text=answer,
                                                context=GroundingContext())))


def test_registry_resolves_claims() -> None:
    assert resolve("claims") is ClaimsLayer


def test_layer_scores_share_of_qualified_claims() -> None:
    r = run("The stadium holds 72,000 people. It may have cost $352 million.")
    assert r.score == 0.5 and r.passed  # default threshold 0.0 is informational
    assert r.details["by_classification"] == {"verifiable": 1, "hedged": 1, "opinion": 0}
    assert r.details["by_type"]["quantitative"] == 2
    assert "2 claim(s)" in r.explanation
    assert [e.status for e in r.evidence] == ["verifiable", "hedged"]


def test_layer_threshold_fails_assertive_answers() -> None:
    r = run("Barack Obama was born in Honolulu on August 4, 1961.", threshold=0.5)
    assert r.score == 0.0 and not r.passed and r.label == "assertive"
    assert r.failed_claims == ["Barack Obama was born in Honolulu on August 4, 1961."]


def test_layer_without_claims_scores_one() -> None:
    r = run("Sure, happy to help with that!", threshold=0.9)
    assert r.score == 1.0 and r.passed and r.label == "no_claims"


def test_ascii_fast_paths_agree_with_the_case_insensitive_patterns() -> None:
    import random

    from gateway.text import claims

    for fast, slow in ((claims._DURATION_ASCII, claims._DURATION),
                       (claims._OPINION_ASCII, claims._OPINION),
                       (claims._HEDGE_ASCII, claims._HEDGE)):
        assert fast.pattern == slow.pattern and not any(c.isupper() for c in fast.pattern)
    phrase = ("In my opinion THE BEST 3 Years ago Last WEEK may About 30 I Think DFARS "
              "Federal Acquisition nist Cmmc great Yesterday since Spring of 1999 21st Century "
              "reportedly nearly . ,")
    words = phrase.split()
    rng = random.Random(5)
    for _ in range(3000):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
        spans = [(m.start(), m.end()) for m in claims._DURATION.finditer(text)]
        assert [(e.start, e.end) for e in extract_entities(text) if e.type == "DATE"
                and (e.start, e.end) in spans] == [(e.start, e.end) for e in
                                                   extract_entities(text + " é")
                                                   if e.type == "DATE" and (e.start, e.end) in spans]
        assert claims.classify(text) == claims.classify(text + " é")
        assert claims._may_cite_regulation(text, text.lower()) is bool(
            claims._REGULATORY_HINT.search(text))
