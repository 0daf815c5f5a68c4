"""Choice questions ("Who founded the Orchard Press, Mara Lindqvist or Oskar Hale?")
checked against what the context says of each alternative."""

from __future__ import annotations

import pytest

from gateway.text.choice import choice_conflict

PRESS = ["Mara Lindqvist founded the Orchard Press in Uppsala and ran its poetry list.",
         "Oskar Hale is an English engineer who designed tidal turbines."]
BANDS = ["The Velvet Orchard are an indie band from Leeds.",
         "Copper Lanterns were a folk trio.He later said they were from Galway in Ireland."]


@pytest.mark.parametrize(("question", "context", "answer"), [
    ("Who founded the Orchard Press, Mara Lindqvist or Oskar Hale?", PRESS,
     "Oskar Hale founded it."),
    ("Which engineer designed tidal turbines: Mara Lindqvist or Oskar Hale?", PRESS,
     "Mara Lindqvist designed them."),
    ("Copper Lanterns or The Velvet Orchard, which band is an indie band from Leeds?", BANDS,
     "Copper Lanterns."),
])
def test_the_alternative_the_context_does_not_say_it_of_is_wrong(
        question: str, context: list[str], answer: str) -> None:
    why = choice_conflict(question, lambda: context, answer)
    assert why is not None and "but the context says it of" in why


@pytest.mark.parametrize(("question", "context", "answer"), [
    ("Who founded the Orchard Press, Mara Lindqvist or Oskar Hale?", PRESS, "Mara Lindqvist"),
    ("Who founded the Orchard Press, Mara Lindqvist or Oskar Hale?", PRESS,
     "It was not Oskar Hale."),                              # a negation: silent
    ("Who founded the Orchard Press, Mara Lindqvist or Oskar Hale?", PRESS,
     "Both of them."),                                       # names neither
    ("Who founded the Orchard Press, Mara Lindqvist or Oskar Hale?", PRESS,
     "Mara Lindqvist and Oskar Hale."),                      # names both
    ("Who is older, Mara Lindqvist or Oskar Hale?", PRESS, "Oskar Hale"),  # a comparison
    ("Who founded the Orchard Press, Mara Lindqvist or Ada Byrne?", PRESS,
     "Ada Byrne"),                                           # the context never names her
    ("Which band is from Galway, Copper Lanterns or The Velvet Orchard?", BANDS,
     "Copper Lanterns"),                                     # "He later said …" counts
    ("Who founded the Orchard Press?", PRESS, "Oskar Hale"),  # no choice
    ("Who founded the Orchard Press, Mara Lindqvist or Oskar Hale?",   # one sentence
     ["Mara Lindqvist and Oskar Hale founded the Orchard Press together."], "Oskar Hale"),
])
def test_silent_when_unclear_or_right(question: str, context: list[str], answer: str) -> None:
    assert choice_conflict(question, lambda: context, answer) is None


def test_the_context_is_read_only_for_a_choice_question() -> None:
    def boom() -> list[str]:
        raise AssertionError("read")
    assert choice_conflict("Who founded the Orchard Press?", boom, "Oskar Hale") is None
