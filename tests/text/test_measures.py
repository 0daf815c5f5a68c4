"""Units and measures: numbers read with unit, dimension, hedge and bound, and compared."""

from __future__ import annotations

import pytest

from gateway.text.measure_relation import CONFLICT, MATCH, UNRELATED, relation
from gateway.text.measures import Measure, sentence_measures
from gateway.text.quantities import extract_quantities
from gateway.text.units import read_unit


def measures(text: str) -> list[Measure]:
    dates, numbers = extract_quantities(text)
    return sentence_measures(text, numbers, dates)


def one(text: str) -> Measure:
    got = measures(text)
    assert len(got) == 1, got
    return got[0]


@pytest.mark.parametrize(("text", "dim", "name"), [
    (" m tall", "length", "m"), (" metres", "length", "m"), ("-inch display", "length", "in"),
    (" feet", "length", "ft"), (" mg", "mass", "mg"), (" kilograms", "mass", "kg"),
    (" lb", "mass", "lb"), (" minutes", "time", "min"), (" business days", "time", "d"),
    (" litres per hour", "volume/time", "l/h"), (" litres an hour", "volume/time", "l/h"),
    (" km/h", "length/time", "km/h"), (" mph", "length/time", "mph"), (" °C", "temperature", "°C"),
    (" TB", "data", "TB"), (" Nm", "torque", "Nm"), (" Wh", "energy", "Wh"), (" V", "voltage", "V"),
])
def test_read_unit(text: str, dim: str, name: str) -> None:
    got = read_unit(text, 0)
    assert got is not None and (got[0].dim, got[0].name) == (dim, name)


@pytest.mark.parametrize("text", [" patients", " tall", " to 13", " kg a piece"[:0] + " people",
                                  " of them", ""])
def test_a_word_that_is_no_unit_gives_none(text: str) -> None:
    assert read_unit(text, 0) is None


def test_a_count_keeps_its_noun_and_a_percentage_is_its_own_kind() -> None:
    assert (one("15 patients reported").dim, one("15 patients reported").noun) == ("count", "patients")
    assert one("by 15% of patients").dim == "percent"
    assert one("it costs $610 million").dim == "currency:$"
    assert one("due by the 5th day").dim == "ordinal"


def test_hedges_and_bounds() -> None:
    assert one("about 1,083 feet").approx
    assert one("more than $100 billion").bound == 1
    assert one("up to 3,000 litres per hour").bound == -1
    assert one("Do not take more than 10 mg per day").bound == -1  # "not ... more than"
    assert one("under $50").bound == -1


def test_ranges_clocks_words_and_fractions() -> None:
    low, high = measures("Chuck capacity: 1.5 to 13 mm.")
    assert (low.dim, low.base) == ("length", pytest.approx(0.0015))
    assert [m.dim for m in measures("from 10:05 to 13:10 UTC")] == ["clock", "clock"]
    assert one("before 2 pm").value == 14.0
    assert one("a fixed 4.25% a year").dim == "percent"  # not the time 4:25
    assert one("runs for an hour").base == 3600.0
    assert one("another half hour").base == 1800.0
    assert one("about a month and a half").value == 1.5
    assert (one("up to a tenth of the balance").dim, one("up to a tenth of it").value) == \
        ("percent", 10.0)
    assert one("up to 1000 V").dim == "voltage"  # a bare "year" with a unit is a quantity


@pytest.mark.parametrize(("answer", "context", "expected"), [
    ("330 metres", "330 m", MATCH),
    ("about 1,083 feet", "330 m", MATCH),           # conversion, rounded
    ("330 feet", "330 m", CONFLICT),                # same number, wrong unit
    ("5 g", "5 mg", CONFLICT),
    ("5 mg", "5 ml", CONFLICT),                     # another dimension, same number
    ("15 patients", "15%", CONFLICT),               # a count is no percentage
    ("60 seconds", "60 minutes", CONFLICT),
    ("50 litres per minute", "3,000 litres per hour", MATCH),
    ("3,000 litres per minute", "3,000 litres per hour", CONFLICT),
    ("two years", "24 months", MATCH),
    ("roughly $4 billion", "$4.2 billion", MATCH),
    ("roughly $5 billion", "$4.2 billion", CONFLICT),
    ("about $18.5bn", "$16.5 billion", CONFLICT),
    ("nearly 7%", "6.8%", MATCH),
    ("about a month and a half", "6 weeks", MATCH),
    ("about three months", "6 weeks", CONFLICT),
    ("more than $100 billion", "about $120 billion", MATCH),
    ("over $50", "under $50", CONFLICT),            # opposite bounds on one value
    ("eight people", "8 persons", MATCH),
    ("3 kg", "3 days", UNRELATED),
])
def test_relation(answer: str, context: str, expected: int) -> None:
    assert relation(one(answer), one(context)) == expected
