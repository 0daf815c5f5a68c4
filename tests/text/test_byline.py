"""Attribution prefixes in summaries ("Errol Louis: …") are dropped; other colons stay."""

from __future__ import annotations

import pytest

from gateway.text.byline import strip_attributions


@pytest.mark.parametrize(("text", "expected"), [
    ("Errol Louis: The magazine is not holding its staff accountable.",
     "The magazine is not holding its staff accountable."),
    ("A team finds lapses. Errol Louis: The magazine changed nothing.",
     "A team finds lapses. The magazine changed nothing."),
    ("David Wheeler: Corinthian will close. Wheeler: Debts should be forgiven.",
     "Corinthian will close. Debts should be forgiven."),
    ("Report: Police ignored the complaints.", "Police ignored the complaints."),
    ("He left.\nREAD: More on the story", "He left.\nMore on the story"),
])
def test_an_opening_attribution_is_dropped(text: str, expected: str) -> None:
    assert strip_attributions(text) == expected


@pytest.mark.parametrize("text", [
    "The reason: it rained all week.",             # a lower-case word before the colon
    "The train leaves at 6:30 from platform 2.",   # a clock time
    "One Two Three Four Five: too long for a name.",
    "He said the Senate Committee: nothing else.",  # not at a sentence's start
    "No colon here at all.",
    "Errol Louis:",                                 # nothing after it
])
def test_other_colons_are_kept(text: str) -> None:
    assert strip_attributions(text) == text
