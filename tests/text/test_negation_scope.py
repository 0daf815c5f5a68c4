"""The word a negation governs (``gateway.text.negation_scope``)."""

from __future__ import annotations

import pytest

from gateway.text.negation_scope import governed_stems, scope_shared
from gateway.text.stem import stem


@pytest.mark.parametrize(("clause", "word"), [
    ("The festival will not return next year", "return"),
    ("there was nothing that could have stopped Cook switching", "stopped"),
    ("The pass is not refundable", "refundable"),
    ("It isn't available in red", "available"),
    ("The trailer has no brakes", "brakes"),
    ("Do not freeze", "freeze"),
])
def test_a_cue_governs_the_next_content_word(clause: str, word: str) -> None:
    assert governed_stems(clause) == {stem(word)}


@pytest.mark.parametrize("clause", [
    "Not Paris but Lyon",            # a name after the cue: no predicate to read
    "Sale items are non-returnable",  # a prefix negation is compared elsewhere
    "It is fine, isn't it",           # nothing after the cue
])
def test_nothing_readable_is_governed(clause: str) -> None:
    assert governed_stems(clause) == frozenset()
    assert scope_shared(clause, frozenset({"anything"}))


def test_the_other_clause_must_use_the_negated_word() -> None:
    ctx = "the festival will not return next year"
    assert scope_shared(ctx, frozenset({stem("festival"), stem("return")}))
    assert not scope_shared(ctx, frozenset({stem("festival"), stem("cancellation")}))
