"""The grounding layer on the error kinds of issue 13: units, conversions, rounding,
event dates, swapped names, false premises, negation forms, summaries, chit-chat, and the
per-shape calibration. Contexts here are written for the tests (not the dev suite's)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.layers.base import LayerResources, LayerResult, VerifyInput
from gateway.layers.grounding import GroundingConfig, GroundingLayer
from gateway.sources.context import ContextSpec, Document, GroundingContext, extract_context

SPEC = ("The Kestrel K2 kettle holds 1.7 litres and boils a full jug in 4 minutes. "
        "It draws 2,200 W. The base cable is 75 cm long. It weighs 1.1 kg empty.")
HISTORY = ("The Hartwell Library was founded in 1902 and opened to the public in 1905. "
           "Its first librarian, Edith Crane, served until 1931; her deputy Thomas Ward "
           "succeeded her. The reading room seats 240 people.")
POLICY = ("Orders can be cancelled free of charge within 14 days of delivery. "
          "Sale items are non-returnable. We do not ship to Antarctica. "
          "Refunds go back to the original card.")


def run(answer: str, context: str, question: str = "Tell me.",
        messages: list[dict[str, str]] | None = None, **config: object) -> LayerResult:
    layer = GroundingLayer(GroundingConfig.model_validate(config), LayerResources())
    msgs = messages or [{"role": "system", "content": context},
                        {"role": "user", "content": question}]
    inp = VerifyInput(messages=msgs, response_text=answer, context=GroundingContext(
        documents=[Document(id="ctx", text=context, kind="system")]))
    return asyncio.run(layer.verify(inp))


def flagged(res: LayerResult) -> bool:
    return not res.passed


@pytest.mark.parametrize(("answer", "wrong"), [
    ("It holds 1.7 litres.", False), ("It holds 1,700 millilitres.", False),
    ("It holds 1.7 gallons.", True), ("It boils a jug in 4 seconds.", True),
    ("It weighs about 2.4 lb empty.", False), ("It weighs 1.1 lb empty.", True),
    ("The cable is 75 mm long.", True), ("It draws about 2.2 kW.", False),
])
def test_units_and_conversions(answer: str, wrong: bool) -> None:
    res = run(answer, SPEC)
    assert flagged(res) == wrong, res.explanation


@pytest.mark.parametrize(("answer", "wrong"), [
    ("It was founded in 1902.", False), ("It opened to the public in 1905.", False),
    ("It was founded in 1905.", True),   # the opening year on the founding
    ("It opened to the public in 1902.", True),
])
def test_a_date_on_the_wrong_event(answer: str, wrong: bool) -> None:
    res = run(answer, HISTORY)
    assert flagged(res) == wrong, res.explanation


def test_a_swapped_name_in_a_copied_sentence() -> None:
    ok = run("Edith Crane served until 1931.", HISTORY)
    swapped = run("Thomas Ward served until 1931.", HISTORY)
    assert ok.passed, ok.explanation
    assert not swapped.passed and "Edith Crane" in " ".join(e.reason for e in swapped.evidence)


TOWER = ("The Eiffel Tower in Paris is 330 metres tall. It was completed in 1889 and was "
         "designed by the engineering company of Gustave Eiffel.")


@pytest.mark.parametrize(("answer", "wrong"), [
    # The answer leaves out the qualifier of its own name ("in Paris"): a copy, no swap.
    ("The Eiffel Tower is 330 metres tall and was completed in 1889.", False),
    ("The Eiffel Tower is 330 metres tall.", False),
    # A name put where the qualifier sits is still a swap.
    ("The Eiffel Tower in London is 330 metres tall.", True),
])
def test_a_dropped_qualifier_is_not_a_swap(answer: str, wrong: bool) -> None:
    res = run(answer, TOWER)
    assert flagged(res) == wrong, res.explanation

def test_context_blocks_in_the_user_message_are_not_the_question() -> None:
    # "<context>…</context> How tall …?" asks "How tall …?": an answer that copies the
    # context does not "repeat the question's words".
    msgs = [{"role": "user", "content": f"<context>{TOWER}</context>\n\n"
             "How tall is the Eiffel Tower and when was it completed?"}]
    layer = GroundingLayer(GroundingConfig(), LayerResources())
    for answer, ok in [("The Eiffel Tower is 330 metres tall and was completed in 1889.", True),
                       ("The Eiffel Tower is 450 metres tall and was completed in 1925.", False)]:
        res = asyncio.run(layer.verify(VerifyInput(
            messages=msgs, response_text=answer, context=extract_context(msgs, ContextSpec()))))
        assert res.passed == ok, res.explanation

def test_the_question_premise_is_checked_not_believed() -> None:
    q = "The reading room seats 400 people, right?"
    assert not run("Yes, it seats 400 people.", HISTORY, q).passed
    assert run("No, it seats 240 people.", HISTORY, q).passed
    assert run("It seats 240 people, not 400.", HISTORY, q).passed


@pytest.mark.parametrize(("answer", "question", "wrong"), [
    ("No, sale items can't be returned.", "Can I return a sale item?", False),
    ("Yes, sale items are returnable.", "Can I return a sale item?", True),
    ("No, we don't ship there.", "Do you ship to Antarctica?", False),
    ("Yes, we ship to Antarctica.", "Do you ship to Antarctica?", True),
    ("You can cancel for free within 14 days of delivery, not 30.", "Is it 30 days?", False),
])
def test_negation_forms(answer: str, question: str, wrong: bool) -> None:
    res = run(answer, POLICY, question)
    assert flagged(res) == wrong, res.explanation


def test_one_wrong_fact_among_right_ones() -> None:
    right = ("The Kestrel K2 holds 1.7 litres, boils a full jug in 4 minutes and draws "
             "2,200 W. Its cable is 75 cm long.")
    assert run(right, SPEC).passed
    assert not run(right.replace("75 cm", "95 cm"), SPEC).passed


def test_chit_chat_is_no_claim_but_a_wrong_fact_in_it_is() -> None:
    assert run("Glad it helped! Have a lovely evening.", POLICY, "Thanks!").passed
    assert not run("Glad it helped! Refunds take 60 days.", POLICY, "Thanks!").passed


def test_the_request_shape_is_reported_and_scales_the_evidence() -> None:
    answer = "It holds 1.7 litres and has a lovely blue handle made of recycled bamboo."
    passage = run(answer, SPEC)
    chat = run(answer, SPEC, messages=[
        {"role": "system", "content": SPEC}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Tell me."}])
    assert (passage.details["shape"], chat.details["shape"]) == ("passage", "conversation")
    scaled = run(answer, SPEC, shape_scale={"passage": 0.5})
    assert scaled.score > passage.score


ARTICLE = ("The council approved the new bus depot on Monday. It will cost £12 million. "
           "Work starts in May. The depot will house 80 electric buses. "
           "Residents had objected to the noise. The council said the site is shielded. "
           "A second vote is due in June.")


def test_a_summary_request_over_a_longer_context_is_calibrated_as_a_document() -> None:
    answer = "The council approved a £12 million depot for 80 electric buses."
    ask = "Summarize the article above."
    assert run(answer, ARTICLE, ask).details["shape"] == "passage"  # default: off
    assert run(answer, ARTICLE, ask, summary_context_sentences=6).details["shape"] == "document"
    assert run(answer, ARTICLE, "How much will it cost?",
               summary_context_sentences=6).details["shape"] == "passage"
    assert run(answer, ARTICLE, ask, summary_context_sentences=7).details["shape"] == "passage"


def test_the_shipped_policy_calibrates_per_task() -> None:
    from pathlib import Path

    from gateway.policy.loader import load_policy_file

    policy = load_policy_file(Path(__file__).parents[2] / "policies" / "grounding.yaml")
    cfg = next(layer.spec.config for layer in policy.layers if layer.name == "grounding")
    assert set(cfg["shape_scale"]) == set(cfg["shape_power"]) == {
        "passage", "conversation", "document"}
    assert cfg["summary_context_sentences"] < GroundingConfig().long_context_sentences
    wrong = "The council approved the depot. It will house 60 electric buses."
    res = run(wrong, ARTICLE, "Summarize the article above.", **cfg)
    assert res.details["shape"] == "document"
    assert not res.passed and res.label == "contradicted"  # weak there, but still flagged
    right = run("The council approved a £12 million depot for 80 electric buses.", ARTICLE,
                "Summarize the article above.", **cfg)
    assert right.passed and right.score > res.score


FESTIVAL = ("The organisers said the Harbour Lights Festival will not return next year. "
            "Ticket holders will be refunded within 30 days.")


def test_a_negation_counts_only_where_its_word_is_restated() -> None:
    paraphrase = "The organisers said the Harbour Lights Festival is cancelled next year."
    flipped = "The organisers said the Harbour Lights Festival will return next year."
    for scope in (False, True):
        assert run(flipped, FESTIVAL, negation_scope=scope).label == "contradicted"
    assert run(paraphrase, FESTIVAL).label == "contradicted"          # before: a false flip
    assert run(paraphrase, FESTIVAL, negation_scope=True).label != "contradicted"


TEAM = ("Riverside Rovers : `Team coached`: Anna Lindqvist. Riverside Rovers : `Division`: "
        "Northern League North. Riverside Rovers : `Stadium`: Millbrook Park")
CHAT = ("[Human]: Do you follow the Riverside Rovers? [Assistant]: A little. "
        "[Human]: Who coaches them?")


def test_a_name_that_varies_one_word_of_the_contexts_is_substituted() -> None:
    wrong = "Anna Petersen coaches them, and they play in the Northern League South."
    right = "Anna Lindqvist does. They play their home games at Millbrook Park."
    off = run(wrong, TEAM, CHAT, shape_scale={"conversation": 0.25}, name_variants=False)
    on = run(wrong, TEAM, CHAT, shape_scale={"conversation": 0.25}, name_variants=True)
    assert on.details["shape"] == "conversation"
    assert off.label != "contradicted"
    assert on.label == "contradicted" and not on.passed
    assert "in place of Anna Lindqvist" in on.evidence[0].reason
    ok = run(right, TEAM, CHAT, shape_scale={"conversation": 0.25}, name_variants=True)
    assert ok.label != "contradicted" and ok.passed, ok.explanation


FILMS = ("Cedar Hollow is directed by Ines Marlow. Cedar Hollow has genre War film. "
         "Ines Marlow directed The Glass Harbour. The Scarlet Orchard is written by Ines Marlow")
FILM_CHAT = ("[Human]: I liked Cedar Hollow. [Assistant]: It is a good one. "
             "[Human]: What else is there?")


@pytest.mark.parametrize(("answer", "wrong"), [
    # the context name named too: the variant is another thing, not its replacement
    ("Cedar Hollow, set in the Cedar Mountains, is directed by Ines Marlow.", False),
    # ... unless the answer denies it
    ("It was directed by Ines Marlow, and the film is Cedar Valley, not Cedar Hollow.", True),
    ("Ines Marlow also directed Cedar Valley.", True),
    # one name spelt another way is no substitute; a short word one letter off is
    ("The Scarlett Orchard was written by Ines Marlow.", False),
    ("The Scarlet Orchid was written by Ines Marlow.", True),
])
def test_variants_and_spellings_in_a_conversation(answer: str, wrong: bool) -> None:
    res = run(answer, FILMS, FILM_CHAT, shape_scale={"conversation": 0.16})
    assert res.details["shape"] == "conversation"
    assert (res.label == "contradicted") == wrong, res.evidence[0].reason


@pytest.mark.parametrize(("answer", "wrong"), [
    ("No, I didn't see The Glass Harbour, I don't like war films.", False),
    ("No I did not. It also starred Ines Marlow, didn't it?", False),
    ("No, Ines Marlow did not direct The Glass Harbour.", True),
    ("I don't think Ines Marlow directed The Glass Harbour.", True),
])
def test_the_speakers_own_negation_is_no_flip(answer: str, wrong: bool) -> None:
    res = run(answer, FILMS, FILM_CHAT, shape_scale={"conversation": 0.16})
    assert (res.label == "contradicted") == wrong, [e.reason for e in res.evidence]


def test_a_year_the_answer_also_states_is_no_conflict() -> None:
    context = "Lena Ortiz competed at the 2012 Summer Olympics in London."
    chat = "[Human]: Did Lena Ortiz go to the Olympics? "
    both = run("She competed at the 2008 and 2012 Summer Olympics.", context, chat)
    one = run("She competed at the 2008 Summer Olympics.", context, chat)
    assert both.label != "contradicted"
    assert one.label == "contradicted"


OPINION_ARTICLE = " ".join([
    "Investigators at the journalism school reviewed the magazine's campus story.",
    "They found major lapses in reporting, editing and fact-checking.",
    "The magazine retracted the story after the review was published.",
    "Its editors said no staff member would be dismissed.",
    "The publisher said its procedures would stay as they are.",
    "The story had described an assault at a fraternity house.",
    "Police found no evidence that the assault took place.",
    "The fraternity said it would take legal action.",
    "The university suspended fraternity activities for several weeks.",
    "Students protested outside the administration building.",
    "The dean said the campus had been harmed by the story.",
    "The reporter apologised to readers in a statement.",
    "The review ran to more than 12,000 words.",
    "Critics called it a failure of basic journalism.",
])


def test_an_attribution_prefix_in_a_summary_is_no_claim() -> None:
    answer = ("Errol Louis: The magazine retracted the story. Its editors said no staff "
              "member would be dismissed.")
    msgs = [{"role": "system", "content": OPINION_ARTICLE},
            {"role": "user", "content": "Summarize the article."}]
    off = run(answer, OPINION_ARTICLE, messages=msgs, attribution_prefixes=False)
    on = run(answer, OPINION_ARTICLE, messages=msgs, attribution_prefixes=True)
    assert off.details["shape"] == on.details["shape"] == "document"
    assert "Errol Louis" in off.evidence[0].reason
    assert all("Errol" not in e.reason for e in on.evidence)
    assert on.score > off.score
    # only documents: a question on a short passage keeps the prefix as a claim
    short = run("Edith Crane: It was founded in 1902.", HISTORY, attribution_prefixes=True)
    assert short.details["shape"] == "passage"
    assert run("Edith Crane: It was founded in 1902.", HISTORY,
               attribution_prefixes=False).score == short.score


def test_a_date_comparison_answered_against_the_years_is_contradicted() -> None:
    context = ("Mara Lindqvist (3 May 1921 – 1990) was a Swedish botanist. "
               "Oskar Hale (born 12 June 1917) is a retired English engineer.")
    question = "Who was born first, Mara Lindqvist or Oskar Hale?"
    wrong = "Mara Lindqvist was born first."
    off = run(wrong, context, question, comparisons=False)
    on = run(wrong, context, question, comparisons=True)
    assert off.passed and off.label != "contradicted"      # every word is in the context
    assert on.label == "contradicted" and not on.passed
    assert "picks Mara Lindqvist (1921) over Oskar Hale (1917)" in on.evidence[0].reason
    right = run("Oskar Hale was born first.", context, question, comparisons=True)
    assert right.passed and right.label != "contradicted", right.explanation


def test_a_choice_answered_with_the_other_alternative_is_unsupported() -> None:
    context = ("Mara Lindqvist founded the Orchard Press in Uppsala and ran its poetry list. "
               "Oskar Hale is an English engineer who designed tidal turbines.")
    question = "Who founded the Orchard Press in Uppsala, Mara Lindqvist or Oskar Hale?"
    wrong = "Oskar Hale founded the press."
    off = run(wrong, context, question, choice_questions=False)
    on = run(wrong, context, question)                       # on by default
    assert off.passed                                        # every word is in the context
    assert on.label == "unsupported" and not on.passed
    assert "picks Oskar Hale, but the context says it of Mara Lindqvist" in on.evidence[0].reason
    right = run("Mara Lindqvist founded the press.", context, question)
    assert right.passed, right.explanation


def test_a_vague_amount_or_no_year_for_the_asked_slot_is_unsupported() -> None:
    context = ("The Orchard Press was founded in Uppsala in 1921 by Mara Lindqvist. "
               "It published 14 poetry collections before it closed.")
    question = "What did the Orchard Press publish before it closed?"
    wrong = "It published many poetry collections before it closed."
    assert run(wrong, context, question, vague_answers=False).passed
    on = run(wrong, context, question)                       # on by default
    assert on.label == "unsupported" and not on.passed
    assert "vague amount ('many')" in on.evidence[0].reason
    assert run("It published 14 poetry collections.", context, question).passed
    year = "In what year was the Orchard Press founded?"
    assert not run("Mara Lindqvist founded it in Uppsala.", context, year).passed
    assert run("It was founded in 1921.", context, year).passed


def test_a_summary_figure_restated_in_the_same_unit_is_flagged_in_a_long_document() -> None:
    filler = " ".join(f"Paragraph {i} of the report describes the railway's history."
                      for i in range(12))
    context = (filler + " The seven-car train travelled for almost 11 seconds above 600 km/h"
               " on the test track. " + filler)
    summary = "Summarize the report."
    rest = (" The report describes the railway's history. Paragraph 3 of the report"
            " describes the railway's history.")
    wrong = "The train travelled for almost 20 seconds above 600 km/h on the test track." + rest
    shipped = {"shape_scale": {"passage": 1.302, "conversation": 0.12, "document": 0.35}}
    off = run(wrong, context, summary, document_unit_strong=False, **shipped)
    on = run(wrong, context, summary, **shipped)             # on by default
    assert off.passed                                        # weak in a long document
    assert not on.passed and on.label == "contradicted"
    assert on.score >= 0.3                                   # a disclaimer, not a block
    assert run("The train travelled for almost 11 seconds above 600 km/h on the test track."
               + rest, context, summary, **shipped).passed


LIBRARY_Q = "Who was the first librarian of the Hartwell Library?"


@pytest.mark.parametrize(("answer", "question", "wrong"), [
    ("Edith Crane.", LIBRARY_Q, False),
    ("The first librarian of the Hartwell Library was Edith Crane.", LIBRARY_Q, False),
    ("Its first librarian was Edith Crane, who served until 1931.", LIBRARY_Q, False),
    ("The first librarian of the Hartwell Library was a retired schoolteacher.",
     LIBRARY_Q, True),                                  # fills the slot with made-up words
    ("The Hartwell Library was founded in 1899.", "When was the Hartwell Library founded?",
     True),                                             # a value the context lacks
    ("The Hartwell Library never had a first librarian.", LIBRARY_Q, True),  # denies it
    ("The librarian who served the Hartwell Library until 1931 was a retired schoolteacher.",
     "Which librarian served the Hartwell Library until 1931?", True),  # the question's year
    ("Edith Crane served the Hartwell Library until 1931.",
     "Which librarian served the Hartwell Library until 1931?", False),
    ("Sale items.", "Which items are non-returnable?", False),
    ("Electronics are non-returnable.", "Which items are non-returnable?", True),
    ("No, sale items are non-returnable.", "Can I return sale items?", False),
    ("The first librarian of the Hartwell Library was not Thomas Ward.", LIBRARY_Q, True),
    ("Its first librarian was Edith Crane, not Thomas Ward.", LIBRARY_Q, False),  # contrast
    ("The first librarian of the Hartwell Library was the first librarian.", LIBRARY_Q,
     True),                                             # only the question's words
    ("Who was the first librarian of the Hartwell Library, Edith Crane or Thomas Ward? "
     "The first librarian of the Hartwell Library was Edith Crane.", None, False),
])
def test_an_answer_that_adds_nothing_from_the_context(answer: str, question: str | None,
                                                      wrong: bool) -> None:
    if question is None:  # a choice question: naming one of its alternatives answers it
        question, answer = answer.split("? ", 1)
        question += "?"
    res = run(answer, HISTORY if "Hartwell" in question else POLICY, question)
    assert flagged(res) == wrong, res.explanation


def test_question_novelty_is_the_check_that_flags_a_made_up_slot_filler() -> None:
    wrong = "The first librarian of the Hartwell Library was a retired schoolteacher."
    off = run(wrong, HISTORY, LIBRARY_Q, question_novelty=False)
    on = run(wrong, HISTORY, LIBRARY_Q)
    assert off.passed                                   # the allowance absorbs two words
    assert not on.passed and on.label == "unsupported"
    assert on.score >= 0.3                              # a disclaimer, never a block
    assert "adds to the question only what the context lacks: retired, schoolteacher" \
        in on.evidence[0].reason
    denial = run("The Hartwell Library never had a first librarian.", HISTORY, LIBRARY_Q)
    assert "denies what the question asks for" in denial.evidence[0].reason


@pytest.mark.parametrize(("answer", "question"), [
    ("The first librarian was a retired schoolteacher.", "Tell me about the library."),
    ("Glad it helped, enjoy the reading room!", "Thanks, that helps?"),
    ("I think it was a retired schoolteacher.", LIBRARY_Q),
    ("The documents do not say who the first librarian was.", LIBRARY_Q),
])
def test_question_novelty_leaves_alone(answer: str, question: str) -> None:
    on = run(answer, HISTORY, question)
    off = run(answer, HISTORY, question, question_novelty=False)
    assert on.score == off.score, on.explanation        # no question, chit-chat, opinion,
    # or an answer about the sources: the check does not apply


TRANSFERS = ("Chelsea signed the striker Marco Ruiz from Porto on Monday. The fee was reported "
             "to be 30 million pounds. Arsenal bought the goalkeeper Tom Berg from Lyon on "
             "Tuesday. Ruiz scored 21 goals last season. Berg kept 14 clean sheets in the "
             "league. Both clubs play their next match on Saturday. The transfer window closes "
             "on Friday. Fans welcomed both signings on social media.")
SUMMARIZE = "Summarize the document above in a few sentences."


def test_in_a_summary_a_name_bound_elsewhere_is_weak_evidence_a_changed_value_is_not() -> None:
    doc = {"summary_context_sentences": 6}
    swapped = "Chelsea signed Tom Berg from Porto on Monday for 30 million pounds."
    on = run(swapped, TRANSFERS, SUMMARIZE, **doc)
    off = run(swapped, TRANSFERS, SUMMARIZE, document_binding_weak=False, **doc)
    assert on.details["shape"] == "document" and on.label == "contradicted"
    assert "Tom Berg: the context puts Marco Ruiz there" in on.evidence[0].reason
    assert on.score > off.score and not off.passed      # strong only when switched off
    changed = "Chelsea signed the striker Marco Ruiz from Porto for 40 million pounds."
    for weak in (True, False):
        res = run(changed, TRANSFERS, SUMMARIZE, document_binding_weak=weak, **doc)
        assert not res.passed and res.label == "contradicted", res.explanation
    # the same swap answering a question on the passage stays strong
    asked = run(swapped, TRANSFERS, "Whom did Chelsea sign, and for how much?")
    assert asked.details["shape"] == "passage" and not asked.passed


def test_question_novelty_reads_another_form_of_a_context_word_as_the_context_s() -> None:
    leaflet = ("Zentrol tablets contain 20 mg of zentrosine. It is not recommended during "
               "pregnancy. Sales grew fastest in the Asian market.")
    for answer, question in [("Pregnant women should avoid it.", "Who should not take Zentrol?"),
                             ("Sales in Asia.", "Where did sales grow fastest?")]:
        on = run(answer, leaflet, question)
        off = run(answer, leaflet, question, question_novelty=False)
        assert on.score == off.score, on.explanation   # "pregnancy", "Asian": other forms
    made_up = run("Elderly patients should avoid it.", leaflet, "Who should not take Zentrol?")
    assert not made_up.passed and "adds to the question only" in made_up.evidence[0].reason
    assert made_up.score >= 0.3                         # at least a disclaimer, not a block
