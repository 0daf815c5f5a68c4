"""Correction markers (``gateway.text.correction``): what sets the conversation right."""

from __future__ import annotations

import pytest

from gateway.text.correction import correction_marker


@pytest.mark.parametrize("sentence", [
    "Actually, the warranty runs for two years.",
    "No, actually the depot opens in June.",
    "The Bane Chronicles is actually a cookbook.",
    "In fact, the dose is 5 mg twice a day.",
    "As a matter of fact, she never signed it.",
    "Contrary to what you heard, the fund is closed.",
    "In reality the bridge was finished in 1932.",
])
def test_a_correction_is_read(sentence: str) -> None:
    assert correction_marker(sentence)


@pytest.mark.parametrize("sentence", [
    "Have you seen Love Actually?",            # a title
    "The report is factual and short.",        # a word that contains a marker's letters
    "The warranty runs for two years.",
    "Facts about the bridge are on the sign.",
    "",
])
def test_no_marker_no_correction(sentence: str) -> None:
    assert not correction_marker(sentence)


def test_only_the_head_of_a_hostile_sentence_is_read() -> None:
    assert not correction_marker("word " * 200 + "actually wrong")
