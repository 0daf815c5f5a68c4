"""The citations layer: extraction forms, resolution order, support checks, binding."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from gateway.sources.context import ContextSpec, GroundingContext, extract_context
from gateway.sources.corpus import Corpus, SourceMeta
from gateway.layers.citations import CitationsConfig, CitationsLayer, extract_pairs
from gateway.scoring.binding import repair_feedback
from gateway.layers.base import LayerResources, LayerResult, VerifyInput
from gateway.layers.registry import resolve

SUNDARA = {
    "Sundara 54.30": "Hanuman set fire to the city of Lanka with his burning tail.",
    "Sundara 65.1": "Hanuman returned to Rama and reported that he had found Sita.",
}
DOCS = (
    '<document id="policy-2024">The policy covers flood damage up to $50,000 per year. '
    "Earthquake damage is excluded.</document>\n"
    '<document id="annex" title="Claims Annex">Claims must be filed within 30 days '
    "of the incident.</document>"
)


def run(answer: str, *, docs: str = "", corpus: Mapping[str, str] | None = None,
        request_corpus: Mapping[str, str] | None = None, **config: Any) -> LayerResult:
    messages = [{"role": "system", "content": docs}] if docs else []
    messages.append({"role": "user", "content": "question"})
    ctx = extract_context(messages, ContextSpec(sources=("blocks",)), request_corpus)
    layer = CitationsLayer(CitationsConfig.model_validate(config),
                           LayerResources(corpus=corpus or {}))
    return asyncio.run(layer.verify(VerifyInput(messages=messages, response_text=answer,
                                                context=ctx)))


def test_registry_resolves_citations() -> None:
    assert resolve("citations") is CitationsLayer


# -- extraction ----------------------------------------------------------------------

def test_extracts_seed_003_name_number_pairs() -> None:
    pairs = extract_pairs("Hanuman burned Lanka [Sundara 54.30]. He went back to Rama "
                          "[Sundara 65.1][Sundara 66.2].")
    assert [(p.claim, p.ref) for p in pairs] == [
        ("Hanuman burned Lanka", "Sundara 54.30"),
        ("He went back to Rama", "Sundara 65.1"),
        ("He went back to Rama", "Sundara 66.2"),
    ]


def test_extracts_numeric_lists_and_ranges() -> None:
    refs = [p.ref for p in extract_pairs("Floods are covered [1, 3] and more [4-6].")]
    assert refs == ["#1", "#3", "#4", "#5", "#6"]


def test_extracts_labelled_sources_in_brackets_and_parens() -> None:
    pairs = extract_pairs("Floods are covered (Source: policy-2024). Quakes are not "
                          "[Source: policy-2024; annex].")
    assert [(p.claim, p.ref) for p in pairs] == [
        ("Floods are covered", "policy-2024"),
        ("Quakes are not", "policy-2024"), ("Quakes are not", "annex")]


def test_footnotes_resolve_to_their_definitions() -> None:
    pairs = extract_pairs("The tower is 330 m tall.[^1] It opened in 1889.[^2]\n\n"
                          "[^1]: eiffel-facts, official site")
    assert [(p.claim, p.ref) for p in pairs] == [
        ("The tower is 330 m tall.", "eiffel-facts, official site"),
        ("It opened in 1889.", "[^2]")]  # no definition: resolves nowhere


def test_numbered_references_section_maps_numeric_markers() -> None:
    pairs = extract_pairs("Rates rose in May [2].\n\nReferences:\n1. bls\n2. fed-2023 — Fed")
    assert [(p.claim, p.ref) for p in pairs] == [("Rates rose in May", "fed-2023 — Fed")]


def test_trailing_sources_list_covers_checkable_sentences() -> None:
    answer = "Sure! Paris is the capital of France. It has 2.1 million people.\n\n" \
             "**Sources:**\n- wiki-paris\n- insee"
    pairs = extract_pairs(answer)
    assert {p.claim for p in pairs} == {"Paris is the capital of France.",
                                        "It has 2.1 million people."}
    assert {p.ref for p in pairs} == {"wiki-paris", "insee"}
    assert extract_pairs(answer, sources_list_covers_answer=False) == []


def test_code_and_links_are_not_citations() -> None:
    pairs = extract_pairs("Use `xs[1]` here.\n```py\nys[2, 3]\n```\nSee [the docs](http://x).")
    assert [p for p in pairs if p.explicit] == []


# -- several markers in one sentence -------------------------------------------------
#
# A marker after an earlier one in its sentence cites the clause since that marker: the
# text before it is the earlier citation's to back (QA: "… opened in 1932 [a] and carries
# eight lanes [b]" checked "1932" against b and failed a correct answer).

BRIDGE = (
    '<document id="a">The Harbour Bridge took eight years to build and opened in 1932 '
    "to great fanfare.</document>\n"
    '<document id="b">Today it carries eight lanes of traffic, two railway lines and a '
    "separate cycle path.</document>")


def test_each_marker_cites_the_clause_since_the_previous_one() -> None:
    pairs = extract_pairs("The bridge opened in 1932 [a] and carries eight lanes [b].")
    assert [(p.claim, p.ref, p.sentence) for p in pairs] == [
        ("The bridge opened in 1932", "a", ""),
        ("and carries eight lanes", "b", "The bridge opened in 1932 and carries eight lanes")]
    # Commas and semicolons at clause ends are not part of either claim.
    pairs = extract_pairs("The bridge opened in 1932 [a], carries eight lanes of traffic [b]; "
                          "it also has a separate cycle path [b].")
    assert [(p.claim, p.ref) for p in pairs] == [
        ("The bridge opened in 1932", "a"), ("carries eight lanes of traffic", "b"),
        ("it also has a separate cycle path", "b")]
    assert pairs[2].sentence == ("The bridge opened in 1932, carries eight lanes of traffic; "
                                 "it also has a separate cycle path")


def test_a_clause_too_short_to_check_joins_the_previous_claim() -> None:
    # "and still stands": one content word, nothing to check on its own.
    pairs = extract_pairs("The bridge opened in 1932 [a] and still stands [b].")
    assert [p.claim for p in pairs] == ["The bridge opened in 1932",
                                        "The bridge opened in 1932 and still stands"]
    pairs = extract_pairs("The bridge opened in 1932 [a], carries eight lanes of traffic [b]; "
                          "it has a cycleway [b].")
    assert [p.claim for p in pairs][1:] == [
        "carries eight lanes of traffic", "carries eight lanes of traffic; it has a cycleway"]


def test_two_correct_citations_in_one_sentence_both_pass() -> None:
    r = run("The bridge opened in 1932 [a] and carries eight lanes [b].", docs=BRIDGE)
    assert r.passed and r.score == 1.0 and r.label == "supported" and not r.failed_claims
    assert [(e.status, e.source_id) for e in r.evidence] == [("supported", "a"),
                                                             ("supported", "b")]
    assert r.details["pairs"][1]["sentence"] == \
        "The bridge opened in 1932 and carries eight lanes"  # the subject, for a judge


def test_one_wrong_citation_in_a_sentence_is_flagged_alone() -> None:
    year = run("The bridge opened in 1937 [a] and carries eight lanes [b].", docs=BRIDGE)
    assert year.score == 0.5 and not year.passed
    assert year.failed_claims == ["The bridge opened in 1937"]
    assert "not in a: 1937" in year.evidence[0].reason
    assert year.evidence[1].status == "supported"
    tracks = run("The bridge opened in 1932 [a] and carries eight monorail tracks [b].",
                 docs=BRIDGE)
    assert tracks.failed_claims == ["and carries eight monorail tracks"]
    assert [e.status for e in tracks.evidence] == ["supported", "unsupported"]
    lanes = run("The bridge opened in 1932 [a] and carries 12 lanes [b].", docs=BRIDGE)
    assert lanes.failed_claims == ["and carries 12 lanes"]  # the clause's own number
    assert "not in b: 12" in lanes.evidence[1].reason
    swapped = run("The bridge opened in 1932 [b] and carries eight lanes [a].", docs=BRIDGE)
    assert swapped.score == 0.0 and len(swapped.failed_claims) == 2


def test_clauses_ending_in_commas_and_semicolons() -> None:
    ok = run("The bridge opened in 1932 [a], carries eight lanes of traffic [b]; it also has "
             "a separate cycle path [b].", docs=BRIDGE)
    assert ok.passed and ok.details["total"] == 3
    bad = run("The bridge opened in 1932 [a], carries eight lanes of traffic [b]; it also has "
              "two monorail tracks [b].", docs=BRIDGE)
    assert bad.failed_claims == ["it also has two monorail tracks"]
    assert bad.details["supported"] == 2


def test_text_after_the_last_marker_of_a_sentence_is_not_cited() -> None:
    answer = ("The bridge opened in 1932 [a] and carries twelve monorail lines. "
              "It carries eight lanes [b].")
    assert [(p.claim, p.ref) for p in extract_pairs(answer)] == [
        ("The bridge opened in 1932", "a"), ("It carries eight lanes", "b")]
    r = run(answer, docs=BRIDGE)
    assert r.passed and r.details["total"] == 2  # uncited text is grounding's to check


# -- the layer -----------------------------------------------------------------------

def test_supported_citations_pass_and_expose_pairs() -> None:
    r = run("Hanuman set fire to Lanka [Sundara 54.30]. Hanuman found Sita and reported "
            "to Rama [Sundara 65.1].", corpus=SUNDARA)
    assert r.passed and r.score == 1.0 and r.label == "supported" and not r.failed_claims
    assert r.details["pairs"][0] == {"claim": "Hanuman set fire to Lanka",
                                     "sentence": "Hanuman set fire to Lanka",
                                     "citation": "[Sundara 54.30]", "source_id": "Sundara 54.30",
                                     "source_text": SUNDARA["Sundara 54.30"]}
    assert [e.status for e in r.evidence] == ["supported", "supported"]


def test_seed_003_overclaiming_is_flagged() -> None:
    # The cited verse says Hanuman burned Lanka; it says nothing of Ravana's defeat.
    r = run("Hanuman defeated Ravana in single combat [Sundara 54.30].", corpus=SUNDARA)
    assert not r.passed and r.score == 0.0 and r.label == "unsupported"
    assert r.failed_claims == ["Hanuman defeated Ravana in single combat"]
    assert "ravana" in r.evidence[0].reason and "1/5 content words" in r.evidence[0].reason


def test_wrong_entity_fails_even_with_high_word_overlap() -> None:
    # 5 of 6 content words are in the verse; the actor is not.
    r = run("The city of Lanka was set on fire by Ravana with his tail [Sundara 54.30].",
            corpus=SUNDARA)
    assert not r.passed and "not in Sundara 54.30: Ravana" in r.evidence[0].reason
    assert r.evidence[0].score == pytest.approx(5 / 6 * 0.5)


def test_fabricated_citation_is_unresolved() -> None:
    r = run("Hanuman leapt across the ocean [Kishkindha 67.1].", corpus=SUNDARA)
    assert not r.passed and r.label == "unresolved"
    assert r.details["unresolved"] == 1 and r.details["pairs"][0]["source_id"] is None
    assert "resolves to no known source" in r.evidence[0].reason


def test_wrong_number_in_cited_document_fails() -> None:
    ok = run("Flood damage is covered up to $50,000 per year [1].", docs=DOCS)
    bad = run("Flood damage is covered up to $80,000 per year [1].", docs=DOCS)
    assert ok.passed
    assert not bad.passed and "$80,000" in bad.evidence[0].reason


def test_claim_checked_against_cited_document_only() -> None:
    # True in document 2, but the answer cites document 1.
    r = run("Claims must be filed within 30 days of the incident [1].", docs=DOCS)
    assert not r.passed
    assert run("Claims must be filed within 30 days of the incident [2].", docs=DOCS).passed


def test_resolution_by_block_id_title_and_normalized_name() -> None:
    for marker in ("[Source: annex]", "(Source: Claims Annex)", "[ANNEX]"):
        r = run(f"Claims must be filed within 30 days {marker}.", docs=DOCS)
        assert r.passed, marker
        assert r.details["pairs"][0]["source_id"] == "annex"
    r = run("Hanuman set fire to Lanka [sundara_54.30].", corpus=SUNDARA)
    assert r.passed and r.details["pairs"][0]["source_id"] == "Sundara 54.30"


def test_request_documents_win_over_corpus_and_request_corpus_over_resources() -> None:
    docs = '<document id="Sundara 54.30">Hanuman rested in a garden.</document>'
    r = run("Hanuman set fire to Lanka [Sundara 54.30].", docs=docs, corpus=SUNDARA)
    assert not r.passed  # the request's own document with that id is the one checked
    r = run("Hanuman set fire to Lanka [Sundara 54.30].", corpus={"x": "y"},
            request_corpus=SUNDARA)
    assert r.passed


def test_use_corpus_false_ignores_corpus() -> None:
    assert not run("Hanuman set fire to Lanka [Sundara 54.30].", corpus=SUNDARA,
                   use_corpus=False).passed


def test_unknown_bracket_words_are_not_citations() -> None:
    r = run("The answer [sic] is in the text.", docs=DOCS)
    assert r.skipped and r.passed and r.score == 0.5


def test_no_citations_skipped_or_required() -> None:
    r = run("Flood damage is covered.", docs=DOCS)
    assert r.skipped and r.passed
    r = run("Flood damage is covered up to a limit.", docs=DOCS, require_citations=True)
    assert not r.passed and r.score == 0.0 and r.label == "uncited"
    assert r.failed_claims == ["Flood damage is covered up to a limit."]


def test_min_supported_fraction() -> None:
    answer = ("Hanuman set fire to Lanka [Sundara 54.30]. "
              "Hanuman defeated Ravana in single combat [Sundara 54.30].")
    r = run(answer, corpus=SUNDARA)
    assert r.score == 0.5 and not r.passed
    assert run(answer, corpus=SUNDARA, min_supported=0.5).passed


def test_binding_confidence_uses_corpus_metadata() -> None:
    meta = {"gov": SourceMeta(authority="government", published=None),
            "blog": SourceMeta(authority="blog")}
    corpus = Corpus(texts={"gov": "Flood damage is covered by the federal program.",
                           "blog": "Flood damage is covered by the federal program."},
                    meta=meta)
    gov = run("Flood damage is covered by the federal program [gov].", corpus=corpus)
    blog = run("Flood damage is covered by the federal program [blog].", corpus=corpus)
    # relevance 1.0 x authority x recency 0.5 (undated) / sqrt(1)
    assert gov.details["claims"][0]["confidence"] == pytest.approx(0.5)
    assert blog.details["claims"][0]["confidence"] == pytest.approx(0.15)
    assert blog.passed  # confidence is reported, not enforced, by default...
    strict = run("Flood damage is covered by the federal program [blog].", corpus=corpus,
                 min_confidence=0.3)
    assert not strict.passed and strict.details["claims"][0]["status"] == "low_confidence"


def test_long_source_text_is_cut_to_best_passage() -> None:
    filler = " ".join(f"Sentence number {i} talks about unrelated weather." for i in range(60))
    text = filler + " Hanuman set fire to Lanka with his tail. " + filler
    r = run("Hanuman set fire to Lanka [epic].", corpus={"epic": text})
    assert r.passed
    assert r.details["pairs"][0]["source_text"] == "Hanuman set fire to Lanka with his tail."


def test_failed_claims_feed_repair_feedback() -> None:
    r = run("Hanuman defeated Ravana in single combat [Sundara 54.30].", corpus=SUNDARA)
    assert '"Hanuman defeated Ravana in single combat"' in repair_feedback(r.failed_claims)


def test_context_memo_is_used() -> None:
    ctx = GroundingContext()
    layer = CitationsLayer(CitationsConfig(), LayerResources(corpus=SUNDARA))
    inp = VerifyInput(messages=[], response_text="Hanuman set fire to Lanka [Sundara 54.30].",
                      context=ctx)
    first = asyncio.run(layer.verify(inp))
    assert any(k.startswith("citations.") for k in ctx._cache)
    assert asyncio.run(layer.verify(inp)).score == first.score


def test_two_configs_on_one_request_do_not_share_memoized_results() -> None:
    """Two ``citations`` entries of one policy see the same request context (and its
    memo): each must still judge by its own config, whichever runs first."""
    answer = "Hanuman set fire to the city of Lanka with a torch [Sundara 54.30]."
    ctx = GroundingContext()
    inp = VerifyInput(messages=[], response_text=answer, context=ctx)

    def verify(**config: Any) -> LayerResult:
        layer = CitationsLayer(CitationsConfig.model_validate(config),
                               LayerResources(corpus=SUNDARA))
        return asyncio.run(layer.verify(inp))

    strict, lenient = verify(min_overlap=0.95), verify(min_overlap=0.6)
    assert (strict.passed, lenient.passed) == (False, True)
    no_corpus, with_corpus = verify(use_corpus=False), verify(use_corpus=True)
    assert (no_corpus.label, with_corpus.label) == ("unresolved", "supported")


def test_step_and_figure_brackets_are_not_fabricated_citations() -> None:
    """``[Step 2]`` has the shape of ``[Smith 2020]`` but names a step, not a source: it
    counts only when it names a known source (like ``[annex]``), never as unresolved."""
    r = run("Open the valve and wait ten minutes [Step 2]. See the chart [Figure 3].",
            docs=DOCS)
    assert r.skipped and r.passed and r.label == "uncited"
    assert [p.explicit for p in extract_pairs("Hanuman burned Lanka [Sundara 54.30] "
                                              "and wrote it down [Smith 2020].")] == [True, True]
    named = run("Claims must be filed within 30 days [Step 2].",
                docs='<document id="step-2">Claims must be filed within 30 days.</document>')
    assert named.passed and named.label == "supported"


def test_claim_text_is_bounded_before_its_marker() -> None:
    """One endless sentence with many markers: each claim reaches back a bounded
    distance (MAX_CLAIM_CHARS), so extraction work stays linear in the answer."""
    from gateway.layers._citation_pairs import MAX_CLAIM_CHARS, extract_pairs

    answer = "The tower " + " ".join(f"x [{i % 9 + 1}]" for i in range(600))
    pairs = extract_pairs(answer)
    assert len(pairs) == 600
    assert max(len(p.claim) for p in pairs) <= MAX_CLAIM_CHARS
    assert pairs[0].claim.startswith("The tower")
