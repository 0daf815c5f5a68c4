"""The grounding layer: wrong numbers, dates, entities and negation flips are caught;
faithful paraphrases pass; an empty context is skipped."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from gateway.sources.context import Document, GroundingContext
from gateway.layers.grounding import GroundingConfig, GroundingLayer, check_answer, check_sentence
from gateway.text.index import INDEX_KEY, IndexCache, TextIndex, build_index
from gateway.text.tokens import split_sentences
from gateway.layers.base import LayerResources, LayerResult, VerifyInput
from gateway.layers.registry import resolve

CONTEXT = (
    "Andre Lamont Johnson (born July 11, 1981) is a former American football wide receiver "
    "who played the majority of his career with the Houston Texans of the National Football "
    "League (NFL). The stadium holds 72,000 spectators and cost $352 million to build. "
    "Attendance rose by 12% in 2004. The team did not reach the playoffs until 2011."
)


def run(answer: str, context: str = CONTEXT, question: str = "Tell me about Andre Johnson.",
        **config: object) -> LayerResult:
    layer = GroundingLayer(GroundingConfig.model_validate(config), LayerResources())
    docs = [Document(id="ctx", text=context, kind="system")] if context else []
    inp = VerifyInput(
        messages=[{"role": "system", "content": context}, {"role": "user", "content": question}],
        response_text=answer, context=GroundingContext(documents=docs),
    )
    return asyncio.run(layer.verify(inp))


def test_registry_resolves_grounding() -> None:
    assert resolve("grounding") is GroundingLayer


def test_faithful_paraphrase_passes() -> None:
    r = run("Andre Johnson, born in 1981, played most of his career for the Houston Texans.")
    assert r.passed and not r.skipped
    assert r.failed_claims == []
    assert r.label == "supported"
    assert r.evidence[0].status == "supported"
    assert r.evidence[0].source_id == "ctx"
    assert "Houston Texans" in (r.evidence[0].source_span or "")


def test_number_forms_are_normalized() -> None:
    r = run("The stadium cost about $352m and holds seventy-two thousand spectators.")
    assert r.passed, r.evidence[0].reason
    r = run("The stadium cost 352 million dollars; attendance rose 12 percent in 2004.")
    assert r.passed, r.evidence[0].reason


def test_wrong_number_is_contradicted() -> None:
    good = run("The stadium holds 72,000 spectators.")
    bad = run("The stadium holds 85,000 spectators.")
    assert good.passed
    assert bad.evidence[0].status == "contradicted"
    assert "85,000" in bad.evidence[0].reason
    assert bad.score < good.score
    assert bad.failed_claims == ["The stadium holds 85,000 spectators."]


def test_wrong_percentage_is_caught() -> None:
    assert run("Attendance rose by 12% in 2004.").passed
    bad = run("Attendance rose by 40% in 2004.")
    assert not bad.passed and bad.evidence[0].status == "contradicted"


def test_wrong_date_is_caught_and_partial_date_is_fine() -> None:
    assert run("Andre Johnson was born in July 1981.").passed
    assert run("Andre Johnson was born on 11 July 1981.").passed
    bad = run("Andre Johnson was born on July 12, 1981.")
    assert not bad.passed
    assert bad.evidence[0].status == "contradicted"
    assert "July 12, 1981" in bad.evidence[0].reason


def test_wrong_entity_is_caught() -> None:
    good = run("Andre Johnson played for the Houston Texans.")
    bad = run("Andre Johnson played for the Dallas Cowboys.")
    assert good.passed and good.score == 1.0
    assert bad.score < good.score
    assert not run("Andre Johnson played for the Dallas Cowboys.", threshold=0.8).passed
    assert bad.failed_claims == ["Andre Johnson played for the Dallas Cowboys."]
    assert bad.evidence[0].status == "unsupported"
    assert "Dallas Cowboys" in bad.evidence[0].reason


def test_negation_flip_is_contradicted() -> None:
    bad = run("The team reached the playoffs until 2011.")
    assert bad.evidence[0].status == "contradicted"
    assert "negation" in bad.evidence[0].reason
    assert not bad.passed
    assert run("The team did not reach the playoffs until 2011.").passed


def test_question_words_count_as_supported() -> None:
    ctx = "Dicksonia is a genus of tree ferns. Hardenbergia is a genus of vines from Australia."
    q = "Which genus, Dicksonia or Hardenbergia, was named after Countess Franziska von Hardenberg?"
    answer = "Hardenbergia was named after Countess Franziska von Hardenberg."
    with_q = run(answer, context=ctx, question=q)
    without_q = run(answer, context=ctx, question=q, use_question=False)
    assert with_q.score == 1.0 and with_q.failed_claims == []
    assert without_q.score < with_q.score
    assert without_q.failed_claims == [answer]
    assert without_q.failed_claims == [answer]


def test_only_the_bad_sentence_fails() -> None:
    r = run("Andre Johnson played for the Houston Texans. He later coached the Chicago Bears.")
    assert r.failed_claims == ["He later coached the Chicago Bears."]
    statuses = {e.text: e.status for e in r.evidence}
    assert statuses["Andre Johnson played for the Houston Texans."] == "supported"


def test_empty_context_is_skipped_neutral_and_passed() -> None:
    r = run("Anything at all, 42 times.", context="")
    assert r.skipped and r.passed and r.score == 0.5
    assert r.evidence == [] and r.failed_claims == []


def test_index_is_built_once_per_request_and_shared() -> None:
    ctx = GroundingContext(documents=[Document(id="d", text=CONTEXT, kind="system")])
    layer = GroundingLayer(GroundingConfig(), LayerResources())
    inp = VerifyInput(messages=[], response_text="The NFL.", context=ctx)
    asyncio.run(layer.verify(inp))
    first = ctx._cache[INDEX_KEY]
    assert isinstance(first, TextIndex)
    asyncio.run(layer.verify(inp))
    assert ctx._cache[INDEX_KEY] is first


def test_scores_are_in_unit_interval_and_threshold_decides() -> None:
    r = run("Zorblax Quintavious founded Mars Colony 9 in 3012 with 400 trillion robots.")
    assert 0.0 <= r.score < 0.5 and not r.passed
    strict = run("Andre Johnson played for the Houston Texans.", threshold=1.0)
    assert strict.score == 1.0 and strict.passed


def test_config_rejects_unknown_keys_and_bad_ranges() -> None:
    with pytest.raises(ValidationError):
        GroundingConfig.model_validate({"treshold": 0.5})
    with pytest.raises(ValidationError):
        GroundingConfig.model_validate({"threshold": 1.5})


def test_best_matches_do_not_depend_on_word_order() -> None:
    # Eight equally rare words, one per sentence: candidates come from the six
    # rarest, so an order-dependent tie-break would pick a different sentence
    # (and, fed from a set, a different one per process).
    words = [f"word{c}" for c in "abcdefgh"]
    index = build_index([("d", " ".join(f"{w.title()} here." for w in words))])
    forward = index.best_matches(words, 3)
    assert forward == index.best_matches(list(reversed(words)), 3)
    assert [m.sentence for m in forward] == [0, 1, 2]


def test_index_cache_reuses_a_resent_context_and_stays_bounded() -> None:
    cache = IndexCache(max_chars=len(CONTEXT) + 10)
    first = cache.get([("ctx", CONTEXT)])
    assert cache.get([("ctx", CONTEXT)]) is first and cache.hits == 1
    assert cache.get([("other-id", CONTEXT)]) is not first  # ids are part of the key
    assert cache.get([("ctx", CONTEXT)]) is not first  # evicted: over max_chars
    off = IndexCache(max_chars=0)
    assert off.get([("ctx", CONTEXT)]) is not off.get([("ctx", CONTEXT)])


def test_layer_reuses_the_index_across_requests_with_the_same_result() -> None:
    layer = GroundingLayer(GroundingConfig(), LayerResources())
    cold = GroundingLayer(GroundingConfig(index_cache_chars=0), LayerResources())
    answer = "The stadium holds 85,000 spectators. Andre Johnson played for the Houston Texans."

    def request() -> VerifyInput:
        ctx = GroundingContext(documents=[Document(id="d", text=CONTEXT, kind="system")])
        return VerifyInput(messages=[], response_text=answer, context=ctx)

    first, second = request(), request()
    r1, r2 = asyncio.run(layer.verify(first)), asyncio.run(layer.verify(second))
    assert second.context._cache[INDEX_KEY] is first.context._cache[INDEX_KEY]
    r0 = asyncio.run(cold.verify(request()))
    assert r0.score == r1.score == r2.score and r0.failed_claims == r2.failed_claims


def test_more_unsupported_words_mean_lower_score_without_saturating() -> None:
    one = run("Andre Johnson played for the Houston Texans with grit.")
    four = run("Andre Johnson played for the Houston Texans with grit, flair, pace and guile.")
    many = run("Andre Johnson played for the Houston Texans with grit, flair, pace, guile, "
               "poise, nerve, verve, zest and heart.")
    assert 1.0 > one.score > four.score > many.score > 0.0
    # The ordering comes from the counts, not only from the share of unsupported words.
    counts_only = [run(a.evidence[0].text, share_weight=0.0).score for a in (one, four, many)]
    assert counts_only[0] > counts_only[1] > counts_only[2]


def test_long_unsupported_words_weigh_more_than_short_ones() -> None:
    short = "Andre Johnson played for the Houston Texans in Zuba."
    long_ = "Andre Johnson played for the Houston Texans in Zanzibarovia."
    # length_allowance 0: the longer answer would otherwise get a (slightly) larger allowance.
    assert run(long_, length_allowance=0).score < run(short, length_allowance=0).score
    assert run(long_, rare_weight=0.0, length_allowance=0).score \
        == run(short, rare_weight=0.0, length_allowance=0).score


def test_a_contradiction_adds_evidence_beyond_the_share() -> None:
    contradicted = "The stadium holds 85,000 spectators."
    assert run(contradicted).score < run(contradicted, contradiction_boost=0.0).score
    supported = "The stadium holds 72,000 spectators."
    assert run(supported).score == run(supported, contradiction_boost=0.0).score == 1.0
    # One wrong number outweighs several merely unsupported common words.
    assert run(contradicted).score < run("The stadium holds 72,000 loud, happy fans.").score


def test_unsupported_numbers_count_as_specific_evidence() -> None:
    words = "Zorblax Quintavious founded Mars Colony with robots."
    with_values = "Zorblax Quintavious founded Mars Colony 9 in 3012 with 400 trillion robots."
    # (Unsupported names count as specifics too, name_rarity; off here to see the values.)
    assert run(with_values, name_rarity=0).score < run(words, name_rarity=0).score
    assert not run(with_values).passed


# --- contradiction precision: hedges, opinions and number words inside names ----------

def _status(answer: str, context: str) -> str:
    res = run(answer, context=context, question="What happened?")
    return res.label or ""


def test_hedged_negation_is_not_a_flip() -> None:
    ctx = "Victoria will attend the graduation ceremony in Dallas this June."
    assert _status("Victoria will not attend the graduation ceremony in Dallas.", ctx) \
        == "contradicted"
    assert _status("Victoria may not attend the graduation ceremony in Dallas.", ctx) \
        != "contradicted"
    assert _status("Victoria might not attend the graduation ceremony in Dallas.", ctx) \
        != "contradicted"


def test_first_person_opinion_negation_is_not_a_flip() -> None:
    ctx = "Romantic comedy films usually have happy endings for the couple."
    # Same proposition, stated about the context: a flip.
    assert _status("Romantic comedy films usually do not have happy endings.", ctx) \
        == "contradicted"
    # The speaker's own taste, no entity or number: chit-chat, not a contradiction.
    assert _status("I do not usually like romantic comedy films with happy endings.", ctx) \
        != "contradicted"


def test_number_word_inside_a_name_does_not_contradict() -> None:
    ctx = "The castle, with 300 rooms, trained soldiers for the Second World War."
    assert _status("The castle, with 200 rooms, trained soldiers for the Second World War.",
                   ctx) == "contradicted"
    res = run("The castle, with 300 rooms, trained soldiers for World War Two.",
              context=ctx, question="What happened?")
    assert res.label != "contradicted"
    # Still not backed by the context: reported, just not as a contradiction.
    assert any("Two" in e.reason for e in res.evidence)


# --- allowance for chance novelty, chit-chat as weak evidence ---------------------------

def test_first_person_chit_chat_is_weak_evidence() -> None:
    chit = "I really hope you enjoy cooking these wonderful recipes tonight."
    assert run(chit).score > run(chit, opinion_weight=1.0).score
    # A claim about a named entity is not chit-chat: opinion_weight does not touch it.
    claim = "Andre Johnson really enjoys cooking wonderful recipes every night."
    assert run(claim).score == run(claim, opinion_weight=1.0).score


def test_answer_as_long_as_its_context_gets_an_allowance() -> None:
    snippet = "Andre Johnson played for the Houston Texans."
    turn = "Andre Johnson played for the Houston Texans, a fun team with loyal fans downtown."
    on_snippet = run(turn, context=snippet)
    assert on_snippet.passed
    assert on_snippet.score > run(turn, context=snippet, length_allowance=0).score
    # The same reply against the long context: a small length ratio, little allowance.
    assert run(turn).score < on_snippet.score


def test_sentences_get_an_allowance_for_accumulated_novelty() -> None:
    # (Words added beside values the context states weigh half: mostly paraphrase.
    # Enough of them still exceed the allowance.)
    answer = ("Andre Johnson played for the Houston Texans, a loyal club with passionate "
              "supporters. The stadium holds 72,000 spectators on busy sunny weekends with "
              "loud music. Attendance rose by 12% in 2004 thanks to cheap tickets and fans.")
    assert run(answer).score > run(answer, sentence_allowance=0).score


def test_a_contradiction_is_strong_evidence_beyond_any_allowance() -> None:
    ctx = "The stadium holds 72,000 spectators."
    r = run("The stadium holds 85,000 spectators.", context=ctx)
    assert not r.passed and r.score < 0.2


@pytest.mark.parametrize("answer", [
    "The storm hit the town in May. 5 people died in the storm.",  # "May. 5" across the edge
    "Revenue was 30\n\npercent of it went away.",  # the next sentence's unit
    "Andre Johnson was born on July 11,\n1981 in Texas.",  # a date split across sentences
])
def test_each_sentence_is_checked_on_its_own_values(answer: str) -> None:
    """The layer checks each sentence's own dates and numbers (as ``check_sentence``
    does), not the whole answer's values assigned to sentences by start offset."""
    context = "The storm hit the town in May 2019. Seven people died in the storm."
    ctx = build_index([("ctx", context)])
    cfg = GroundingConfig()
    _, checks = check_answer(answer, ctx, None, cfg)
    assert checks == [check_sentence(s.text, ctx, None, cfg) for s in split_sentences(answer)]


def test_a_wrong_number_after_a_month_ending_a_sentence_is_caught() -> None:
    context = "The storm hit the town in May 2019. Seven people died in the storm."
    result = run("The storm hit the town in May. 5 people died in the storm.", context)
    assert not result.passed
    assert result.failed_claims == ["5 people died in the storm."]


@pytest.mark.parametrize("number", ["thirteen", "eleven", "forty", "fifteen", "thirty-one",
                                    "a trillion", "zero"])
def test_spelled_number_in_a_digit_free_context_supports_the_same_number(number: str) -> None:
    # A context without a digit used to be scanned for numbers only when it held one of
    # a few number words, so "thirteen" in the answer found no "thirteen" in the context.
    context = f"The old keeper looked after {number} lighthouses along the northern coast."
    r = run(f"The keeper looked after {number} lighthouses.", context=context)
    assert r.evidence[0].status == "supported", r.evidence[0].reason
    wrong = run("The keeper looked after twelve lighthouses.", context=context)
    assert wrong.evidence[0].status != "supported"


def test_a_wrong_value_is_contradicted_when_the_next_best_sentence_states_the_right_one(
) -> None:
    # The best match for the name is the first sentence (no date in it); the date the
    # answer gets wrong is in the second, anaphoric one ("It was completed ...").
    context = ("The Eiffel Tower is 330 metres tall. It was completed in 1889 and designed "
               "by Gustave Eiffel.")
    wrong = run("The Eiffel Tower was completed in 1899.", context=context)
    assert not wrong.passed and wrong.label == "contradicted", wrong.explanation
    right = run("The Eiffel Tower was completed in 1889.", context=context)
    assert right.passed and right.label == "supported", right.explanation
    # Outside the window a wrong value is contradicted only through its frame: the
    # context's 1889 is what was "completed" (binding, gateway.text.frames); a frame the
    # context does not have leaves it unsupported.
    only_best = run("The Eiffel Tower was completed in 1899.", context=context,
                    contradiction_window=1)
    assert only_best.label == "contradicted" and "1889" in only_best.evidence[0].reason
    unframed = run("The Eiffel Tower was repainted in 1899.", context=context,
                   contradiction_window=1)
    assert unframed.label == "unsupported", unframed.explanation


@pytest.mark.parametrize("marker", ["[1]", "[^1]", "[Sundara 54.30]", "[Source: ctx]",
                                    "(Source: ctx)", "(Smith et al., 2019)", "[1, 3-4]"])
def test_citation_markers_are_not_read_as_the_answers_values_or_names(marker: str) -> None:
    # QA: "The bridge opened in 1932 [1]." was "contradicted" (the value 1), blocked.
    context = "The bridge opened in 1932 and is 503 metres long."
    ok = run(f"The bridge opened in 1932 {marker}.", context=context)
    assert ok.passed and ok.label == "supported", ok.explanation
    assert ok.evidence[0].text == f"The bridge opened in 1932 {marker}."  # shown as written
    wrong = run(f"The bridge opened in 1931 {marker}.", context=context)
    assert wrong.label == "contradicted" and "1931" in wrong.evidence[0].reason


def test_a_narrative_author_year_citation_is_a_marker_too() -> None:
    context = "Maize yields fell by 12% in the drought of 2012."
    r = run("Smith et al. (2019) found that maize yields fell by 12% in the 2012 drought.",
            context=context)
    assert r.passed and r.label == "supported", r.explanation


def test_brackets_that_are_no_citation_are_still_checked() -> None:
    context = "The bridge opened in 1932 and is 503 metres long."
    r = run("The bridge [Step 7] opened in 1932.", context=context)
    assert "7" in r.evidence[0].reason


@pytest.mark.parametrize("local_window", [0, 1])
def test_the_contradiction_window_does_not_depend_on_the_local_window(
        local_window: int) -> None:
    context = ("The Eiffel Tower is 330 metres tall. It was completed in 1889 and designed "
               "by Gustave Eiffel.")
    wrong = run("The Eiffel Tower was completed in 1899.", context=context,
                local_window=local_window)
    assert wrong.label == "contradicted", wrong.explanation


@pytest.mark.parametrize("answer", [
    "Satisfaction was written by Lennon and McCartney (1967).",
    "Satisfaction was written by Jagger and Richards [in 1967].",
    "Satisfaction was written by Jagger and Richards in 1965 [and first sung by Elvis in 1950].",
])
def test_a_wrong_fact_does_not_hide_in_brackets_that_cite_nothing(answer: str) -> None:
    context = "Satisfaction was written by Jagger and Richards in 1965 in Florida."
    r = run(answer, context=context)
    assert not r.passed and r.label != "supported", r.explanation


def test_a_bracket_naming_a_request_document_is_a_marker() -> None:
    context = "The bridge opened in 1932 and is 503 metres long."
    r = run("The bridge opened in 1932 [ctx].", context=context)  # the document's id: ctx
    assert r.passed and r.label == "supported", r.explanation
