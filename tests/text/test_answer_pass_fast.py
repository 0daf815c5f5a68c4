"""Session 8's cheaper steps of the grounding layer's pass over the answer sentences
must give what their plain forms give: each shortcut against a reference written the
plain way (``_PLAIN_*`` / ``_reference_*`` here), on every sentence of the repository's
labelled texts and on noise built to hit the shortcut's edges.

- ``frames._CLAUSE_CUT``: opens with the class of the characters a cut starts with, a
  look-behind per branch (was an alternation of three branches).
"""

from __future__ import annotations

import random
import re

from corpus_texts import assert_same_matches, real_texts

from gateway.text import frames as F
from gateway.text.tokens import split_sentences

_PLAIN_CLAUSE_CUT = re.compile(
    r"[;:()]\s*|,\s+(?:(?:and|but|while|whereas|or|so|although|though|which|who|whose)\s*)?|"
    r"\s+(?:(?:but|while|whereas|although|though|because|unless)\s+|and\s+(?=[A-Z])|"
    r"[—–-]\s+)")

_PIECES = [" ", "  ", "\t", "\n", "\u00a0", ",", ", ", ",  ", ";", ":", "(", ")", " (", ") ",
           " - ", " — ", " – ", "-", " but ", " and ", " and The", " and the", ", and ",
           ", which", ",which", " while ", " unless", " because ", " though", "although ",
           "word", "Name", "330 m", "it's", "é", "x"]


def _sentences() -> list[str]:
    return [s.text for t in real_texts() for s in split_sentences(t)]


def _noise(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 12))) for _ in range(n)]


def test_clause_cut_is_the_plain_alternation() -> None:
    texts = _sentences()
    cuts = 0
    for text in texts + _noise(8, 20000):
        assert_same_matches(F._CLAUSE_CUT, _PLAIN_CLAUSE_CUT, text)
        cuts += len(F.clauses(text)) > 1
    assert len(texts) > 5000 and cuts > 3000  # many sentences have more than one clause
