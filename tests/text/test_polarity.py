"""Negation scope, answer particles, contrasts, opposite directions, premises, chit-chat."""

from __future__ import annotations

import pytest

from gateway.text.antonyms import directions, opposed
from gateway.text.phatic import is_phatic
from gateway.text.polarity import (
    clause_polarity,
    contrast_spans,
    flip_by_prefix,
    leading_particle,
    polar,
)
from gateway.text.premise import premise_of


@pytest.mark.parametrize(("text", "stance", "rest"), [
    ("No, it is 330 m tall.", "no", "it is 330 m tall."),
    ("No. The leaflet says not to.", "no", "The leaflet says not to."),
    ("Not really: each infusion runs for an hour.", "no", "each infusion runs for an hour."),
    ("He didn't: Aldrin walked on the Moon.", "no", "Aldrin walked on the Moon."),
    ("It didn't fall: revenue rose 8%.", "no", "revenue rose 8%."),
    ("Unfortunately not: we don't ship there.", "no", "we don't ship there."),
    ("Yes, it is 450 m tall.", "yes", "it is 450 m tall."),
    ("Correct, you can take up to 20 mg.", "yes", "you can take up to 20 mg."),
    ("Nobody knows.", None, "Nobody knows."),
    ("Notably, it rose.", None, "Notably, it rose."),
])
def test_leading_particle(text: str, stance: str | None, rest: str) -> None:
    got, start = leading_particle(text)
    assert (got, text[start:]) == (stance, rest)


def test_contrast_spans_are_rejected_alternatives() -> None:
    text = "600 V, not 1000 V."
    (a, b), = contrast_spans(text)
    assert text[a:b] == "not 1000 V"
    assert contrast_spans("covered only for dishwasher models, not washing machines.")
    assert contrast_spans("The Employee is not entitled to it.") == []
    assert contrast_spans("It is paid, not only praised.") == []  # "not only" adds


def test_negation_belongs_to_its_clause() -> None:
    first, second = clause_polarity("It has two USB-C ports and a headphone jack, but no HDMI port.")
    assert (first.negated, second.negated) == (False, True)
    hedged, = clause_polarity("This may not happen.")
    assert not hedged.negated
    text = "600 V, not 1000 V."
    assert not any(c.negated for c in clause_polarity(text, contrast_spans(text)))


def test_prefix_negation_flips_pairwise() -> None:
    plain, = clause_polarity("The T-750 is a braked trailer.")
    unbraked, = clause_polarity("The T-750 is an unbraked trailer.")
    no_brakes, = clause_polarity("The T-750 has no brakes.")
    assert flip_by_prefix(plain, unbraked)
    assert not flip_by_prefix(unbraked, unbraked)
    # "no brakes" (a cue) against "unbraked" (a prefix): both negated, no flip.
    differ = (no_brakes.negated != unbraked.negated) != flip_by_prefix(no_brakes, unbraked)
    assert no_brakes.negated and not differ
    refundable, = clause_polarity("Gift cards are refundable.")
    non, = clause_polarity("Gift cards are non-refundable.")
    assert flip_by_prefix(refundable, non)
    cannot, = clause_polarity("Gift cards can't be refunded.")
    assert (cannot.negated != non.negated) == flip_by_prefix(cannot, non)


def test_polar_prefilter() -> None:
    assert polar("It does not apply.") and polar("an unbraked trailer") and polar("revenue fell 8%")
    assert not polar("The tower is 330 m tall.")


@pytest.mark.parametrize(("answer", "context", "group"), [
    ("Revenue fell 8% to $4.2 billion", "revenue of $4.2 billion, up 8% from a year earlier",
     "change"),
    ("uptime stays above 99.9%", "uptime falls below 99.9%", "level"),
    ("the 12 months after the claim", "the 12 months preceding the claim", "time"),
    ("only the employer can end it", "either party may end it", "scope"),
])
def test_opposed_directions(answer: str, context: str, group: str) -> None:
    assert opposed(directions(answer), directions(context)) == group


def test_directions_need_a_number_where_words_have_other_senses() -> None:
    assert directions("The empire fell.") == frozenset()
    assert opposed(directions("profit rose 3%"), directions("revenue rose 8% and profit fell 3%")) \
        is None  # the context takes both sides


@pytest.mark.parametrize(("question", "premise"), [
    ("The Eiffel Tower is 450 m tall, right? Please confirm.", "The Eiffel Tower is 450 m tall"),
    ("Why did Helix's revenue fall 8% last quarter?", "Helix's revenue fall 8% last quarter"),
    ("Does the T-750 have brakes?", "the T-750 have brakes"),
    ("The rent is €1,650, so how much is the deposit?", "The rent is €1,650"),
    ("Washington Roebling designed the Brooklyn Bridge, didn't he?",
     "Washington Roebling designed the Brooklyn Bridge"),
    ("When was the Eiffel Tower built?", None),
])
def test_premise_of(question: str, premise: str | None) -> None:
    assert premise_of(question) == premise


def test_phatic() -> None:
    assert is_phatic(["glad", "helped"]) and is_phatic(["safe", "travels"])
    assert not is_phatic(["reset", "keeps", "wi", "fi", "name", "password"])
    assert not is_phatic([])
