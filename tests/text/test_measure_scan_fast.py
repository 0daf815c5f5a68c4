"""gateway.text.measures skips its clock-time and "an hour" patterns on ASCII text
where a cheap necessary test finds nothing (``_CLOCK_DIGITS``, ``_ARTICLE_NEXT``): the
measures must be those of always running the patterns, on the forms themselves in any
case and spacing, on noise and on real documents."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest

from gateway.text import measures as M
from gateway.text.quantities import extract_quantities
from gateway.text.tokens import tokenize

ROOT = Path(__file__).resolve().parents[2]


def _measures(text: str) -> list[M.Measure]:
    dates, numbers = extract_quantities(text)
    return M.sentence_measures(text, numbers, dates, frozenset(tokenize(text)))


def _check(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _measures(text)
    with monkeypatch.context() as m:  # the tests never match: the patterns always run
        m.setattr(M, "_CLOCK_DIGITS", _Always())
        m.setattr(M, "_ARTICLE_NEXT", _Always())
        slow = _measures(text)
    assert fast == slow, text


class _Always:
    """A stand-in for the prefilter patterns that finds everything."""

    def search(self, text: str) -> object:
        return True

    def findall(self, text: str) -> frozenset[str]:
        return M._ARTICLE_UNITS


FORMS = ["10:05", "9:30 PM", "10.05 pm", "10.05pm", "2 pm", "2pm", "11 a.m.", "7 A.M",
         "noon", "Midnight", "NOON", "an hour", "half an hour", "half a mile", "A month and a "
         "half", "for a week", "within an Hour", "one litre and a half", "a tenth", "Half "
         "A KILOGRAM", "lasted a day", "once a year", "2 am", "12:00", "3.5 km"]


@pytest.mark.parametrize("form", FORMS)
def test_every_form_in_context(form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for pre, post in (("", ""), ("It took ", " to finish."), ("At ", ", 5 people came."),
                      ("(", ")"), ("ſ ", " 3 kg"), ("\u00a0", " 4 m"), ("x", "y 8")):
        _check(f"{pre}{form}{post}", monkeypatch)
        _check(f"{pre}{form.upper()}{post}", monkeypatch)


def test_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(17)
    pieces = ["a", "an", "one", "half", "hour", "Hours", "mile", "day", " ", "  ", "\t",
              "\n", "12", "5", ":", ".", "30", "pm", "a.m.", "m", "p", "noon", "ı", "ſ",
              "\u00a0", "and a half", "for", "tenth", "week", "kg", ",", "-"]
    for _ in range(3000):
        _check("".join(rng.choice(pieces) for _ in range(rng.randint(1, 14))), monkeypatch)


def test_real_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [orjson.loads(line) for line in
            (ROOT / "data/halueval/halueval-dev.jsonl").read_bytes().splitlines()[:300]]
    for text in [t for r in rows for t in (r.get("context_input") or "", r["model_output"])]:
        for piece in text.split(". "):
            _check(piece, monkeypatch)
