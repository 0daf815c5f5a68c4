"""Stems, frames, anchors, names and derivations: the pieces of fact alignment."""

from __future__ import annotations

from gateway.text.anchors import anchor, anchored
from gateway.text.context_facts import context_facts
from gateway.text.derive import derivations, operands_of
from gateway.text.frames import Filler, make_slots, slot_similarity
from gateway.text.index import build_index
from gateway.text.measures import sentence_measures
from gateway.text.names import acronym_of, name_key, names_in, proper_words, same_name
from gateway.text.quantities import extract_quantities
from gateway.text.stem import stem
from gateway.text.tokens import entity_candidates


def test_stem_joins_inflections_and_derivations() -> None:
    for a, b in [("designed", "designer"), ("invest", "investment"), ("refunded", "refundable"),
                 ("began", "begun"), ("monthly", "month"), ("completed", "completion"),
                 ("people", "persons"), ("daily", "day")]:
        assert stem(a) == stem(b), (a, b)
    assert stem("capital") != stem("capture")


def test_a_date_binds_to_its_own_verb() -> None:
    text = "Construction began on 28 January 1887 and was completed on 31 March 1889."
    first, second = make_slots(text, [Filler(22, 37, "date", "#1887"),
                                      Filler(59, 72, "date", "#1889")])
    assert first.left["begin"] > first.left.get("complet", 0)
    assert second.left["complet"] == 1.0 and second.left.get("begin", 0) < 0.5
    answer, = make_slots("It was completed in January 1887.", [Filler(20, 32, "date", "#x")])
    idf = {"complet": 2.0, "begin": 2.0, "construct": 2.0}.get
    assert slot_similarity(answer, second, lambda k: idf(k) or 1.0) > \
        slot_similarity(answer, first, lambda k: idf(k) or 1.0)


def test_anchor_finds_a_copied_sentence_with_another_name() -> None:
    got = anchor("Lyon is the capital of France.", 0, 4,
                 "Paris is the capital and largest city of France.", 0, 5)
    assert anchored(got)
    chance = anchor("CLICK HERE for all the latest Chelsea news.", 29, 36,
                    "In the latest Barclays video they spoke.", 14, 22)
    assert not anchored(chance)


def test_names() -> None:
    ctx = "Velmoxin is taken once daily. Marseille is second and Lyon the third-largest."
    proper = proper_words(ctx)
    assert {"velmoxin", "marseille", "lyon"} <= proper and "is" not in proper
    opener = "Lyon is the capital of France."
    assert [n.text for n in names_in(opener, entity_candidates(opener), proper)][0] == "Lyon"
    assert same_name(name_key("John Roebling"), name_key("John A. Roebling"))
    assert same_name(name_key("Helix"), name_key("Helix Corp"))
    assert not same_name(name_key("Emily Warren Roebling"), name_key("Washington Roebling"))
    assert name_key("SolarGrid") == frozenset({"solar", "grid"})
    assert acronym_of("CPS", "Child Protective Services")


def _m(text: str):  # type: ignore[no-untyped-def]
    dates, numbers = extract_quantities(text)
    return sentence_measures(text, numbers, dates)


def test_derivations_use_stated_operands_only() -> None:
    ctx = _m("In the trial, 120 patients received it; nausea was reported by 15% of patients.")
    eighteen, = _m("which is 18 people")
    assert derivations(eighteen, operands_of(ctx, "context"))
    twenty_five, = _m("which is 25 people")
    assert not derivations(twenty_five, operands_of(ctx, "context"))
    rent = _m("The monthly rent is €1,450. The deposit equals two months' rent.")
    deposit, = _m("the deposit is €2,900")
    assert derivations(deposit, operands_of(rent, "context"))
    big, = _m("about 480,000 fryers")
    assert not derivations(big, operands_of(_m("about 48,000 fryers, 12 reports"), "context"))


def test_context_facts_are_memoized_per_index() -> None:
    index = build_index([("c", "The tower is 330 m tall. It was completed on 31 March 1889.")])
    facts = context_facts(index)
    assert facts is context_facts(index)
    assert [m.text for m in facts.measures(0)] == ["330 m"]
    assert [d.text for _, d in facts.dated()] == ["31 March 1889"]
    assert facts.by_dim()["length"][0][0] == 0
