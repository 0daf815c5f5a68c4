"""An answer that leaves the asked slot unfilled: a vague amount, or no year."""

from __future__ import annotations

import pytest

from gateway.text.vague import vague_answer

CONTEXT = ("The Orchard Press was founded in Uppsala in 1921 by Mara Lindqvist. "
           "It published 14 poetry collections before it closed.")


@pytest.mark.parametrize(("question", "answer", "why"), [
    ("How many poetry collections did the Orchard Press publish?",
     "It published several poetry collections.", "vague amount ('several')"),
    ("Who founded the press that published 14 collections?",
     "Mara Lindqvist, who founded many presses.", "vague amount ('many')"),
    ("In what year was the Orchard Press founded?", "It was founded in the spring.",
     "gives no year"),
    ("The Orchard Press was founded in which year?", "Mara Lindqvist founded it.",
     "gives no year"),
])
def test_the_slot_left_vague_is_read(question: str, answer: str, why: str) -> None:
    got = vague_answer(question, lambda: CONTEXT, answer)
    assert got is not None and why in got


@pytest.mark.parametrize(("question", "answer"), [
    ("How many poetry collections did the Orchard Press publish?", "14"),
    ("In what year was the Orchard Press founded?", "It was founded in 1921."),
    ("In what year was the Orchard Press founded?", "In the 1920s."),
    ("In what year was the Orchard Press founded?", "The passage does not say."),  # negation
    ("How many poetry collections did it publish? Were there many?",
     "Many: 14 of them."),                                   # the question's own word
    ("Did the Orchard Press publish poetry.", "It published several collections."),  # no "?"
    ("Is the Orchard Press in Uppsala?", "Yes, with several others."),  # not a wh-question
    ("When was the Orchard Press founded?", "Early in the spring."),  # not "what year"
])
def test_silent_when_the_slot_is_filled_or_unclear(question: str, answer: str) -> None:
    assert vague_answer(question, lambda: CONTEXT, answer) is None


def test_the_context_own_vague_word_is_no_error() -> None:
    context = "The press published several poetry collections before it closed."
    assert vague_answer("How many collections did the press publish?", lambda: context,
                        "Several collections.") is None


@pytest.mark.parametrize("answer", [
    "Several tools: a hammer, a saw and pliers.",
    "Many tools, including a hammer.",
    "It comes with several tools, a hammer, a saw and pliers.",
])
def test_a_vague_word_that_sums_up_a_list_is_no_error(answer: str) -> None:
    context = "The kit includes a hammer, a saw and pliers."
    assert vague_answer("What does the kit include?", lambda: context, answer) is None
    assert vague_answer("What does the kit include?", lambda: context,
                        "It has several tools.") is not None
