"""A name the context lacks that varies one word of a context name (gateway.text.name_variants)."""

from __future__ import annotations

import pytest

from gateway.text.name_variants import fold, name_variant, near_spelling, numeral_value, spelled_alike
from gateway.text.names import name_key

CONTEXT = ["Second World War", "Henry VIII", "Tom Cruise", "Kansas City Chiefs", "AFC South", "Maria Ortega", "Romance Film"]
KNOWN = {"tom", "cruise", "kansas", "city", "chiefs", "afc", "south", "maria", "ortega",
         "romance", "film", "drama"}


def variant(name: str) -> str | None:
    keys = {name_key(n): n for n in CONTEXT}
    got = name_variant(name_key(name), list(keys), lambda w: w in KNOWN)
    return keys[got] if got is not None else None


@pytest.mark.parametrize(("name", "varies"), [
    ("Tom Hanks", "Tom Cruise"),                   # one word replaced by a new one
    ("Kansas City Royals", "Kansas City Chiefs"),
    ("AFC East", "AFC South"),
    ("Tom Cruise", None),                          # the context's own name
    ("Cruise", None),                              # a shortening, one word
    ("Maria Ortego", None),                        # a spelling of the same word
    ("Romantic Film", None),                       # an inflection (same first letters)
    ("Drama Film", None),                          # the new word is a context word
    ("Jim Hanks", None),                           # two words differ
    ("Kansas Royals", None),                       # another number of words
    ("World War Two", None),                       # the same number written another way
    ("Henry 8", None),
    ("Henry IX", "Henry VIII"),                    # another number
])
def test_a_variant_keeps_all_but_one_word_and_brings_a_new_one(name: str,
                                                               varies: str | None) -> None:
    assert variant(name) == varies


def test_near_spelling() -> None:
    assert near_spelling("scoot", "scott") and near_spelling("romantic", "romance")
    assert not near_spelling("hanks", "cruise") and not near_spelling("east", "south")


def test_numeral_value() -> None:
    assert [numeral_value(w) for w in ("two", "second", "2", "2nd", "ii", "viii", "xliv")] == [
        2, 2, 2, 2, 2, 8, 44]
    assert numeral_value("hanks") is None and numeral_value("civil") is None


def test_accents_ligatures_and_glued_words_are_spellings() -> None:
    assert fold("æon") == "aeon" and fold("söderling") == "soderling" and fold("flux") == "flux"
    assert near_spelling("aeon", "fluxæon")          # "Æon Flux" glued to the word before
    assert not near_spelling("aeon", "flux") and not near_spelling("aeon", "fluxion")


def test_spelled_alike_is_one_edit_in_one_long_enough_word() -> None:
    def alike(a: str, b: str) -> bool:
        return spelled_alike(name_key(a), name_key(b))
    assert alike("The Scarlett Letter", "The Scarlet Letter")
    assert alike("Maria Ortego", "Maria Ortega") and alike("Jose Müller", "Jose Muller")
    assert not alike("Wild Dogs", "Wild Hogs")          # a short word: another word
    assert not alike("Tom Hanks", "Tom Cruise") and not alike("Ann Ortega", "Maria Ortega")
    assert not alike("Paul Walker", "Paul Talker")       # another first letter
    assert not alike("Scarlet", "Scarlett")              # one word: not compared
