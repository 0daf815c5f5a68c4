"""Date comparisons ("Who was born first, A or B?") checked against the context's years."""

from __future__ import annotations

import pytest

from gateway.text.comparison import comparison_conflict

PEOPLE = ["Mara Lindqvist (3 May 1921 – 1990) was a Swedish botanist.",
          "Oskar Hale (born 12 June 1917) is a retired English engineer."]
FILMS = ["Harbour Lights is a 1962 British drama film.",
         "The Long Field is a 1958 documentary about farming.Night Run is a 1975 thriller."]


@pytest.mark.parametrize(("question", "context", "answer"), [
    ("Who was born first, Mara Lindqvist or Oskar Hale?", PEOPLE,
     "Mara Lindqvist was born first."),
    ("Who is older: Mara Lindqvist or Oskar Hale?", PEOPLE, "Mara Lindqvist"),
    ("Which film is more recent, Harbour Lights or The Long Field?", FILMS,
     "The Long Field is more recent."),
    ("Which film came out earlier, Night Run or The Long Field?", FILMS,   # glued sentences
     "Night Run came out before The Long Field."),
])
def test_the_alternative_the_years_rule_out_is_wrong(question: str, context: list[str],
                                                     answer: str) -> None:
    why = comparison_conflict(question, lambda: context, answer)
    assert why is not None and "the context's years say otherwise" in why


@pytest.mark.parametrize(("question", "context", "answer"), [
    ("Who was born first, Mara Lindqvist or Oskar Hale?", PEOPLE, "Oskar Hale"),
    ("Who was born first, Mara Lindqvist or Oskar Hale?", PEOPLE,
     "Oskar Hale was born before Mara Lindqvist."),
    ("Who was born first, Mara Lindqvist or Oskar Hale?", PEOPLE,
     "Mara Lindqvist was born after Oskar Hale."),          # both named, other direction
    ("Who was born first, Mara Lindqvist or Oskar Hale?", PEOPLE,
     "It is not Mara Lindqvist."),                           # a hedge or rejection: silent
    ("Who was born first, Mara Lindqvist or Oskar Hale?", PEOPLE, "Nobody knows."),
    ("Who was born first, Mara Lindqvist or Ada Byrne?", PEOPLE, "Mara Lindqvist"),  # no year
    ("Which film is longer, Harbour Lights or The Long Field?", FILMS, "Harbour Lights"),
    ("Was Harbour Lights made first?", FILMS, "The Long Field"),  # no alternatives
])
def test_nothing_is_said_when_the_answer_is_right_or_unclear(
        question: str, context: list[str], answer: str) -> None:
    assert comparison_conflict(question, lambda: context, answer) is None


def test_a_number_with_a_comma_is_one_alternative() -> None:
    ctx = ["20,000 Leagues Under the Sea is a 1954 American film.",
           "Superdad is a 1973 Disney comedy film."]
    q = "Which was created first, 20,000 Leagues Under the Sea or Superdad?"
    assert comparison_conflict(q, lambda: ctx, "20,000 Leagues Under the Sea") is None
    assert comparison_conflict(q, lambda: ctx, "Superdad was made first.") is not None


def test_the_context_is_read_only_for_a_date_comparison() -> None:
    def unread() -> list[str]:
        raise AssertionError("context read for a question that compares nothing")
    assert comparison_conflict("What is the capital of France?", unread, "Paris") is None
    assert comparison_conflict("Is it red or blue?", unread, "Red") is None  # no direction
