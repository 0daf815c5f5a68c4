"""gateway.text.measures._qualifier skips its patterns when the text before a value
cannot end in a qualifier: the result must be that of trying every pattern
(``_reference``), on the qualifiers themselves in any case and spacing, on noise and
on real documents."""

from __future__ import annotations

import random
import re._constants as _c
import re._parser as _p
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.text import measures as M
from gateway.text.quantities import extract_quantities

ROOT = Path(__file__).resolve().parents[2]


def _reference(text: str, start: int, end: int) -> tuple[bool, int]:
    before = text[max(0, start - 30):start]
    approx = M._HEDGE.search(before) is not None
    bound = 1 if M._LOWER.search(before) else -1 if M._UPPER.search(before) else 0
    if bound == 1 and M._NOT_MORE.search(before):
        bound = -1
    if not bound:
        if M._AFTER_LOWER.match(text, end):
            bound = 1
        elif M._AFTER_UPPER.match(text, end):
            bound = -1
    return approx, bound


def _spell(items: Any) -> list[str]:
    """Every string a parsed pattern (literals, groups, alternations, ``?``, ``\\s+``;
    assertions and boundaries left out) can match, with one space for ``\\s+``."""
    outs = [""]
    for op, av in items:
        if op is _c.LITERAL:
            alts = [chr(av)]
        elif op is _c.SUBPATTERN:
            alts = _spell(av[3])
        elif op is _c.BRANCH:
            alts = [s for branch in av[1] for s in _spell(branch)]
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
            lo, _hi, body = av
            inner = _spell(body)
            assert lo <= 1, "a qualifier pattern repeats only with ?, * or +"
            alts = ([""] if lo == 0 else []) + inner
        elif op is _c.IN:
            alts = [" "]
        elif op in (_c.AT, _c.ASSERT_NOT, _c.ASSERT):
            alts = [""]
        else:
            raise AssertionError(f"unexpected {op} in a qualifier pattern")
        outs = [o + a for o in outs for a in alts]
    return outs


def _alternatives() -> list[str]:
    """Every qualifier the three patterns match, spelled out ("close to", "min.")."""
    out: set[str] = set()
    for pattern in (M._HEDGE, M._LOWER, M._UPPER):
        out.update(s.strip() for s in _spell(_p.parse(pattern.pattern, pattern.flags)))
    return sorted(out)


def _check(text: str, start: int, end: int) -> None:
    assert M._qualifier(text, start, end) == _reference(text, start, end), (text, start)


@pytest.mark.parametrize("case", [str.lower, str.upper, str.title])
def test_every_qualifier_in_any_case(case: object) -> None:
    alts = _alternatives()
    assert "at least" in alts and "approx." in alts and "a maximum of" in alts
    for alt in alts:
        for pre, gap in (("", " "), ("it was ", "  "), ("(", ""), ("x", " "), ("not ", "\t"),
                         ("no ", "\n"), ("ſ", " ")):
            text = f"{pre}{case(alt)}{gap}12 mg"  # type: ignore[operator]
            start = text.index("12")
            _check(text, start, start + 2)


def test_noise() -> None:
    rng = random.Random(13)
    pieces = ["over", "Under", "than", "more", "not", "no", "of", "to", "min", "max", ".", " ",
              "\n", "~", "<", "=", ">", "approx", "ſome", "K", "ı", "about", "least", "at",
              "x", "5", "\u00a0", "≈", "-"]
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) + " 7 or more"
        start = len(text) - len("7 or more")
        _check(text, start, start + 1)


def test_real_documents() -> None:
    rows = [orjson.loads(line) for line in
            (ROOT / "data/halueval/halueval-dev.jsonl").read_bytes().splitlines()[:300]]
    for text in [t for r in rows for t in (r.get("context_input") or "", r["model_output"])]:
        dates, numbers = extract_quantities(text)
        for q in [*numbers, *dates]:
            _check(text, q.start, q.end)
