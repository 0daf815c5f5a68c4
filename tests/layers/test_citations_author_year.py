"""The citations layer on author–year citations: ``(Smith, 2020)``, ``(Smith et al.,
2020)``, ``(Smith & Jones, 2020; Lee, 2019)``, narrative ``Smith et al. (2020) found …``;
how they resolve (ids, author/year attributes, titles, first lines, the corpus) and
what an unresolved one does (``unresolved_author_year``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai
import pytest
from serving import ServedUpstream

from gateway.sources.context import ContextSpec, extract_context
from gateway.sources.corpus import Corpus, SourceMeta
from gateway.layers._author_year import ay_key, parse_author_year
from gateway.layers._citation_pairs import doc_keys
from gateway.layers.citations import CitationsConfig, CitationsLayer, extract_pairs
from gateway.testing.scripted import Rule
from gateway.layers.base import LayerResources, LayerResult, VerifyInput

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import GatewayFactory

DOCS = (
    '<document id="smith2020">Coastal flooding rose by 12% between 2000 and 2019 in the '
    "studied towns. Sea walls reduced the damage.</document>\n"
    '<document id="doc-b" title="Lee, K. and Wu, H. (2019). Drought and crops">Drought cut '
    "maize yields in Kenya by a third.</document>\n"
    '<document id="doc-c">Garcia, M., Chen, L. (2018). Urban heat islands.\n'
    "Cities are warmer than the surrounding countryside at night.</document>\n"
    '<document id="d4" author="Okafor, N." year="2021">Mobile money raised household '
    "savings in rural Nigeria.</document>"
)
PLAIN = '<document id="notes">Cities are warmer than the surrounding countryside at night.</document>'


def run(answer: str, *, docs: str = "", corpus: Mapping[str, str] | None = None,
        **config: Any) -> LayerResult:
    messages = [{"role": "system", "content": docs}] if docs else []
    messages.append({"role": "user", "content": "question"})
    ctx = extract_context(messages, ContextSpec(sources=("blocks",)))
    layer = CitationsLayer(CitationsConfig.model_validate(config),
                           LayerResources(corpus=corpus or {}))
    return asyncio.run(layer.verify(VerifyInput(messages=messages, response_text=answer,
                                                context=ctx)))


def pairs(answer: str) -> list[tuple[str, str]]:
    return [(p.claim, p.ref) for p in extract_pairs(answer)]


# -- extraction ----------------------------------------------------------------------

def test_parenthetical_forms() -> None:
    assert pairs("Floods rose in coastal towns (Smith, 2020).") == [
        ("Floods rose in coastal towns", "Smith, 2020")]
    assert pairs("Floods rose in coastal towns (Smith et al., 2020).") == [
        ("Floods rose in coastal towns", "Smith et al., 2020")]
    assert pairs("Floods rose in coastal towns (Smith & Jones, 2020).") == [
        ("Floods rose in coastal towns", "Smith & Jones, 2020")]
    assert pairs("Floods rose in coastal towns (Smith and Jones 2020; Lee, 2019).") == [
        ("Floods rose in coastal towns", "Smith and Jones, 2020"),
        ("Floods rose in coastal towns", "Lee, 2019")]
    assert [r for _, r in pairs("Floods rose (see also van der Berg, 2018a, 2019, p. 4).")] \
        == ["van der Berg, 2018a", "van der Berg, 2019"]
    assert [r for _, r in pairs("Floods rose (e.g., Smith, Lee, & Wu, 2020: 12-14).")] \
        == ["Smith, Lee, & Wu, 2020"]
    assert [r for _, r in pairs("WHO declared a pandemic (World Health Organization, 2020).")] \
        == ["World Health Organization, 2020"]
    p = extract_pairs("Floods rose in coastal towns (Smith, 2020).")[0]
    assert p.author_year and not p.explicit and p.citation == "(Smith, 2020)"


def test_narrative_forms() -> None:
    assert pairs("Smith et al. (2020) found that floods rose in coastal towns.") == [
        ("floods rose in coastal towns.", "Smith et al., 2020")]
    assert pairs("Smith and Jones (2020) reported rising floods in coastal towns.") == [
        ("rising floods in coastal towns.", "Smith and Jones, 2020")]
    assert pairs("According to Smith (2020), floods rose in many coastal towns.") == [
        ("floods rose in many coastal towns.", "Smith, 2020")]
    # too little after the citation: the sentence around it is the claim
    assert pairs("Coastal floods rose sharply, as Smith (2020) showed.") == [
        ("Coastal floods rose sharply", "Smith, 2020")]
    assert pairs("Smith (2020) agrees.") == []  # nothing checkable is claimed


def test_bracketed_author_year_is_a_plain_marker() -> None:
    p = extract_pairs("Deep nets predict floods [Smith et al., 2020].")[0]
    assert (p.ref, p.explicit, p.author_year) == ("Smith et al., 2020", True, False)


def test_author_year_markers_are_cut_out_of_neighbouring_claims() -> None:
    got = pairs("Smith et al. (2020) found that sea walls reduced the damage [1].")
    assert got == [("sea walls reduced the damage", "Smith et al., 2020"),
                   ("found that sea walls reduced the damage", "#1")]
    # "et al." does not end a sentence for the claim of a later marker
    assert pairs("Floods rose as Smith et al. also saw in 2020 [2].")[0][0] == \
        "Floods rose as Smith et al. also saw in 2020"


@pytest.mark.parametrize("text", [
    "Sales rose sharply last year (2020).",
    "The answer is given in the table (see above).",
    "We relied on the latest figures (e.g., 2019 data).",
    "Cases rose quickly in the spring (COVID-19, 2020).",
    "The tower opened to visitors (Paris, 1889).",
    "It rained every single day (May 2020).",
    "It rained every single day (In 2019).",
    "Open the second valve slowly (Step 2020).",
    "Install the new release first (Version 2020).",
    "The budget grew again (FY 2021).",
    "The survey covered adults (n = 2020).",
    "Prices doubled over the decade (1990–2000).",
    "The Tokyo Olympics (2020) were postponed to the next year.",
    "Windows (2020) crashed on many home computers.",
    "The law (Section 230, 1996) shields platforms.",
    "Use `f(Smith, 2020)` in the code.",
])
def test_ordinary_parentheses_are_not_citations(text: str) -> None:
    assert extract_pairs(text) == []
    r = run(text, docs=DOCS, unresolved_author_year="flag")
    assert r.skipped and r.label == "uncited"


def test_parse_author_year() -> None:
    assert parse_author_year("Smith et al., 2020b") == ("Smith", None, "2020b", True)
    assert parse_author_year("Smith & Jones, 2020") == ("Smith", "Jones", "2020", False)
    assert parse_author_year("Sundara 54.30") is None


# -- resolution ----------------------------------------------------------------------

@pytest.mark.parametrize(("answer", "source"), [
    ("Coastal flooding rose by 12% in the studied towns (Smith, 2020).", "smith2020"),
    ("Coastal flooding rose by 12% in the studied towns (Smith et al., 2020).", "smith2020"),
    ("Smith (2020) found that coastal flooding rose by 12% in the studied towns.", "smith2020"),
    ("Drought cut maize yields in Kenya by a third (Lee & Wu, 2019).", "doc-b"),  # title
    ("Drought cut maize yields in Kenya by a third (Wu, 2019).", "doc-b"),  # any author
    ("Cities are warmer than the countryside at night (Garcia et al., 2018).", "doc-c"),
    ("Mobile money raised household savings in rural Nigeria (Okafor, 2021).", "d4"),
])
def test_resolves_by_id_title_first_line_and_attributes(answer: str, source: str) -> None:
    r = run(answer, docs=DOCS)
    assert r.passed and r.label == "supported", r.explanation
    assert r.details["pairs"][0]["source_id"] == source


@pytest.mark.parametrize("doc_id", ["smith2020", "Smith 2020", "smith-2020", "smith_2020",
                                    "smith2020flood", "Smith-et-al-2020", "smith2020a"])
def test_id_forms(doc_id: str) -> None:
    docs = f'<document id="{doc_id}">Sea walls reduced the flood damage.</document>'
    r = run("Sea walls reduced the flood damage (Smith et al., 2020).", docs=docs)
    assert r.passed and r.details["pairs"][0]["source_id"] == doc_id


def test_wrong_year_or_author_does_not_resolve() -> None:
    r = run("Sea walls reduced the damage in coastal towns (Smith, 2019).", docs=DOCS)
    assert r.label == "unresolved" and r.details["pairs"][0]["source_id"] is None
    r = run("Sea walls reduced the damage in coastal towns (Jones, 2020).", docs=DOCS)
    assert r.label == "unresolved"


def test_id_match_beats_a_first_line_naming_the_author() -> None:
    docs = ('<document id="review">Smith (2020) is reviewed here. Nothing about walls.</document>'
            '<document id="smith2020">Sea walls reduced the flood damage.</document>')
    keys = doc_keys(extract_context([{"role": "system", "content": docs}],
                                    ContextSpec(sources=("blocks",))).documents)
    assert keys[ay_key("Smith", "2020")] == 1  # the id, though the first document names Smith
    r = run("Sea walls reduced the flood damage (Smith, 2020).", docs=docs)
    assert r.passed and r.details["pairs"][0]["source_id"] == "smith2020"


def test_resolves_against_the_corpus_by_id_and_title() -> None:
    corpus = Corpus(texts={"c1": "Sea walls reduced the flood damage.",
                           "lee2019": "Drought cut maize yields in Kenya by a third."},
                    meta={"c1": SourceMeta(title="Smith, J. (2020). Coastal defences"),
                          "lee2019": SourceMeta()})
    r = run("Sea walls reduced the flood damage (Smith, 2020). Drought cut maize yields "
            "in Kenya by a third (Lee, 2019).", corpus=corpus)
    assert r.passed and [p["source_id"] for p in r.details["pairs"]] == ["c1", "lee2019"]
    plain = {"notes": "Smith, J. (2020). Coastal defences.\nSea walls reduced the flood damage."}
    assert run("Sea walls reduced the flood damage (Smith, 2020).", corpus=plain).passed


# -- checking ------------------------------------------------------------------------

def test_cited_source_that_does_not_back_the_claim_is_flagged() -> None:
    r = run("Sea walls doubled the damage and flooded Kenya in 2015 (Smith et al., 2020).",
            docs=DOCS)
    assert not r.passed and r.label == "unsupported"
    assert r.details["pairs"][0]["source_id"] == "smith2020"
    r = run("Smith et al. (2020) found that drought cut maize yields in Kenya by a third.",
            docs=DOCS)
    assert not r.passed and r.label == "unsupported"  # that is Lee & Wu (2019)


def test_several_citations_one_supports() -> None:
    r = run("Drought cut maize yields in Kenya by a third (Smith, 2020; Lee & Wu, 2019).",
            docs=DOCS)
    assert r.passed and r.details["claims"][0]["citations"] == [
        "(Smith, 2020; Lee & Wu, 2019)", "(Smith, 2020; Lee & Wu, 2019)"]


# -- unresolved author–year citations ------------------------------------------------

def test_unresolved_without_author_year_sources_is_ignored_by_default() -> None:
    """General literature the gateway holds no copy of is not a fabricated reference."""
    r = run("Cities are warmer at night than the countryside (Oke, 1982).", docs=PLAIN)
    assert r.skipped and r.passed and r.label == "uncited"
    r = run("Cities are warmer at night than the countryside (Oke, 1982).")
    assert r.skipped and r.passed


def test_unresolved_is_flagged_when_author_year_sources_were_supplied() -> None:
    r = run("Cities are warmer at night than the countryside (Oke, 1982).", docs=DOCS)
    assert not r.passed and r.label == "unresolved" and r.details["unresolved"] == 1
    assert "resolves to no known source" in r.evidence[0].reason


def test_unresolved_is_flagged_when_a_sibling_resolved() -> None:
    answer = ("Cities are warmer than the surrounding countryside at night (Climate Atlas, "
              "2020). Parks cool the streets around them by two degrees (Oke, 1982).")
    docs = '<document id="n" title="Climate Atlas (2020)">Cities are warmer than the ' \
           'surrounding countryside at night.</document>'
    assert run(answer.split(". ")[1], docs=docs).skipped  # alone: nothing says it is fabricated
    r = run(answer, docs=docs)
    assert r.label == "unresolved" and r.score == 0.5
    assert r.failed_claims == ["Parks cool the streets around them by two degrees"]


def test_unresolved_author_year_modes() -> None:
    answer = "Cities are warmer at night than the countryside (Oke, 1982)."
    assert run(answer, docs=PLAIN, unresolved_author_year="flag").label == "unresolved"
    assert run(answer, docs=DOCS, unresolved_author_year="ignore").skipped
    # bracketed author–year is a plain marker: unresolved like [Smith 2020] and [1]
    assert run("Cities are warmer at night than the countryside [Oke, 1982].",
               docs=PLAIN).label == "unresolved"


def test_inline_author_year_citations_override_a_references_list() -> None:
    answer = ("Coastal flooding rose by 12% in the studied towns (Smith, 2020).\n\n"
              "References:\n- Smith, J. (2020). Coastal flooding. J. Floods 4, 1-9.")
    got = extract_pairs(answer)
    assert [(p.claim, p.ref) for p in got] == [
        ("Coastal flooding rose by 12% in the studied towns", "Smith, 2020")]
    assert run(answer, docs=DOCS).passed


# -- end to end: a real gateway, the official SDK ------------------------------------

POLICY = """
name: citations-inline
mode: inline
default: true
layers: [{name: citations}]
actions: {fail: {type: block}}
"""
PAPERS = (
    '<document id="smith2020">Coastal flooding rose by 12% between 2000 and 2019 in the '
    "studied towns.</document>\n"
    '<document id="lee2019">Drought cut maize yields in Kenya by a third.</document>'
)
SUPPORTED = "Coastal flooding rose by 12% in the studied towns (Smith et al., 2020)."
UNSUPPORTED = "Smith et al. (2020) found that drought cut maize yields in Kenya by a third."


def test_gateway_blocks_an_author_year_citation_its_document_does_not_support(
        make_gateway: GatewayFactory, upstream: ServedUpstream, tmp_path: Path,
        make_client: Callable[..., openai.OpenAI]) -> None:
    (tmp_path / "citations.yaml").write_text(POLICY, encoding="utf-8")
    upstream.app.rules = [Rule(r"flooding\?$", SUPPORTED), Rule(r"maize\?$", UNSUPPORTED)]
    gw = make_gateway(policies_dir=str(tmp_path), reload_policies=False)
    client = make_client(gw.base_url)

    def ask(question: str) -> Any:
        return client.chat.completions.with_raw_response.create(
            model="scripted-small",
            messages=[{"role": "system", "content": f"Answer from these papers.\n{PAPERS}"},
                      {"role": "user", "content": question}])

    raw = ask("What happened to coastal flooding?")
    assert raw.headers["x-verity-layers"].startswith("citations=")
    assert raw.headers["x-verity-layers"].endswith(":pass")
    assert raw.headers["x-verity-action"] == "pass"
    assert raw.parse().choices[0].message.content == SUPPORTED

    raw = ask("What happened to maize?")  # cites smith2020 for what lee2019 says
    assert raw.headers["x-verity-layers"].endswith(":fail")
    assert raw.headers["x-verity-action"] == "block"
    blocked = raw.parse()
    assert blocked.choices[0].finish_reason == "content_filter"
    assert "maize" not in (blocked.choices[0].message.content or "")
    gw.stop()


def test_a_long_document_id_without_a_year_is_read_in_linear_time() -> None:
    """`_AY_ID` once let a run of letters split 2^n ways: a tool_call_id-shaped id took
    3 s, an 80-letter one would never finish, blocking the event loop (CPU-only layers
    run without a timeout). A subprocess with a generous bound fails instead of hanging."""
    import subprocess
    import sys

    code = ("from gateway.layers._author_year import author_year_keys\n"
            "for sid in ['call_kQzXbLrTwYpMnHvDsJfGcA7e', 'x' * 80, 'ab&' * 30,\n"
            "            'bridgeconstructionnotesfortheyear']:\n"
            "    author_year_keys(sid, {}, None, 'text')\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
